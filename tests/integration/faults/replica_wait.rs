//! A board with `wait_replicas = 1` on a primary that has no replica: an event or a sign-in is
//! applied on the primary but not acknowledged, so the client gets a 503 and retries with the
//! same event id; once a replica has synced, the retry answers `duplicate: true`. Applied once.

use serde_json::json;
use standings::domain::config::Config;
use standings::redis::settings::RedisSettings;
use standings_tests::servers::RedisServer;
use standings_tests::{day, spawn_ingest_at};

use super::WAITING_BOARD;

#[tokio::test]
async fn a_write_no_replica_acknowledges_is_a_503_until_one_has_it() {
    let primary = RedisServer::start(&[]).await;
    let url = primary.url();
    let settings = RedisSettings::from_vars(|name| match name {
        "REDIS_URL" => Some(url.clone()),
        "REDIS_WAIT_TIMEOUT_MS" => Some("100".to_owned()),
        _ => None,
    })
    .unwrap();
    let app = spawn_ingest_at(Config::parse(WAITING_BOARD).unwrap(), &settings).await;
    let event = json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"});

    let sign_in = json!({"event_id": "s1", "user_id": "u1"});
    for (path, body) in [("/v1/events", &event), ("/v1/sign-ins", &sign_in)] {
        let (status, reply) = app.post(path, body).await;
        assert_eq!((status.as_u16(), reply["error"]["code"].as_str()), (503, Some("store_unavailable")), "{path}: {reply}");
    }
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(3 + 1), "both applied on the primary");

    let port = primary.port.to_string();
    let _replica = RedisServer::start(&["--replicaof", "127.0.0.1", &port]).await;
    // Each retry waits 100 ms for the replica's acknowledgement; on a loaded machine the replica
    // may answer later, so both clients retry on 503 as the API tells them to.
    let retried = |path: &'static str, body: serde_json::Value| {
        let app = &app;
        standings_tests::servers::eventually("the replica to acknowledge", std::time::Duration::from_secs(20), move || {
            let body = body.clone();
            async move { Some(app.post(path, &body).await).filter(|(status, _)| *status == 200) }
        })
    };
    let (status, retry) = retried("/v1/events", event.clone()).await;
    assert_eq!((status.as_u16(), &retry["duplicate"]), (200, &json!(true)), "{retry}");
    assert_eq!(retry["results"][0]["delta"], 3);
    let (status, signed) = retried("/v1/sign-ins", sign_in.clone()).await;
    assert_eq!((status.as_u16(), &signed["duplicate"], &signed["points_awarded"]), (200, &json!(true), &json!(1)), "{signed}");
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(3 + 1), "each applied once");
}
