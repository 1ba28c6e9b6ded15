//! The connection dies after the request reached Redis and before the reply came back (a
//! proxy swallows the reply and closes the socket): the client sees an error, the script did
//! run, and the retry with the same event id is answered from the marker — applied once.

use serde_json::json;
use standings::config::Config;
use standings::store::{RedisSettings, Store};
use standings_tests::proxy::DroppingProxy;
use standings_tests::servers::RedisServer;
use standings_tests::{day, spawn_ingest_with_stores};

#[tokio::test]
async fn a_reply_lost_with_its_connection_is_retried_and_applied_once() {
    let server = RedisServer::start(&[]).await;
    let proxy = DroppingProxy::start(server.port).await;
    let through_proxy = Store::connect(&RedisSettings::standalone(&proxy.url())).unwrap();
    let direct = Store::connect(&RedisSettings::standalone(&server.url())).unwrap();
    let app = spawn_ingest_with_stores(Config::default_boards(), through_proxy, direct).await;
    let first = json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"});
    assert_eq!(app.event(first).await.0, 200, "the script is loaded and the path works");

    let event = json!({"event_id": "e2", "user_id": "u1", "action": "praise", "target": "a1"});
    proxy.drop_next_script_reply();
    let (status, body) = app.event(event.clone()).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (503, Some("store_unavailable")), "{body}");
    assert_eq!(proxy.dropped(), 1);
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(3 + 2), "the script ran before the connection died");

    let (status, retry) = app.event(event).await;
    assert_eq!(status, 200, "{retry}");
    assert_eq!(retry["duplicate"], true, "the retry is answered from the marker the lost attempt wrote");
    assert_eq!(retry["results"][0]["delta"], 2);
    assert_eq!(retry["results"][0]["periods"][0]["score"], 5);
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(5), "applied once");
}
