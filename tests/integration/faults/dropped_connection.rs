//! The connection dies after the request reached Redis and before the reply came back (a
//! proxy swallows the reply and closes the socket): the client sends it again on a new
//! connection, the script did run, and the copy is answered from the marker — applied once.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use axum::http::Method;
use serde_json::json;
use standings::domain::config::Config;
use standings::redis::settings::RedisSettings;
use standings::redis::store::Store;
use standings_tests::proxy::DroppingProxy;
use standings_tests::servers::{RedisCluster, RedisServer, eventually};
use standings_tests::{ADMIN, day, spawn_ingest_at, spawn_ingest_with_stores};

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
    // The request is sent again on a new connection: the script ran once already, so the copy
    // is answered from the marker the lost attempt wrote.
    let (status, body) = app.event(event.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(proxy.dropped(), 1);
    assert_eq!(body["duplicate"], true, "the copy is answered from the marker the lost attempt wrote: {body}");
    assert_eq!(body["results"][0]["delta"], 2);
    assert_eq!(body["results"][0]["periods"][0]["score"], 5);
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(3 + 2), "applied once");

    let (status, retry) = app.event(event).await;
    assert_eq!(status, 200, "{retry}");
    assert_eq!(retry["duplicate"], true);
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(5), "applied once");
}

/// On a cluster, redis-rs re-sends a request whose connection dropped (up to its retry limit),
/// and the copy runs again. Every node announces a dropping proxy in front of it as its address
/// (`cluster-announce-port`), so the app reaches the nodes only through the proxies. Writes
/// that carry no id of their own (heat without `event_id`, a correction without
/// `correction_id`) must still apply once, and answer as the one request they are.
#[tokio::test]
async fn on_a_cluster_a_script_call_re_sent_after_a_dropped_connection_applies_once() {
    let cluster = RedisCluster::start(3).await;
    let mut proxies = HashMap::new();
    for node in &cluster.nodes {
        let proxy = DroppingProxy::start(node.port).await;
        let () = node.query(redis::cmd("CONFIG").arg("SET").arg("cluster-announce-port").arg(proxy.port)).await.unwrap();
        proxies.insert(node.port, proxy);
    }
    let proxy_ports: HashSet<u16> = proxies.values().map(|p| p.port).collect();
    eventually("every node announcing its proxy", Duration::from_secs(20), || async {
        for node in &cluster.nodes {
            let slots: Vec<Vec<redis::Value>> = node.query(redis::cmd("CLUSTER").arg("SLOTS")).await.ok()?;
            let announced: HashSet<u16> = slots
                .iter()
                .flat_map(|range| &range[2..])
                .filter_map(|n| match n {
                    redis::Value::Array(address) => match address.get(1)? {
                        redis::Value::Int(port) => u16::try_from(*port).ok(),
                        _ => None,
                    },
                    _ => None,
                })
                .collect();
            if announced != proxy_ports {
                return None;
            }
        }
        Some(())
    })
    .await;
    let app = spawn_ingest_at(Config::default_boards(), &cluster.settings()).await;
    // Heat buckets expire an absolute time after their hour: the clock must be the server's.
    let now = chrono::Utc::now();
    app.set_now(now);
    let no_event_id = json!({});
    let heat = || app.post("/v1/hot/hot-videos/items/v1", &no_event_id);
    let correct = || {
        app.call(Method::POST, "/v1/admin/boards/activity/users/u1/corrections", json!({"delta": 5, "reason": "review"}).to_string(), ADMIN)
    };
    let primary_proxy = |board: &'static str| {
        let (cluster, proxies) = (&cluster, &proxies);
        async move {
            let slot: u16 = cluster.nodes[0].query(redis::cmd("CLUSTER").arg("KEYSLOT").arg(format!("{{{board}}}"))).await.unwrap();
            // The nodes now name their proxies as their addresses.
            let announced = cluster.primary_of(slot).await.expect("a settled cluster");
            proxies.values().find(|proxy| proxy.port == announced).expect("a proxy in front of every node")
        }
    };
    // Scripts loaded and the eviction policy probed first.
    assert_eq!(heat().await.1["heat"], 1.0);
    assert_eq!(correct().await.0, 200);

    let proxy = primary_proxy("hot-videos").await;
    proxy.drop_next_script_reply();
    let (status, body) = heat().await;
    assert_eq!(proxy.dropped(), 1, "the reply was lost with its connection");
    assert_eq!((status.as_u16(), &body["duplicate"]), (200, &json!(false)), "the client re-sent the call and answered once: {body}");
    assert_eq!(body["heat"], 2.0, "the heat counted once: {body}");

    let proxy = primary_proxy("activity").await;
    proxy.drop_next_script_reply();
    let (status, body) = correct().await;
    assert_eq!(proxy.dropped(), 1);
    assert_eq!((status.as_u16(), &body["duplicate"]), (200, &json!(false)), "{body}");
    let today = standings::domain::period::Period::containing(standings::domain::period::PeriodKind::Day, now, chrono_tz::Asia::Shanghai);
    assert_eq!(app.points("activity", today, "u1").await, Some(10), "two corrections of 5, each applied once");
}
