//! Score boards (`POST /v1/boards/{board}/scores`): best, latest and sum in either order, on
//! the real `submit_score.lua`, under concurrency, and through every read that must honour the
//! board's order (generated submissions against a model: `score_model.rs`).

use std::sync::Arc;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings::domain::scores::{self, MAX_SCORE};
use standings_tests::{TestApp, at, spawn_ingest, spawn_ingest_with};

fn score_board(keep: &str, order: &str, periods: &str, extra: &str) -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"{keep}\"\norder = \"{order}\"\ntimezone = \"UTC\"\nperiods = [{periods}]\ntop = 10\n{extra}"
    ))
    .unwrap()
}

fn utc_period(kind: PeriodKind, date: &str) -> Period {
    Period::on_date(kind, NaiveDate::parse_from_str(date, "%Y-%m-%d").unwrap(), chrono_tz::UTC)
}

async fn submit(app: &TestApp, board: &str, event_id: &str, user: &str, score: i64) -> (u16, Value) {
    let (status, body) =
        app.post(&format!("/v1/boards/{board}/scores"), &json!({"event_id": event_id, "user_id": user, "score": score})).await;
    (status.as_u16(), body)
}

/// The kept score and reached-at time of `user`, decoded from Redis with the board's scale.
async fn kept(app: &TestApp, board: &str, period: &Period, user: &str) -> Option<(i64, DateTime<Utc>)> {
    let key = app.keys.board(board).period(period);
    let composite: Option<f64> = redis::cmd("ZSCORE").arg(key).arg(user).query_async(&mut app.redis.clone()).await.unwrap();
    let scale = scores::scale(app.config.board(board).unwrap(), period);
    composite.map(|c| scale.decode(c).unwrap())
}

fn summary(periods: &Value) -> Vec<(String, i64, Option<u64>, bool)> {
    periods
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (p["period"].as_str().unwrap().to_owned(), p["score"].as_i64().unwrap(), p["rank"].as_u64(), p["changed"].as_bool().unwrap())
        })
        .collect()
}

#[tokio::test]
async fn best_lower_is_better_keeps_the_lowest_and_answers_not_better() {
    let app = spawn_ingest().await;
    let (status, first) = submit(&app, "lap-times", "l1", "ana", 61_250).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!((&first["applied"], &first["duplicate"], &first["board"]), (&json!(true), &json!(false), &json!("lap-times")));
    assert_eq!(summary(&first["periods"]), [("day".into(), 61_250, Some(1), true), ("season".into(), 61_250, Some(1), true)]);

    let before = app.keyspace().await;
    let (_, slower) = submit(&app, "lap-times", "l2", "ana", 62_000).await;
    assert_eq!((&slower["applied"], &slower["reason"]), (&json!(false), &json!("not_better")));
    assert_eq!(summary(&slower["periods"]), [("day".into(), 61_250, Some(1), false), ("season".into(), 61_250, Some(1), false)]);
    let after = app.keyspace().await;
    let boards = |state: &[(String, Vec<u8>, i64)]| state.iter().filter(|(k, ..)| k.contains(":z:")).cloned().collect::<Vec<_>>();
    assert_eq!(boards(&after), boards(&before), "a submission that is not better leaves every period as it was");

    let (_, faster) = submit(&app, "lap-times", "l3", "ana", 60_001).await;
    assert_eq!(faster["applied"], true);
    assert_eq!(kept(&app, "lap-times", &utc_period(PeriodKind::Day, "2026-11-22"), "ana").await.unwrap().0, 60_001);
    assert_eq!(kept(&app, "lap-times", &utc_period(PeriodKind::Season, "2026-11-22"), "ana").await.unwrap().0, 60_001);
}

#[tokio::test]
async fn a_better_day_that_is_not_a_better_all_time_changes_only_the_day() {
    let app = spawn_ingest().await;
    submit(&app, "high-scores", "h1", "bo", 900).await;
    app.set_now(app.now() + Duration::days(1));
    let (status, body) = submit(&app, "high-scores", "h2", "bo", 500).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["applied"], true);
    assert_eq!(summary(&body["periods"]), [("day".into(), 500, Some(1), true), ("all".into(), 900, Some(1), false)]);
}

