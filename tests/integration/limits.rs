//! Daily caps and per-user rate limits under concurrency: exact totals, and a refused event
//! leaves no trace.

use std::sync::Arc;

use axum::http::Method;
use chrono::Duration;
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings_tests::{TestApp, WRITER, arena, at, season, spawn_ingest, spawn_ingest_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_learning_events_give_exactly_the_daily_cap() {
    const USERS: usize = 5;
    const EVENTS: usize = 50;
    let app = Arc::new(spawn_ingest().await);
    let tasks: Vec<_> = (0..USERS * EVENTS)
        .map(|i| {
            let app = app.clone();
            let event = json!({"event_id": format!("l{i}"), "user_id": format!("u{}", i % USERS), "action": "learning"});
            tokio::spawn(async move { app.event(event).await })
        })
        .collect();
    let (mut delta, mut capped, mut applied) = ([0i64; USERS], [0i64; USERS], [0usize; USERS]);
    for (i, task) in tasks.into_iter().enumerate() {
        let (status, receipt) = task.await.unwrap();
        assert_eq!(status, 200, "{receipt}");
        let result = &receipt["results"][0];
        delta[i % USERS] += result["delta"].as_i64().unwrap();
        capped[i % USERS] += result["capped"].as_i64().unwrap();
        applied[i % USERS] += usize::from(result["applied"] == true);
    }
    for user in 0..USERS {
        // learning: +10, cap 50 a day.
        assert_eq!(app.points("points", season("2026-11-22"), &format!("u{user}")).await, Some(50), "u{user}");
        assert_eq!((delta[user], capped[user], applied[user]), (50, 10 * 50 - 50, 5), "u{user}");
    }
}

/// A board whose `win` rule allows 3 events per user per minute.
fn limited_board() -> Config {
    arena(r#"[{ action = "win", points = 1, scope = "none", rate_limit = { max = 3, per_secs = 60 } }]"#)
}

async fn arena_points(app: &TestApp, user: &str) -> Option<i64> {
    app.points("arena", Period::containing(PeriodKind::All, app.now(), chrono_tz::UTC), user).await
}

async fn win(app: &TestApp, id: &str, user: &str) -> (u16, Option<String>, Value) {
    let event = json!({"event_id": id, "user_id": user, "action": "win"});
    let (status, headers, body) = app.call_with_headers(Method::POST, "/v1/events", event.to_string(), WRITER).await;
    let retry_after = headers.get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    (status.as_u16(), retry_after, body)
}

#[tokio::test]
async fn a_rate_limited_event_is_a_429_with_retry_after_and_writes_nothing() {
    let app = spawn_ingest_with(limited_board()).await;
    let t0 = at("2026-11-22T10:00:00Z");
    for (i, offset) in [0, 10, 20].into_iter().enumerate() {
        app.set_now(t0 + Duration::seconds(offset));
        assert_eq!(win(&app, &format!("w{i}"), "u1").await.0, 200);
    }
    app.set_now(t0 + Duration::seconds(30));
    let keys_before = app.keyspace().await;
    let (status, retry_after, body) = win(&app, "w3", "u1").await;
    assert_eq!((status, body["error"]["code"].as_str()), (429, Some("rate_limited")), "{body}");
    assert_eq!(retry_after.as_deref(), Some("30"), "the first event leaves the window at t0 + 60 s");
    assert_eq!(app.keyspace().await, keys_before, "no marker, no log entry, no score");
    assert_eq!(arena_points(&app, "u1").await, Some(3));
    // A retry of an accepted event is still its duplicate, and other users have their own window.
    let (status, _, duplicate) = win(&app, "w0", "u1").await;
    assert_eq!((status, &duplicate["duplicate"]), (200, &json!(true)));
    assert_eq!(win(&app, "other", "u2").await.0, 200);
    // A batch reports the refusal per event, with its retry-after.
    let batch = json!({"events": [{"event_id": "b1", "user_id": "u1", "action": "win"}]});
    let (_, batch_reply) = app.post("/v1/events:batch", &batch).await;
    assert_eq!(batch_reply["results"][0]["status"], 429);
    assert_eq!(batch_reply["results"][0]["retry_after"], 30);

    app.set_now(t0 + Duration::milliseconds(59_999));
    assert_eq!(win(&app, "w4", "u1").await.1.as_deref(), Some("1"), "rounded up to a whole second");
    app.set_now(t0 + Duration::seconds(60));
    assert_eq!(win(&app, "w5", "u1").await.0, 200, "the first slot is free again");
    let (status, retry_after, _) = win(&app, "w6", "u1").await;
    assert_eq!((status, retry_after.as_deref()), (429, Some("10")), "next, the event of t0 + 10 s leaves");
    assert_eq!(arena_points(&app, "u1").await, Some(4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_events_never_pass_the_rate_limit() {
    let app = Arc::new(spawn_ingest_with(limited_board()).await);
    let tasks: Vec<_> = (0..60)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move { win(&app, &format!("c{i}"), &format!("u{}", i % 2)).await })
        })
        .collect();
    let mut statuses = Vec::new();
    for task in tasks {
        statuses.push(task.await.unwrap().0);
    }
    assert_eq!(statuses.iter().filter(|&&s| s == 200).count(), 2 * 3, "three per user");
    assert_eq!(statuses.iter().filter(|&&s| s == 429).count(), 60 - 2 * 3);
    assert_eq!(arena_points(&app, "u0").await, Some(3));
    assert_eq!(arena_points(&app, "u1").await, Some(3));
}
