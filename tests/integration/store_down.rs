//! The store is unreachable: a clear 503 with Retry-After, no internals in the body.

use axum::http::Method;
use serde_json::json;
use standings::domain::config::Config;
use standings_tests::{WRITER, spawn_ingest_on};

#[tokio::test]
async fn an_unreachable_store_is_a_503_with_retry_after_and_no_internals() {
    // Port 1 on loopback: nothing listens there.
    let app = spawn_ingest_on(Config::default_boards(), "redis://:s3cret@127.0.0.1:1").await;
    let event = json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"});
    let (status, headers, body) = app.call_with_headers(Method::POST, "/v1/events", event.to_string(), WRITER).await;
    assert_eq!(status, 503);
    assert_eq!(headers.get("retry-after").map(|v| v.to_str().unwrap()), Some("1"));
    assert_eq!(body["error"]["code"], "store_unavailable");
    let text = body.to_string();
    for secret in ["127.0.0.1", "s3cret", "refused", "redis:"] {
        assert!(!text.contains(secret), "the body leaks {secret:?}: {text}");
    }
}