#[tokio::test]
async fn retries_are_duplicates_and_a_changed_payload_is_a_conflict_that_writes_nothing() {
    let app = spawn_ingest().await;
    let (_, first) = submit(&app, "high-scores", "s1", "cy", 42).await;
    submit(&app, "high-scores", "s2", "cy", 50).await;
    let state = app.keyspace().await;
    let (status, retry) = submit(&app, "high-scores", "s1", "cy", 42).await;
    assert_eq!(status, 200);
    assert_eq!(retry["duplicate"], true);
    assert_eq!(retry["applied"], first["applied"]);
    // The first decision, with the standing now (50 since s2).
    assert_eq!(summary(&retry["periods"]), [("day".into(), 50, Some(1), true), ("all".into(), 50, Some(1), true)]);
    let (status, conflict) = submit(&app, "high-scores", "s1", "cy", 43).await;
    assert_eq!((status, &conflict["error"]["code"]), (409, &json!("idempotency_conflict")));
    assert_eq!(app.keyspace().await, state, "a retry and a conflict write nothing");
}

#[tokio::test]
async fn bad_submissions_get_clear_errors_and_write_nothing() {
    let app = spawn_ingest_with(score_board("sum", "desc", "\"all\"", "")).await;
    submit(&app, "game", "ok", "dee", MAX_SCORE - 1).await;
    let state = app.keyspace().await;
    for (board, body, status, code) in [
        ("game", json!({"event_id": "a", "user_id": "dee", "score": MAX_SCORE + 1}), 422, "out_of_range"),
        ("game", json!({"event_id": "b", "user_id": "dee", "score": -1}), 422, "out_of_range"),
        ("game", json!({"event_id": "c", "user_id": "dee", "score": 2}), 422, "out_of_range"),
        ("game", json!({"event_id": "d", "user_id": "dee", "score": 1.5}), 400, "malformed"),
        ("game", json!({"event_id": "e", "user_id": "d e", "score": 1}), 400, "invalid_id"),
        ("game", json!({"event_id": "f", "user_id": "dee", "score": 1, "extra": 1}), 400, "malformed"),
        ("game", json!({"event_id": "g", "user_id": "dee", "score": 1, "occurred_at": "2026-11-01T00:00:00Z"}), 422, "too_late"),
        ("nope", json!({"event_id": "h", "user_id": "dee", "score": 1}), 404, "unknown_board"),
    ] {
        let (got, answer) = app.post(&format!("/v1/boards/{board}/scores"), &body).await;
        assert_eq!((got.as_u16(), answer["error"]["code"].as_str().unwrap()), (status, code), "{body}: {answer}");
    }
    assert_eq!(app.keyspace().await, state);
    let (status, _) = app
        .call(
            axum::http::Method::POST,
            "/v1/boards/game/scores",
            json!({"event_id": "i", "user_id": "dee", "score": 1}).to_string(),
            standings_tests::Caller::Anonymous,
        )
        .await;
    assert_eq!(status, 401, "submitting needs the write scope");
}

