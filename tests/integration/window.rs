//! How long exactly-once lasts (docs/concepts.md#how-long-exactly-once-lasts): a marker lives to
//! the end of the next local day, so a retry is a duplicate for at least 24 and at most 48
//! hours. Both ends pinned on a `sum` score board (where a second application would show), and
//! a correction retried after its marker expired is itemised in the statement, not lost to
//! `not_recorded`.

use axum::http::Method;
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::{ADMIN, TestApp, at, spawn_ingest, spawn_ingest_with};

fn sum_board() -> Config {
    Config::parse(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"sum\"\norder = \"desc\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\n",
    )
    .unwrap()
}

async fn submit(app: &TestApp, event_id: &str, score: i64) -> Value {
    let (status, body) = app.post("/v1/boards/game/scores", &json!({"event_id": event_id, "user_id": "ann", "score": score})).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn total(app: &TestApp) -> Value {
    app.get("/v1/boards/game/users/ann?period=all").await.1["score"].clone()
}

#[tokio::test]
async fn a_retry_47_hours_later_is_still_a_duplicate_when_the_first_came_just_after_midnight() {
    let app = spawn_ingest_with(sum_board()).await;
    app.set_now(at("2026-11-22T00:30:00Z"));
    submit(&app, "run-1", 7).await;
    app.set_now(at("2026-11-23T23:30:00Z"));
    let retry = submit(&app, "run-1", 7).await;
    assert_eq!(retry["duplicate"], true, "{retry}");
    assert_eq!(total(&app).await, 7, "applied once");
}

#[tokio::test]
async fn a_retry_25_hours_later_applies_again_when_the_first_came_just_before_midnight() {
    let app = spawn_ingest_with(sum_board()).await;
    app.set_now(at("2026-11-22T23:30:00Z"));
    submit(&app, "run-1", 7).await;
    // The marker's bucket (the 22nd) is past the end of the next day: the window's lower end.
    app.set_now(at("2026-11-24T00:30:00Z"));
    let late = submit(&app, "run-1", 7).await;
    assert_eq!(late["duplicate"], false, "{late}");
    assert_eq!(total(&app).await, 14, "outside the window a retry is a new submission, as documented");
}

#[tokio::test]
async fn a_correction_retried_after_its_marker_expired_is_itemised_in_the_statement() {
    let app = spawn_ingest().await;
    let (status, body) = app.event(json!({"event_id": "e1", "user_id": "ann", "action": "learning"})).await;
    assert_eq!(status, 200, "{body}");
    let path = "/v1/admin/boards/points/users/ann/corrections";
    let correction = json!({"correction_id": "c1", "delta": 5, "reason": "missed lesson"}).to_string();
    let (status, first) = app.call(Method::POST, path, correction.clone(), ADMIN).await;
    assert_eq!(status, 200, "{first}");
    // 48 hours on, the correction's marker has expired (as Redis would expire it).
    let marker = app.keys.board("points").correction("c1");
    let _: u64 = redis::cmd("DEL").arg(&marker).query_async(&mut app.redis.clone()).await.unwrap();
    let (status, again) = app.call(Method::POST, path, correction, ADMIN).await;
    assert_eq!((status.as_u16(), &again["duplicate"]), (200, &json!(false)), "{again}");

    let (status, statement) = app.get("/v1/boards/points/users/ann/statement?period=season").await;
    assert_eq!(status, 200, "{statement}");
    assert_eq!(statement["score"], 20, "10 earned, then the correction applied twice");
    let lines = statement["lines"].as_array().unwrap();
    let line = lines.iter().find(|l| l["kind"] == "correction").expect("the correction's line");
    assert_eq!((&line["correction_id"], &line["points"]), (&json!("c1"), &json!(10)), "{statement}");
    assert_eq!(statement["unexplained"], Value::Null, "{statement}");
}

/// A function whose clock runs ahead writes a marker into the next local day's bucket; that
/// bucket is read only within `MARKER_CLOCK_SKEW_SECS` of the day's end (a read less per event
/// the rest of the day), which is when such a marker can matter.
#[tokio::test]
async fn a_retry_from_a_clock_behind_the_first_across_midnight_is_a_duplicate() {
    let app = spawn_ingest_with(sum_board()).await;
    app.set_now(at("2026-11-23T00:02:00Z"));
    submit(&app, "run-1", 7).await;
    app.set_now(at("2026-11-22T23:58:00Z"));
    let retry = submit(&app, "run-1", 7).await;
    assert_eq!(retry["duplicate"], true, "{retry}");

    // The same on an event board (Asia/Shanghai: local midnight is 16:00 UTC).
    let events = spawn_ingest().await;
    let event = json!({"event_id": "c-1", "user_id": "ann", "action": "comment", "target": "a1"});
    events.set_now(at("2026-11-22T16:01:00Z"));
    let (status, first) = events.event(event.clone()).await;
    assert_eq!((status.as_u16(), &first["duplicate"]), (200, &json!(false)), "{first}");
    events.set_now(at("2026-11-22T15:56:00Z"));
    let (status, retry) = events.event(event).await;
    assert_eq!((status.as_u16(), &retry["duplicate"]), (200, &json!(true)), "{retry}");
    assert_eq!(total(&app).await, 7, "applied once");
}
