//! The eviction probe reads every primary's `maxmemory-policy`: on a cluster where one primary
//! of three may evict, health says so and writes are refused, whichever node the probe's
//! connection happens to pick and whichever node the written board lives on.

use serde_json::json;
use standings::domain::config::Config;
use standings_tests::servers::RedisCluster;
use standings_tests::spawn_ingest_at;

#[tokio::test]
async fn one_evicting_primary_of_a_cluster_refuses_writes_and_shows_in_health() {
    let cluster = RedisCluster::start(3).await;
    let primaries: Vec<&standings_tests::servers::RedisServer> = {
        let mut primaries = Vec::new();
        for node in &cluster.nodes {
            let role: String = node.query(redis::cmd("INFO").arg("replication")).await.unwrap();
            if role.contains("role:master") {
                primaries.push(node);
            }
        }
        primaries
    };
    assert_eq!(primaries.len(), 3);
    let () = primaries[2].query(redis::cmd("CONFIG").arg("SET").arg("maxmemory-policy").arg("allkeys-lru")).await.unwrap();

    // Several apps (fresh probes, each picking its own node) all see the one evicting primary.
    for _ in 0..3 {
        let app = spawn_ingest_at(Config::default_boards(), &cluster.settings()).await;
        let (status, health) = app.get("/v1/health").await;
        assert_eq!(status, 200, "{health}");
        assert_eq!((&health["store"]["maxmemory_policy"], &health["store"]["eviction_risk"]), (&json!("allkeys-lru"), &json!(true)));
        assert_eq!(health["store"]["writes_accepted"], false);
        let (status, body) = app.event(json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"})).await;
        assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (503, Some("store_misconfigured")), "{body}");
        assert!(app.written_keys().await.is_empty(), "a refused write writes nothing");
    }
}
