//! Hot boards against the real Redis: heat through `ingest`, scheduled runs through
//! `hotness`, reads through `query`, all on one key prefix and one injected clock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use axum::http::Method;
use chrono::{DateTime, Duration, Utc};
use redis::AsyncCommands;
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::services::hot::DecayRun;
use standings_tests::{Caller, TestApp, at, scheduled_event, spawn_ingest_with};

const BOARD: &str = "hot-videos";

/// The day the tests stand on: two days ahead of the real clock (TTLs count from the injected
/// clock, so any day would do; this one keeps the bucket labels near today's).
static TEST_DAY: LazyLock<String> = LazyLock::new(|| (Utc::now() + Duration::days(2)).format("%Y-%m-%d").to_string());

/// `time` with its offset (`10:00:00+08:00`) on the test day, as the API writes instants.
fn stamp(time: &str) -> String {
    format!("{}T{time}", *TEST_DAY)
}

fn t(time: &str) -> DateTime<Utc> {
    at(&stamp(time))
}

/// `ingest` with its clock at 10:00 (Shanghai) on the test day; `query` and `hotness` beside it.
async fn spawn_hot_with(config: Config) -> TestApp {
    let app = spawn_ingest_with(config).await;
    app.set_now(t("10:00:00+08:00"));
    app
}

async fn spawn_hot() -> TestApp {
    spawn_hot_with(Config::default_boards()).await
}

/// A configuration with one decaying board; `decay` is its TOML inline table.
fn decaying_board(name: &str, timezone: &str, decay: &str) -> Config {
    Config::parse(&format!("[[boards]]\nname = {name:?}\nkind = \"decaying\"\ntimezone = {timezone:?}\ntop = 10\ndecay = {decay}\n"))
        .unwrap()
}

async fn heat(app: &TestApp, item: &str, body: Value) -> (u16, Value) {
    heat_on(app, BOARD, item, body).await
}

async fn heat_on(app: &TestApp, board: &str, item: &str, body: Value) -> (u16, Value) {
    let (status, body) = app.post(&format!("/v1/hot/{board}/items/{item}"), &body).await;
    (status.as_u16(), body)
}

/// One scheduled run at `when`, the clock standing there too (as it does in Lambda).
async fn run(app: &TestApp, when: DateTime<Utc>) -> DecayRun {
    app.set_now(when);
    let summary = app.hotness().run(scheduled_event(when)).await.expect("the run succeeds");
    assert_eq!(summary.minute, standings::domain::decay::minute_of(when));
    let [board] = <[DecayRun; 1]>::try_from(summary.boards).expect("one decaying board");
    board
}

