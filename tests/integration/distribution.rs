//! `GET /v1/boards/{board}/distribution`: bucket counts and top-share cut-offs of real boards
//! read by `read_distribution.lua`, compared with a plain sorted-list oracle.

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::{Value, json};
use standings::domain::tiebreak;
use standings_tests::{TestApp, at, day, spawn_ingest};

const SHARES: [i64; 5] = [1, 5, 10, 25, 50];

fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

/// What the route must answer for a board holding `points`, computed from the sorted list.
fn oracle(points: &[i64], buckets: i64) -> Value {
    let (Some(&lowest), Some(&highest)) = (points.iter().min(), points.iter().max()) else {
        return json!({"total": 0, "buckets": [], "cutoffs": []});
    };
    let width = ceil_div(highest - lowest + 1, buckets);
    let mut rows = Vec::new();
    let mut min = lowest;
    while min <= highest {
        let max = (min + width - 1).min(highest);
        rows.push(json!({"min": min, "max": max, "count": points.iter().filter(|p| (min..=max).contains(*p)).count()}));
        min += width;
    }
    let mut sorted = points.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let n = sorted.len() as i64;
    let cutoffs: Vec<Value> =
        SHARES.iter().map(|&p| json!({"top_percent": p, "score": sorted[(ceil_div(n * p, 100).max(1) - 1) as usize]})).collect();
    json!({"total": n, "buckets": rows, "cutoffs": cutoffs})
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
            let expected = oracle(&points, buckets);
            prop_assert_eq!(shape(&body), expected.clone());
            // What the oracle's rule promises, stated on its own.
            let rows = body["buckets"].as_array().unwrap();
            prop_assert!(rows.len() as i64 <= buckets);
            prop_assert_eq!(rows.iter().map(|b| b["count"].as_u64().unwrap()).sum::<u64>(), points.len() as u64);
            for cutoff in body["cutoffs"].as_array().unwrap() {
                let (share, score) = (cutoff["top_percent"].as_i64().unwrap(), cutoff["score"].as_i64().unwrap());
                let inside = ceil_div(points.len() as i64 * share, 100).max(1) as usize;
                prop_assert!(points.iter().filter(|p| **p >= score).count() >= inside, "{share}% cut at {score}");
                prop_assert!(points.iter().filter(|p| **p > score).count() < inside, "{share}% cut at {score}");
            }
            Ok::<(), TestCaseError>(())
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
