//! `GET /v1/health`: the store's version, mode and eviction policy, and a 503 when it is down.

use serde_json::json;
use standings::config::Config;
use standings_tests::{spawn_ingest, spawn_ingest_on};

#[tokio::test]
async fn health_reports_the_store_without_addresses() {
    let app = spawn_ingest().await;
    // Load every script so the report can say so.
    app.event(json!({"event_id": "e", "user_id": "u", "action": "comment", "target": "a"})).await;
    app.get("/v1/boards/activity/top").await;
    app.call_query(axum::http::Method::POST, "/v1/boards/activity/ranks", json!({"user_ids": ["u"]}).to_string()).await;
    let (status, headers, health) = app.get_with_headers("/v1/health").await;
    assert_eq!(status, 200, "{health}");
    assert_eq!(headers["cache-control"], "no-store");
    let server_version = standings_tests::cluster::info(&app.redis, "server").await;
    let version = health["store"]["version"].as_str().unwrap();
    assert!(server_version.contains(&format!("redis_version:{version}\r\n")), "{version}");
    assert_eq!(health["store"]["mode"], if app.store.is_cluster() { "cluster" } else { "standalone" });
    let policy: (String, String) = redis::cmd("CONFIG").arg("GET").arg("maxmemory-policy").query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(health["store"]["maxmemory_policy"], policy.1.as_str());
    assert_eq!(health["store"]["eviction_risk"], policy.1 != "noeviction");
    let (loaded, total) = (health["store"]["scripts_loaded"].as_u64().unwrap(), health["store"]["scripts_total"].as_u64().unwrap());
    assert_eq!(total, standings::scripts::hashes().len() as u64, "every Lua script is counted");
    assert!((3..=total).contains(&loaded), "at least the three this test ran are cached: {loaded}");
    assert!(!health.to_string().contains("127.0.0.1"));
}

#[tokio::test]
async fn health_is_a_503_when_the_store_is_down() {
    let app = spawn_ingest_on(Config::default_boards(), "redis://127.0.0.1:1").await;
    let (status, headers, body) = app.get_with_headers("/v1/health").await;
    assert_eq!(status, 503);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(body["error"]["code"], "store_unavailable");
    assert!(!body.to_string().contains("127.0.0.1"));
}