#[tokio::test]
async fn equal_scores_rank_by_who_reached_them_first_in_either_order() {
    for (board, better, worse) in [("high-scores", 10, 5), ("lap-times", 5, 10)] {
        let app = spawn_ingest().await;
        // zed gets there first, amy a second later; amy's earlier better score does not count.
        submit(&app, board, "1", "amy", worse).await;
        submit(&app, board, "2", "zed", better).await;
        app.set_now(app.now() + Duration::seconds(1));
        submit(&app, board, "3", "amy", better).await;
        submit(&app, board, "4", "bob", worse).await;
        let (_, top) = app.get(&format!("/v1/boards/{board}/top?period=day")).await;
        let rows: Vec<(&str, i64, u64)> = top["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["user_id"].as_str().unwrap(), e["score"].as_i64().unwrap(), e["rank"].as_u64().unwrap()))
            .collect();
        assert_eq!(rows, [("zed", better, 1), ("amy", better, 2), ("bob", worse, 3)], "{board}");
        let (_, competition) = app.get(&format!("/v1/boards/{board}/top?period=day&rank_mode=competition")).await;
        let ranks: Vec<u64> = competition["entries"].as_array().unwrap().iter().map(|e| e["rank"].as_u64().unwrap()).collect();
        assert_eq!(ranks, [1, 1, 3], "{board}");
    }
}

#[tokio::test]
async fn every_read_honours_lower_is_better() {
    let app = spawn_ingest().await;
    for (i, (user, time)) in [("a", 300), ("b", 100), ("c", 200), ("d", 400)].into_iter().enumerate() {
        submit(&app, "lap-times", &format!("e{i}"), user, time).await;
    }
    let (_, top) = app.get("/v1/boards/lap-times/top?period=season").await;
    let order: Vec<&str> = top["entries"].as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap()).collect();
    assert_eq!(order, ["b", "c", "a", "d"]);
    let (_, me) = app.get("/v1/boards/lap-times/users/c?period=season&around=1").await;
    assert_eq!((me["rank"].as_u64(), me["score"].as_i64(), me["percentile"].as_f64()), (Some(2), Some(200), Some(50.0)), "{me}");
    let around: Vec<&str> = me["around"].as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap()).collect();
    assert_eq!(around, ["b", "c", "a"]);
    let ranks = json!({"user_ids": ["d", "b", "x"], "period": "season", "include_missing": false});
    let (status, friends) = app.call_query(axum::http::Method::POST, "/v1/boards/lap-times/ranks", ranks.to_string()).await;
    assert_eq!(status, 200, "{friends}");
    let listed: Vec<(&str, Option<u64>, Option<u64>)> = friends["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["user_id"].as_str().unwrap(), e["rank"].as_u64(), e["relative_rank"].as_u64()))
        .collect();
    assert_eq!(listed, [("b", Some(1), Some(1)), ("d", Some(4), Some(2))]);
    let (_, shape) = app.get("/v1/boards/lap-times/distribution?period=season&buckets=3").await;
    // Buckets of equal width are counted from the bottom of the board (here the slowest
    // time), so the one holding the top is the one cut short; lowest score first.
    assert_eq!(
        shape["buckets"],
        json!([{"min": 100, "max": 198, "count": 1}, {"min": 199, "max": 299, "count": 1}, {"min": 300, "max": 400, "count": 2}]),
        "{shape}"
    );
    let cutoffs: Vec<(i64, i64)> =
        shape["cutoffs"].as_array().unwrap().iter().map(|c| (c["top_percent"].as_i64().unwrap(), c["score"].as_i64().unwrap())).collect();
    // Top 25 % of four is one member (100); top 50 % is two (the slower of them: 200).
    assert_eq!(cutoffs, [(1, 100), (5, 100), (10, 100), (25, 100), (50, 200)]);
    let (_, catalog) = app.get("/v1/boards").await;
    let laps = catalog["boards"].as_array().unwrap().iter().find(|b| b["name"] == "lap-times").unwrap();
    assert_eq!((&laps["kind"], &laps["keep"], &laps["order"]), (&json!("scores"), &json!("best"), &json!("asc")));
}

