//! Bad input: every case gets a 4xx JSON error with its code, and nothing reaches Redis.

use axum::http::Method;
use serde_json::{Value, json};
use standings_tests::{WRITER, spawn_ingest};

fn event_with(field: &str, value: Value) -> String {
    let mut event = json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"});
    event[field] = value;
    event.to_string()
}

fn event_without(field: &str) -> String {
    let mut event = json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"});
    event.as_object_mut().unwrap().remove(field);
    event.to_string()
}

fn batch_of(n: usize) -> String {
    let events: Vec<_> = (0..n).map(|i| json!({"event_id": format!("b{i}"), "user_id": "u1", "action": "learning"})).collect();
    json!({ "events": events }).to_string()
}

#[tokio::test]
async fn malformed_inputs_get_their_error_and_write_nothing() {
    let app = spawn_ingest().await;
    let long = |n: usize| "x".repeat(n);
    let cases: Vec<(&str, &str, String, u16, &str)> = vec![
        ("not JSON", "/v1/events", "event_id=1".into(), 400, "malformed"),
        ("empty body", "/v1/events", String::new(), 400, "malformed"),
        ("JSON array", "/v1/events", "[]".into(), 400, "malformed"),
        ("empty object", "/v1/events", "{}".into(), 400, "malformed"),
        ("truncated JSON", "/v1/events", r#"{"event_id": "e1""#.into(), 400, "malformed"),
        ("missing user_id", "/v1/events", event_without("user_id"), 400, "malformed"),
        ("missing action", "/v1/events", event_without("action"), 400, "malformed"),
        ("missing event_id", "/v1/events", event_without("event_id"), 400, "malformed"),
        ("numeric event_id", "/v1/events", event_with("event_id", json!(7)), 400, "malformed"),
        ("misspelt field", "/v1/events", event_with("occured_at", json!("2026-11-22T02:00:00Z")), 400, "malformed"),
        ("unknown action", "/v1/events", event_with("action", json!("teleport")), 422, "unknown_action"),
        ("action in capitals", "/v1/events", event_with("action", json!("Comment")), 422, "unknown_action"),
        ("user_id with braces", "/v1/events", event_with("user_id", json!("u{1}")), 400, "invalid_id"),
        ("user_id with a space", "/v1/events", event_with("user_id", json!("u 1")), 400, "invalid_id"),
        ("user_id with a newline", "/v1/events", event_with("user_id", json!("u\n1")), 400, "invalid_id"),
        ("user_id with a tab", "/v1/events", event_with("user_id", json!("u\t1")), 400, "invalid_id"),
        ("user_id with a control char", "/v1/events", event_with("user_id", json!("u\u{1}1")), 400, "invalid_id"),
        ("user_id in Chinese", "/v1/events", event_with("user_id", json!("用户")), 400, "invalid_id"),
        ("user_id with an accent", "/v1/events", event_with("user_id", json!("josé")), 400, "invalid_id"),
        ("over-long user_id", "/v1/events", event_with("user_id", json!(long(129))), 400, "invalid_id"),
        ("empty user_id", "/v1/events", event_with("user_id", json!("")), 400, "invalid_id"),
        ("event_id with braces", "/v1/events", event_with("event_id", json!("{activity}")), 400, "invalid_id"),
        ("over-long event_id", "/v1/events", event_with("event_id", json!(long(200))), 400, "invalid_id"),
        ("target with a space", "/v1/events", event_with("target", json!("/a b")), 400, "invalid_id"),
        ("target with braces", "/v1/events", event_with("target", json!("{x}")), 400, "invalid_id"),
        ("over-long target", "/v1/events", event_with("target", json!(long(257))), 400, "invalid_id"),
        ("missing target", "/v1/events", event_without("target"), 400, "malformed"),
        ("points on a fixed rule", "/v1/events", event_with("points", json!(5)), 422, "points_not_allowed"),
        ("negative points", "/v1/events", event_with("points", json!(-5)), 422, "points_not_allowed"),
        ("NaN points", "/v1/events", event_with("target", json!("a1")).replace("}", r#","points":NaN}"#), 400, "malformed"),
        ("huge points", "/v1/events", event_with("target", json!("a1")).replace("}", r#","points":1e400}"#), 400, "malformed"),
        ("fractional points", "/v1/events", event_with("points", json!(1.5)), 400, "malformed"),
        (
            "points beyond i64",
            "/v1/events",
            event_with("target", json!("a1")).replace("}", r#","points":99999999999999999999}"#),
            400,
            "malformed",
        ),
        ("active as a string", "/v1/events", event_with("active", json!("yes")), 400, "malformed"),
        (
            "taking back a publish",
            "/v1/events",
            r#"{"event_id":"e1","user_id":"u1","action":"publish","target":"a","active":false}"#.into(),
            422,
            "not_reversible",
        ),
        ("occurred_at not a time", "/v1/events", event_with("occurred_at", json!("yesterday")), 400, "malformed"),
        ("occurred_at too late", "/v1/events", event_with("occurred_at", json!("2026-11-22T01:00:00Z")), 422, "too_late"),
        ("occurred_at in the future", "/v1/events", event_with("occurred_at", json!("2026-11-22T03:00:00Z")), 422, "in_future"),
        ("occurred_at in 1900", "/v1/events", event_with("occurred_at", json!("1900-01-01T00:00:00Z")), 422, "too_late"),
        ("batch over 500", "/v1/events:batch", batch_of(501), 413, "too_large"),
        ("batch with one bad event", "/v1/events:batch", batch_of(3).replacen("learning", "teleport", 1), 422, "unknown_action"),
        ("batch that is a list", "/v1/events:batch", "[]".into(), 400, "malformed"),
        ("body over the limit", "/v1/events", event_with("target", json!(long(2 * 1024 * 1024))), 413, "too_large"),
        ("unknown route", "/v1/evnets", event_without("nothing"), 404, "not_found"),
    ];
    assert!(cases.len() >= 30);
    for (name, path, body, status, code) in cases {
        let (got_status, got) = app.call(Method::POST, path, body, WRITER).await;
        assert_eq!(got_status.as_u16(), status, "{name}: {got}");
        assert_eq!(got["error"]["code"], code, "{name}: {got}");
        assert!(got["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{name}: {got}");
        assert_eq!(app.written_keys().await, Vec::<String>::new(), "{name} wrote to Redis");
    }
}

#[tokio::test]
async fn write_routes_need_the_write_scope() {
    let app = spawn_ingest().await;
    let body = event_without("nothing");
    let (status, got) = app.call(Method::POST, "/v1/events", body.clone(), standings_tests::Caller::Anonymous).await;
    assert_eq!((status.as_u16(), got["error"]["code"].as_str()), (401, Some("unauthenticated")));
    let (status, got) = app.call(Method::POST, "/v1/events", body.clone(), standings_tests::Caller::Scopes(&["standings/read"])).await;
    assert_eq!((status.as_u16(), got["error"]["code"].as_str()), (403, Some("forbidden")));
    let (status, _) = app.call(Method::POST, "/v1/events:batch", batch_of(1), standings_tests::Caller::Anonymous).await;
    assert_eq!(status, 401);
    assert_eq!(app.written_keys().await, Vec::<String>::new());
    let (status, _) = app.call(Method::POST, "/v1/events", body, standings_tests::Caller::Scopes(&["standings/admin"])).await;
    assert_eq!(status, 200, "the admin scope includes writing");
    let (status, got) = app.call(Method::GET, "/v1/events", "", WRITER).await;
    assert_eq!((status.as_u16(), got["error"]["code"].as_str()), (405, Some("method_not_allowed")));
}