async fn top(app: &TestApp, board: &str) -> Value {
    let (status, body) = app.get(&format!("/v1/hot/{board}")).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// `(item, score)` of the top entries, as the API rounds them.
fn entries(body: &Value) -> Vec<(String, f64)> {
    let entries = body["entries"].as_array().unwrap();
    for (i, entry) in entries.iter().enumerate() {
        assert_eq!(entry["rank"], i + 1);
    }
    entries.iter().map(|e| (e["item_id"].as_str().unwrap().to_owned(), e["score"].as_f64().unwrap())).collect()
}

fn items(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
    pairs.iter().map(|&(item, score)| (item.to_owned(), score)).collect()
}

/// The synthesized board straight from Redis, unrounded.
async fn raw_board(app: &TestApp, board: &str) -> Vec<(String, f64)> {
    app.redis.clone().zrevrange_withscores(app.keys.board(board).hot_board(), 0, -1).await.unwrap()
}

#[tokio::test]
async fn an_empty_window_gives_an_empty_board_and_records_the_run() {
    let app = spawn_hot().await;
    let run = run(&app, t("10:05:00+08:00")).await;
    assert_eq!((run.board.as_str(), run.members, run.skipped), (BOARD, 0, false));
    let body = top(&app, BOARD).await;
    assert_eq!(body["synthesized_at"], stamp("10:05:00+08:00"));
    assert_eq!(body["entries"], json!([]));
    // Nothing to RENAME: the board stays absent and no scratch key is left behind.
    assert_eq!(app.written_keys().await, [app.keys.board(BOARD).hot_meta()]);
}

#[tokio::test]
async fn one_bucket_is_the_board_at_full_weight() {
    let app = spawn_hot().await;
    let (status, receipt) = heat(&app, "a", json!({"delta": 3})).await;
    assert_eq!(status, 200, "{receipt}");
    assert_eq!(
        receipt,
        json!({"board": BOARD, "item_id": "a", "duplicate": false, "delta": 3,
               "bucket": stamp("10:00:00+08:00"), "heat": 3.0})
    );
    heat(&app, "b", json!({})).await;
    heat(&app, "c", json!({"delta": 2})).await;
    let (_, second) = heat(&app, "c", json!({"delta": 2})).await;
    assert_eq!(second["heat"], 4.0);

    let run = run(&app, t("10:01:00+08:00")).await;
    assert_eq!((run.members, run.skipped), (3, false));
    let body = top(&app, BOARD).await;
    assert_eq!(entries(&body), items(&[("c", 4.0), ("a", 3.0), ("b", 1.0)]));
    assert_eq!(body["synthesized_at"], stamp("10:01:00+08:00"));

    let mut redis = app.redis.clone();
    let keys = app.keys.board(BOARD);
    let board_ttl: i64 = redis.ttl(keys.hot_board()).await.unwrap();
    assert!((1..=300).contains(&board_ttl), "the synthesized board expires within 5 minutes: {board_ttl}");
    let bucket_expiry = app.expiry_from(&keys.hot_bucket(t("10:00:00+08:00")), t("10:00:00+08:00")).await;
    assert_eq!(bucket_expiry, (t("11:00:00+08:00") + Duration::days(1)).timestamp(), "window + 1 h after the bucket starts");
}

/// Heat `delta` for `item` at `when` (the clock stands there: heat lands in its hour).
async fn heat_at(app: &TestApp, board: &str, when: DateTime<Utc>, item: &str, delta: i64) {
    app.set_now(when);
    let (status, body) = heat_on(app, board, item, json!({"delta": delta})).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn twenty_four_buckets_weigh_each_hour_by_its_age() {
    let app = spawn_hot().await;
    let end = t("09:30:00+08:00") + Duration::days(1);
    for age in 0..=24 {
        let when = end - Duration::hours(age);
        heat_at(&app, BOARD, when, "steady", 10).await;
        heat_at(&app, BOARD, when, "varying", age + 1).await;
    }
    heat_at(&app, BOARD, end - Duration::hours(23), "old", 100).await;
    heat_at(&app, BOARD, end - Duration::hours(24), "gone", 1000).await;
    heat_at(&app, BOARD, end, "fresh", 7).await;

    run(&app, end).await;
    // Weights 1 - 0.04·age for ages 0..=23; the bucket 24 hours old is outside the window.
    //   steady:  10·Σ(1 - 0.04k)       = 10·(24 - 0.04·276)          = 129.6
    //   varying: Σ(k+1)(1 - 0.04k)     = 300 - 0.04·(4324 + 276)     = 116
    //   old:     100·(1 - 0.04·23)     = 100·0.08                    = 8
    //   fresh:   7·1                                                 = 7
    let expected = items(&[("steady", 129.6), ("varying", 116.0), ("old", 8.0), ("fresh", 7.0)]);
    assert_eq!(entries(&top(&app, BOARD).await), expected);
    let raw = raw_board(&app, BOARD).await;
    for ((item, score), (want_item, want)) in raw.iter().zip(&expected) {
        assert_eq!(item, want_item);
        assert!((score - want).abs() < 1e-9, "{item}: {score} vs {want}");
    }
}

#[tokio::test]
async fn exponential_weights_halve_every_half_life() {
    let decay = r#"{ mode = "window", window_hours = 24, weights = "exponential", half_life_hours = 6 }"#;
    let app = spawn_hot_with(decaying_board("hot-exp", "Asia/Kolkata", decay)).await;
    let end = t("10:45:00+05:30");
    for (age, delta) in [(0, 64), (6, 64), (12, 64)] {
        heat_at(&app, "hot-exp", end - Duration::hours(age), "x", delta).await;
    }
    heat_at(&app, "hot-exp", end - Duration::hours(3), "y", 100).await;
    run(&app, end).await;
    // x: 64 + 64/2 + 64/4 = 112; y: 100·2^(-3/6) = 70.7106… → 70.711.
    assert_eq!(entries(&top(&app, "hot-exp").await), items(&[("x", 112.0), ("y", 70.711)]));
}

#[tokio::test]
async fn a_duplicate_or_late_delivery_of_a_minute_changes_nothing() {
    let app = spawn_hot().await;
    let minute = t("10:05:00+08:00");
    heat(&app, "a", json!({})).await;
    let first = run(&app, minute).await;
    assert!(!first.skipped);
    let ttl_before: i64 = app.redis.clone().pttl(app.keys.board(BOARD).hot_board()).await.unwrap();

    heat(&app, "a", json!({})).await;
    let duplicate = run(&app, minute + Duration::seconds(30)).await;
    assert_eq!((duplicate.skipped, duplicate.members), (true, 1));
    let late = run(&app, minute - Duration::minutes(1)).await;
    assert!(late.skipped, "a late retry must not move the board back in time");
    assert_eq!(raw_board(&app, BOARD).await, items(&[("a", 1.0)]));
    let ttl_after: i64 = app.redis.clone().pttl(app.keys.board(BOARD).hot_board()).await.unwrap();
    assert!(ttl_after <= ttl_before, "the board was not rewritten");
    assert_eq!(top(&app, BOARD).await["synthesized_at"], stamp("10:05:00+08:00"));

    let next = run(&app, minute + Duration::minutes(1)).await;
    assert!(!next.skipped);
    assert_eq!(raw_board(&app, BOARD).await, items(&[("a", 2.0)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn synthesis_racing_concurrent_heat_loses_none_of_it() {
    const WRITERS: usize = 8;
    const EVENTS_PER_WRITER: usize = 250;
    const ITEMS: usize = 10;
    let app = Arc::new(spawn_hot().await);
    let hour = t("10:00:00+08:00");
    let writing = Arc::new(AtomicBool::new(true));

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let app = app.clone();
            tokio::spawn(async move {
                for i in 0..EVENTS_PER_WRITER {
                    let (status, body) = heat(&app, &format!("item-{}", (w + i) % ITEMS), json!({})).await;
                    assert_eq!(status, 200, "{body}");
                }
            })
        })
        .collect();
    let synthesizer = {
        let (app, writing) = (app.clone(), writing.clone());
        tokio::spawn(async move {
            // One run per minute of the same hour while the writers write. Heat only grows, so
            // each board must hold at least what the one before it held.
            let mut totals = Vec::new();
            for minute in 0..59 {
                if !writing.load(Ordering::Acquire) {
                    break;
                }
                assert!(!run(&app, hour + Duration::minutes(minute)).await.skipped);
                totals.push(raw_board(&app, BOARD).await.iter().map(|(_, score)| score).sum::<f64>());
            }
            totals
        })
    };
    for writer in writers {
        writer.await.unwrap();
    }
    writing.store(false, Ordering::Release);
    let totals = synthesizer.await.unwrap();
    assert!(totals.windows(2).all(|t| t[0] <= t[1]), "boards only grow while heat only grows: {totals:?}");

    assert_eq!(run(&app, hour + Duration::minutes(59)).await.members, ITEMS as u64);
    let per_item = (WRITERS * EVENTS_PER_WRITER / ITEMS) as f64;
    let board = raw_board(&app, BOARD).await;
    assert_eq!(board.len(), ITEMS);
    for (item, score) in board {
        assert_eq!(score, per_item, "{item}: every heat write counted exactly once");
    }
}

#[tokio::test]
async fn heat_rolls_over_to_the_next_bucket_at_the_local_hour() {
    let app = spawn_hot().await;
    app.set_now(t("10:59:59+08:00"));
    let (_, before) = heat(&app, "a", json!({})).await;
    app.set_now(t("11:00:00+08:00"));
    let (_, after) = heat(&app, "a", json!({})).await;
    app.set_now(t("11:00:10+08:00"));
    let (_, late) = heat(&app, "a", json!({"occurred_at": stamp("10:59:30+08:00")})).await;
    assert_eq!(before["bucket"], stamp("10:00:00+08:00"));
    assert_eq!(after["bucket"], stamp("11:00:00+08:00"));
    assert_eq!((&late["bucket"], &late["heat"]), (&json!(stamp("10:00:00+08:00")), &json!(2.0)), "occurred_at picks the bucket");

    let keys = app.keys.board(BOARD);
    let mut redis = app.redis.clone();
    let ten: f64 = redis.zscore(keys.hot_bucket(t("10:00:00+08:00")), "a").await.unwrap();
    let eleven: f64 = redis.zscore(keys.hot_bucket(t("11:00:00+08:00")), "a").await.unwrap();
    assert_eq!((ten, eleven), (2.0, 1.0));
    run(&app, t("11:00:00+08:00")).await;
    // 1·1.0 (this hour) + 2·0.96 (the hour before).
    assert_eq!(entries(&top(&app, BOARD).await), items(&[("a", 2.92)]));
}

#[tokio::test]
async fn a_read_that_finds_no_board_synthesizes_it_once() {
    let app = spawn_hot().await;
    heat(&app, "a", json!({})).await;
    app.set_now(t("10:00:30+08:00"));
    let body = top(&app, BOARD).await;
    assert_eq!(entries(&body), items(&[("a", 1.0)]), "no schedule ran, the read healed the board");
    assert_eq!(body["synthesized_at"], stamp("10:00:00+08:00"));
    let scheduled = run(&app, t("10:00:00+08:00")).await;
    assert!(scheduled.skipped, "the read ran this minute's synthesis under the schedule's guard");

    // Evicted in the same minute: the minute is rebuilt, not served empty.
    let board_key = app.keys.board(BOARD).hot_board();
    let () = app.redis.clone().del(&board_key).await.unwrap();
    assert_eq!(entries(&top(&app, BOARD).await), items(&[("a", 1.0)]));

    // The schedule stopped and the board expired: the next read rebuilds it with new heat.
    app.set_now(t("10:07:00+08:00"));
    heat(&app, "b", json!({"delta": 2})).await;
    let () = app.redis.clone().del(&board_key).await.unwrap();
    let body = top(&app, BOARD).await;
    assert_eq!(entries(&body), items(&[("b", 2.0), ("a", 1.0)]));
    assert_eq!(body["synthesized_at"], stamp("10:07:00+08:00"));
}

#[tokio::test]
async fn a_scale_board_multiplies_once_per_period_and_drops_what_decayed_away() {
    let decay = r#"{ mode = "scale", factor = 0.5, every_minutes = 60 }"#;
    let app = spawn_hot_with(decaying_board("hot-scaled", "UTC", decay)).await;
    app.set_now(t("09:59:00Z"));
    let (status, receipt) = heat_on(&app, "hot-scaled", "a", json!({"delta": 1000})).await;
    assert_eq!(status, 200, "{receipt}");
    assert_eq!((&receipt["bucket"], &receipt["heat"]), (&Value::Null, &json!(1000.0)), "heat goes straight onto the board");
    heat_on(&app, "hot-scaled", "b", json!({"delta": 3})).await;
    let body = top(&app, "hot-scaled").await;
    assert_eq!((entries(&body), &body["synthesized_at"]), (items(&[("a", 1000.0), ("b", 3.0)]), &Value::Null));

    let scaled = run(&app, t("10:00:00Z")).await;
    assert_eq!((scaled.members, scaled.skipped), (2, false));
    let again = run(&app, t("10:30:00Z")).await;
    assert!(again.skipped, "same period: scaled once");
    let body = top(&app, "hot-scaled").await;
    assert_eq!(entries(&body), items(&[("a", 500.0), ("b", 1.5)]));
    assert_eq!(body["synthesized_at"], stamp("10:00:00+00:00"));

    for hour in 11..=22 {
        run(&app, t(&format!("{hour}:00:00Z"))).await;
    }
    // 13 halvings: a = 1000/8192 = 0.122…; b = 3/8192 < 0.001 is dropped.
    let body = top(&app, "hot-scaled").await;
    assert_eq!(entries(&body), items(&[("a", 0.122)]));
    assert_eq!(body["synthesized_at"], stamp("22:00:00+00:00"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn heat_with_an_event_id_applies_once_and_conflicts_on_another_payload() {
    let app = Arc::new(spawn_hot().await);
    let body = json!({"event_id": "view-1", "delta": 5});
    let tasks: Vec<_> = (0..200)
        .map(|_| {
            let (app, body) = (app.clone(), body.clone());
            tokio::spawn(async move { heat(&app, "a", body).await })
        })
        .collect();
    let mut receipts = Vec::new();
    for task in tasks {
        let (status, receipt) = task.await.unwrap();
        assert_eq!(status, 200, "{receipt}");
        receipts.push(receipt);
    }
    assert_eq!(receipts.iter().filter(|r| r["duplicate"] == false).count(), 1, "exactly one delivery applies");
    assert!(receipts.iter().all(|r| (&r["bucket"], &r["heat"], &r["event_id"]) == (&receipts[0]["bucket"], &json!(5.0), &json!("view-1"))));
    let bucket = app.keys.board(BOARD).hot_bucket(t("10:00:00+08:00"));
    let stored: f64 = app.redis.clone().zscore(&bucket, "a").await.unwrap();
    assert_eq!(stored, 5.0);

    let keys_before = app.keyspace().await;
    for (item, other) in [("a", json!({"event_id": "view-1", "delta": 6})), ("b", json!({"event_id": "view-1", "delta": 5}))] {
        let (status, error) = heat(&app, item, other).await;
        assert_eq!((status, &error["error"]["code"]), (409, &json!("idempotency_conflict")));
    }
    assert_eq!(app.keyspace().await, keys_before);
    assert_eq!(app.redis.clone().zscore::<_, _, f64>(&bucket, "a").await.unwrap(), 5.0);

    // A retry an hour later without occurred_at still gets the first answer and bucket.
    app.set_now(t("11:00:30+08:00"));
    let (status, retry) = heat(&app, "a", body).await;
    assert_eq!((status, &retry["duplicate"], &retry["bucket"]), (200, &json!(true), &json!(stamp("10:00:00+08:00"))));
}

#[tokio::test]
async fn bad_heat_is_refused_with_its_own_code_and_writes_nothing() {
    let app = spawn_hot().await;
    let refusals = [
        ("nope", "a", json!({}), 404, "unknown_board"),
        ("activity", "a", json!({}), 404, "unknown_board"),
        (BOARD, "a%7Bb%7D", json!({}), 400, "invalid_id"),
        (BOARD, "a%20b", json!({}), 400, "invalid_id"),
        (BOARD, "a", json!({"event_id": "e 1"}), 400, "invalid_id"),
        (BOARD, "a", json!({"delta": 0}), 422, "out_of_range"),
        (BOARD, "a", json!({"delta": -1}), 422, "out_of_range"),
        (BOARD, "a", json!({"delta": 10_001}), 422, "out_of_range"),
        (BOARD, "a", json!({"delta": 1.5}), 400, "malformed"),
        (BOARD, "a", json!({"weight": 2}), 400, "malformed"),
        (BOARD, "a", json!({"occurred_at": stamp("09:44:59+08:00")}), 422, "too_late"),
        (BOARD, "a", json!({"occurred_at": stamp("10:01:01+08:00")}), 422, "in_future"),
    ];
    for (board, item, body, status, code) in refusals {
        let (got, error) = heat_on(&app, board, item, body.clone()).await;
        assert_eq!((got, error["error"]["code"].as_str()), (status, Some(code)), "{board}/{item} {body}");
    }
    let path = format!("/v1/hot/{BOARD}/items/a");
    let (status, _) = app.call(Method::POST, &path, "{}", Caller::Anonymous).await;
    assert_eq!(status, 401);
    let (status, _) = app.call(Method::POST, &path, "{}", Caller::Scopes(&["standings/read"])).await;
    assert_eq!(status, 403);
    let (got, _) = heat_on(&app, BOARD, &"x".repeat(128), json!({"delta": 10_000})).await;
    assert_eq!(got, 200, "the bounds themselves are accepted");
    let written = app.written_keys().await;
    assert_eq!(written.len(), 2, "only the accepted heat wrote: {written:?}");
    let marker = written.iter().find(|k| k.contains(":mark:auto-")).expect("heat without an event id is marked under a made-up id");
    let ttl: i64 = redis::cmd("TTL").arg(marker).query_async(&mut app.redis.clone()).await.unwrap();
    assert!((1..=60).contains(&ttl), "kept only as long as a re-send may come: {ttl}");
}

#[tokio::test]
async fn reads_check_the_board_and_the_limit_and_may_be_cached_briefly() {
    let app = spawn_hot().await;
    for (item, delta) in [("a", 3), ("b", 2), ("c", 1)] {
        heat(&app, item, json!({"delta": delta})).await;
    }
    let (status, headers, body) = app.get_with_headers("/v1/hot/hot-videos?limit=2").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(entries(&body), items(&[("a", 3.0), ("b", 2.0)]));
    assert_eq!(headers.get("cache-control").unwrap(), "public, max-age=15");
    let (status, body) = app.get("/v1/hot/hot-videos?limit=1000").await;
    assert_eq!((status.as_u16(), body["entries"].as_array().unwrap().len()), (200, 3));

    for (path, status, code) in [
        ("/v1/hot/nope", 404, "unknown_board"),
        ("/v1/hot/activity", 404, "unknown_board"),
        ("/v1/hot/hot-videos?limit=0", 400, "out_of_range"),
        ("/v1/hot/hot-videos?limit=1001", 400, "out_of_range"),
        ("/v1/hot/hot-videos?limit=ten", 400, "malformed"),
        ("/v1/hot/hot-videos?top=5", 400, "malformed"),
    ] {
        let (got, error) = app.get(path).await;
        assert_eq!((got.as_u16(), error["error"]["code"].as_str()), (status, Some(code)), "{path}");
    }
}

#[tokio::test]
async fn reads_say_which_window_the_scores_cover() {
    let app = spawn_hot().await;
    heat(&app, "a", json!({"delta": 1})).await;
    run(&app, t("10:30:00+08:00")).await;
    let (_, body) = app.get("/v1/hot/hot-videos").await;
    let yesterday = (t("10:00:00+08:00") - Duration::days(1)).with_timezone(&chrono_tz::Asia::Shanghai);
    let window = json!({"mode": "window", "hours": 24, "from": format!("{}T11:00:00+08:00", yesterday.format("%Y-%m-%d")), "to": stamp("11:00:00+08:00")});
    assert_eq!(body["window"], window, "the 24 hours up to the end of the current one");

    let scale = spawn_hot_with(decaying_board("trending", "UTC", "{ mode = \"scale\", factor = 0.5, every_minutes = 60 }")).await;
    let (_, body) = scale.get("/v1/hot/trending").await;
    assert_eq!(body["window"], json!({"mode": "scale", "factor": 0.5, "every_minutes": 60}));
}