#[tokio::test]
async fn bans_and_rate_limits_refuse_without_writing() {
    let app = spawn_ingest_with(score_board("latest", "desc", "\"day\"", "rate_limit = { max = 2, per_secs = 60 }")).await;
    submit(&app, "game", "1", "eve", 1).await;
    submit(&app, "game", "2", "eve", 2).await;
    let state = app.keyspace().await;
    let (status, limited) = submit(&app, "game", "3", "eve", 3).await;
    assert_eq!((status, &limited["error"]["code"]), (429, &json!("rate_limited")), "{limited}");
    assert_eq!(app.keyspace().await, state);
    app.set_now(app.now() + Duration::seconds(61));
    assert_eq!(submit(&app, "game", "3", "eve", 3).await.0, 200, "a slot frees when the window moves on");

    let (status, _) = app.call(axum::http::Method::POST, "/v1/admin/users/eve/ban", "{}", standings_tests::ADMIN).await;
    assert_eq!(status, 200);
    assert_eq!(kept(&app, "game", &utc_period(PeriodKind::Day, "2026-11-22"), "eve").await, None, "a ban removes the user");
    let state = app.keyspace().await;
    let (status, banned) = submit(&app, "game", "4", "eve", 4).await;
    assert_eq!((status, &banned["error"]["code"]), (422, &json!("user_banned")));
    assert_eq!(app.keyspace().await, state);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_submissions_keep_the_exact_best_and_sum() {
    for (keep, expected) in [("best", 199), ("sum", (0..200).sum::<i64>())] {
        let app = Arc::new(spawn_ingest_with(score_board(keep, "desc", "\"day\", \"all\"", "")).await);
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let app = app.clone();
                // Every submission twice: each applies once.
                tokio::spawn(async move { submit(&app, "game", &format!("e{}", i / 2), "fay", i / 2 * 2).await })
            })
            .collect();
        for task in tasks {
            let (status, body) = task.await.unwrap();
            assert_eq!(status, 200, "{body}");
        }
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let app = app.clone();
                tokio::spawn(async move { submit(&app, "game", &format!("f{i}"), "gus", i).await })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.unwrap().0, 200);
        }
        for kind in [PeriodKind::Day, PeriodKind::All] {
            let period = utc_period(kind, "2026-11-22");
            assert_eq!(kept(&app, "game", &period, "gus").await.unwrap().0, expected, "{keep} {kind:?}");
        }
        let fay = kept(&app, "game", &utc_period(PeriodKind::All, "2026-11-22"), "fay").await.unwrap().0;
        let fay_expected = if keep == "best" { 198 } else { (0..100).map(|i| i * 2).sum() };
        assert_eq!(fay, fay_expected, "{keep}: each duplicated submission counted once");
    }
}

#[tokio::test]
async fn an_archived_lower_is_better_season_reads_as_it_did_live() {
    use standings::archive::job::Status;
    use standings::archive::table::Shard;
    let harness = standings_tests::ArchiveHarness::new().await;
    let app = harness.app().await;
    app.set_now(at("2026-10-15T12:00:00Z"));
    for i in 0..40 {
        // Two users per time: equal scores, the first submitted ranks higher.
        submit(&app, "lap-times", &format!("e{i}"), &format!("r{i:02}"), 50_000 + (i / 2) * 137).await;
        app.set_now(app.now() + Duration::seconds(1));
    }
    let live_top = app.get("/v1/boards/lap-times/top?period=season&at=2026-10-15&limit=40").await.1;
    let live_user = app.get("/v1/boards/lap-times/users/r07?period=season&at=2026-10-15").await.1;
    let live_shape = app.get("/v1/boards/lap-times/distribution?period=season&at=2026-10-15&buckets=7").await.1;
    let order: Vec<&str> = live_top["entries"].as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap()).collect();
    let expected: Vec<String> = (0..40).map(|i| format!("r{i:02}")).collect();
    assert_eq!(order, expected, "fastest first, then who got there first");

    harness.set_now(at("2026-11-01T01:00:00Z"));
    let report = harness
        .archiver(harness.table.clone())
        .archive_season("lap-times", "2026-10", Shard::WHOLE, at("2100-01-01T00:00:00Z"))
        .await
        .unwrap();
    assert_eq!(report.status, Status::Complete);
    let archived_top = app.get("/v1/boards/lap-times/seasons/2026-10/top?limit=40").await.1;
    assert_eq!(archived_top["entries"], live_top["entries"], "{archived_top}");
    let archived_user = app.get("/v1/boards/lap-times/seasons/2026-10/users/r07").await.1;
    assert_eq!((&archived_user["rank"], &archived_user["score"]), (&live_user["rank"], &live_user["score"]));
    assert_eq!(live_user["score"], 50_000 + 3 * 137);
    let archived_shape = app.get("/v1/boards/lap-times/seasons/2026-10/distribution?buckets=7").await.1;
    assert_eq!(archived_shape, live_shape);
    assert_eq!(live_shape["cutoffs"][4], json!({"top_percent": 50, "score": 50_000 + 9 * 137}), "{live_shape}");
}
