//! `GET /v1/boards/{board}/distribution`: bucket counts and top-share cut-offs of real boards
//! read by `read_distribution.lua`, checked against the sorted list of their scores (points
//! boards and lower-is-better score boards).

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::{Value, json};
use standings::domain::tiebreak;
use standings_tests::{TestApp, at, day, spawn_ingest};

const SHARES: [i64; 5] = [1, 5, 10, 25, 50];

/// Checks an answer for a board holding `points` against the sorted list itself, from what
/// the API promises rather than from the script's formula: buckets tile lowest..=highest without
/// gaps, all of one width but the one cut short (the lowest-score bucket where lower is
/// better, else the highest), that width is the narrowest that fits in `buckets`, each count
/// is what the sorted list holds between its bounds, and each cut-off is the score of the
/// member at rank ceil(n · p / 100) counted from the best.
fn check_shape(points: &[i64], buckets: i64, ascending: bool, body: &Value) -> Result<(), TestCaseError> {
    let mut sorted = points.to_vec();
    sorted.sort_unstable();
    prop_assert_eq!(body["total"].as_u64(), Some(points.len() as u64));
    let rows: Vec<(i64, i64, usize)> = body["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["min"].as_i64().unwrap(), b["max"].as_i64().unwrap(), b["count"].as_u64().unwrap() as usize))
        .collect();
    let (Some(&lowest), Some(&highest)) = (sorted.first(), sorted.last()) else {
        prop_assert!(rows.is_empty() && body["cutoffs"] == json!([]), "{}", body);
        return Ok(());
    };
    prop_assert!(!rows.is_empty() && rows.len() as i64 <= buckets, "{} buckets for {}: {}", rows.len(), buckets, body);
    prop_assert_eq!((rows[0].0, rows[rows.len() - 1].1), (lowest, highest));
    for pair in rows.windows(2) {
        prop_assert_eq!(pair[1].0, pair[0].1 + 1, "buckets touch: {}", body);
    }
    let widths: Vec<i64> = rows.iter().map(|(min, max, _)| max - min + 1).collect();
    let full = *widths.iter().max().unwrap();
    let short = if ascending { 0 } else { widths.len() - 1 };
    for (i, &w) in widths.iter().enumerate() {
        prop_assert!(w == full || (i == short && w < full), "widths {:?} ({})", widths, if ascending { "asc" } else { "desc" });
    }
    let span = highest - lowest + 1;
    prop_assert!(
        full == 1 || (span + full - 2) / (full - 1) > buckets,
        "width {} is not the narrowest for {} buckets over {}",
        full,
        buckets,
        span
    );
    for &(min, max, count) in &rows {
        let inside = sorted.partition_point(|&p| p <= max) - sorted.partition_point(|&p| p < min);
        prop_assert_eq!(count, inside, "{}..={}", min, max);
    }
    let best_first: Vec<i64> = if ascending { sorted.clone() } else { sorted.iter().rev().copied().collect() };
    let n = sorted.len();
    for cutoff in body["cutoffs"].as_array().unwrap() {
        let share = cutoff["top_percent"].as_u64().unwrap() as usize;
        let rank = (n * share).div_ceil(100).max(1);
        prop_assert_eq!(cutoff["score"].as_i64(), Some(best_first[rank - 1]), "{}% of {}", share, n);
    }
    let shares: Vec<u64> = body["cutoffs"].as_array().unwrap().iter().map(|c| c["top_percent"].as_u64().unwrap()).collect();
    prop_assert_eq!(shares, SHARES.iter().map(|&s| s as u64).collect::<Vec<_>>());
    Ok(())
}

/// Replaces the `activity` day board of 2026-11-22 with members holding `points`, reached at
/// distinct seconds (ties among equal points are the tie-break's business, not the shape's).
async fn load(app: &TestApp, points: &[i64]) {
    let key = app.keys.board("activity").period(&day("2026-11-22"));
    let mut pipe = redis::pipe();
    pipe.del(&key).ignore();
    for (i, &p) in points.iter().enumerate() {
        let reached = at("2026-11-22T01:00:00Z") + chrono::Duration::seconds(i as i64);
        pipe.zadd(&key, format!("u{i}"), tiebreak::encode(p, reached).unwrap()).ignore();
    }
    let () = pipe.query_async(&mut app.redis.clone()).await.unwrap();
}

fn shape(body: &Value) -> Value {
    json!({"total": body["total"], "buckets": body["buckets"], "cutoffs": body["cutoffs"]})
}

fn points() -> impl Strategy<Value = Vec<i64>> {
    prop_oneof![
        prop::collection::vec(0..=20i64, 0..40),
        prop::collection::vec(0..=tiebreak::MAX_POINTS, 1..40),
        prop::collection::vec(prop_oneof![Just(0i64), Just(7), Just(tiebreak::MAX_POINTS)], 1..20),
    ]
}

#[test]
fn random_boards_have_the_shape_the_sorted_list_gives() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let app = runtime.block_on(spawn_ingest());
    let result = TestRunner::new(RunnerConfig { cases: 96, ..RunnerConfig::default() }).run(&(points(), 1..=12i64), |(points, buckets)| {
        runtime.block_on(async {
            load(&app, &points).await;
            let (status, body) = app.get(&format!("/v1/boards/activity/distribution?buckets={buckets}")).await;
            prop_assert_eq!(status.as_u16(), 200, "{}", body);
            check_shape(&points, buckets, false, &body)
        })
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

/// Replaces the `lap-times` (lower is better) day board of 2026-11-22 with members holding
/// `scores`, encoded with the board's own scale.
async fn load_laps(app: &TestApp, scores: &[i64]) {
    let board = app.config.board("lap-times").unwrap();
    let period = standings::domain::period::Period::on_date(
        standings::domain::period::PeriodKind::Day,
        chrono::NaiveDate::from_ymd_opt(2026, 11, 22).unwrap(),
        board.timezone,
    );
    let scale = standings::domain::scores::scale(board, &period);
    let key = app.keys.board("lap-times").period(&period);
    let mut pipe = redis::pipe();
    pipe.del(&key).ignore();
    for (i, &score) in scores.iter().enumerate() {
        let reached = at("2026-11-22T01:00:00Z") + chrono::Duration::seconds(i as i64);
        pipe.zadd(&key, format!("r{i}"), scale.encode(score, reached).unwrap()).ignore();
    }
    let () = pipe.query_async(&mut app.redis.clone()).await.unwrap();
}

#[test]
fn random_lower_is_better_boards_have_the_shape_the_sorted_list_gives() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let app = runtime.block_on(spawn_ingest());
    let scores = prop_oneof![
        prop::collection::vec(0..=30i64, 0..40),
        prop::collection::vec(0..=standings::domain::scores::MAX_SCORE, 1..40),
        prop::collection::vec(prop_oneof![Just(0i64), Just(61_250), Just(standings::domain::scores::MAX_SCORE)], 1..20),
    ];
    let result = TestRunner::new(RunnerConfig { cases: 64, ..RunnerConfig::default() }).run(&(scores, 1..=12i64), |(scores, buckets)| {
        runtime.block_on(async {
            load_laps(&app, &scores).await;
            let (status, body) = app.get(&format!("/v1/boards/lap-times/distribution?period=day&at=2026-11-22&buckets={buckets}")).await;
            prop_assert_eq!(status.as_u16(), 200, "{}", body);
            check_shape(&scores, buckets, true, &body)
        })
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

#[tokio::test]
async fn a_distribution_names_its_period_is_cacheable_and_reads_written_events() {
    let app = spawn_ingest().await;
    for (i, action) in ["comment", "comment", "praise"].iter().enumerate() {
        let (status, body) = app
            .event(json!({"event_id": format!("d{i}"), "user_id": format!("u{}", i % 2), "action": action, "target": format!("a{i}")}))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, headers, body) = app.get_with_headers("/v1/boards/activity/distribution?buckets=2").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["cache-control"], "public, max-age=5");
    assert_eq!((&body["board"], &body["period"], &body["period_id"]), (&json!("activity"), &json!("day"), &json!("2026-11-22")));
    // u0: comment + praise = 5, u1: comment = 3.
    // Scores 3..=5 in two buckets: width ceil(3 / 2) = 2.
    assert_eq!(body["buckets"], json!([{"min": 3, "max": 4, "count": 1}, {"min": 5, "max": 5, "count": 1}]));
    assert_eq!(body["cutoffs"][0], json!({"top_percent": 1, "score": 5}));
    assert_eq!(body["cutoffs"][4], json!({"top_percent": 50, "score": 5}));

    let (_, month) = app.get("/v1/boards/activity/distribution?period=month").await;
    assert_eq!((&month["period_id"], &month["total"]), (&json!("2026-11"), &json!(2)));
    let (_, empty) = app.get("/v1/boards/activity/distribution?at=2026-11-01").await;
    assert_eq!(shape(&empty), json!({"total": 0, "buckets": [], "cutoffs": []}));
}

#[tokio::test]
async fn bad_distribution_requests_are_refused_with_a_clear_error() {
    let app = spawn_ingest().await;
    for (path, status, code) in [
        ("/v1/boards/activity/distribution?buckets=0", 400, "out_of_range"),
        ("/v1/boards/activity/distribution?buckets=101", 400, "out_of_range"),
        ("/v1/boards/activity/distribution?buckets=x", 400, "malformed"),
        ("/v1/boards/activity/distribution?period=week", 400, "unknown_period"),
        ("/v1/boards/activity/distribution?bucket=3", 400, "malformed"),
        ("/v1/boards/nope/distribution", 404, "unknown_board"),
        ("/v1/boards/hot-videos/distribution", 404, "unknown_board"),
    ] {
        let (got, body) = app.get(path).await;
        assert_eq!((got.as_u16(), body["error"]["code"].as_str().unwrap()), (status, code), "{path}: {body}");
    }
}
