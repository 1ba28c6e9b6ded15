//! `GET /v1/health`: the store's mode and eviction policy, cached, and a 503 when it is down.

use standings::domain::config::Config;
use standings_tests::{spawn_ingest, spawn_ingest_on};

#[tokio::test]
async fn health_reports_what_an_operator_needs_and_nothing_more() {
    let app = spawn_ingest().await;
    let (status, headers, health) = app.get_with_headers("/v1/health").await;
    assert_eq!(status, 200, "{health}");
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(health["store"]["mode"], if app.store.is_cluster() { "cluster" } else { "standalone" });
    let policy: (String, String) =
        redis::cmd("CONFIG").arg("GET").arg("maxmemory-policy").query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(health["store"]["maxmemory_policy"], policy.1.as_str());
    assert_eq!(health["store"]["eviction_risk"], policy.1 != "noeviction");
    let mut fields: Vec<_> = health["store"].as_object().unwrap().keys().cloned().collect();
    fields.sort();
    assert_eq!(fields, ["eviction_risk", "maxmemory_policy", "mode", "writes_accepted"], "no version, address or script details");
    assert!(!health.to_string().contains("127.0.0.1"));
}

#[tokio::test]
async fn health_probes_the_store_at_most_once_per_few_seconds_however_often_it_is_called() {
    let app = spawn_ingest().await;
    let before = app.store.round_trips();
    let calls = futures::future::join_all((0..50).map(|_| app.get_with_headers("/v1/health"))).await;
    assert!(calls.iter().all(|(status, ..)| *status == 200));
    assert_eq!(app.store.round_trips() - before, 1, "fifty calls, one probe");
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
