//! redis-server restarts between two requests: the connection every function instance holds
//! is dead, and the next request finds out. It reconnects and sends again once (a read is
//! harmless to repeat; a write's retry is a duplicate, never applied twice) instead of
//! answering 503 while Redis is back.

use serde_json::json;
use standings::domain::config::Config;
use standings::redis::settings::RedisSettings;
use standings_tests::servers::RedisServer;
use standings_tests::{day, spawn_ingest_at};

#[tokio::test]
async fn the_first_request_after_a_redis_restart_is_answered_not_refused() {
    // Persisted, so the restart keeps what was written and the retried write meets its marker.
    let mut server = RedisServer::start(&["--appendonly", "yes", "--appendfsync", "always"]).await;
    let app = spawn_ingest_at(Config::default_boards(), &RedisSettings::standalone(&server.url())).await;
    let event = |id: &str| json!({"event_id": id, "user_id": "u1", "action": "comment", "target": id});
    assert_eq!(app.event(event("e1")).await.0, 200);
    assert_eq!(app.get("/v1/boards/activity/top?period=day").await.0, 200);

    server.restart().await;
    let (status, body) = app.get("/v1/boards/activity/top?period=day").await;
    assert_eq!(status, 200, "a read after the restart: {body}");
    assert_eq!(body["entries"][0]["score"], 3, "{body}");

    server.restart().await;
    let (status, body) = app.event(event("e2")).await;
    assert_eq!(status, 200, "a write after the restart: {body}");
    assert_eq!(body["duplicate"], false);
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(6), "applied once");

    server.restart().await;
    let (status, body) = app.event(event("e2")).await;
    assert_eq!((status.as_u16(), &body["duplicate"]), (200, &json!(true)), "the same write again is a duplicate: {body}");
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(6));
}
