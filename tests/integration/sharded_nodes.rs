//! A read of every shard is one pipeline a node holding shards (docs/scaling.md#reads): counted
//! by the store itself, exact against every shard's entries read whole, and a cluster map gone
//! stale (every slot taken for one node's) costs one pipeline that fails at once (its client
//! never retries) and the parts sent again alone, answers exactly, and is read again for the
//! next read.

use standings::domain::period::{Period, PeriodKind};
use standings::redis::sharded;
use standings_tests::sharded::{best_scores, in_rank_order, period_sets};
use standings_tests::{at, spawn_ingest_with};

const SHARDS: u32 = 12;
const USERS: u32 = 60;

#[tokio::test]
async fn a_read_of_every_shard_is_one_pipeline_a_node_and_a_stale_map_only_costs_a_resend() {
    let app = spawn_ingest_with(best_scores("nodes", SHARDS)).await;
    let now = at("2026-11-22T08:00:00Z");
    app.set_now(now);
    for user in 0..USERS {
        // Ties on purpose: scores repeat every 7 users.
        let body = serde_json::json!({"event_id": format!("e{user}"), "user_id": format!("u{user}"), "score": user % 7});
        assert_eq!(app.post("/v1/boards/nodes/scores", &body).await.0, 200);
    }
    let period = Period::containing(PeriodKind::All, now, chrono_tz::UTC);
    let sets = period_sets(&app, "nodes", SHARDS, &period);
    let nodes = app.nodes_holding(&sets.iter().map(|s| s.set.clone()).collect::<Vec<_>>()).await;
    if app.store.is_cluster() {
        assert!(nodes > 1 && nodes < u64::from(SHARDS), "12 shards over the test cluster's primaries: {nodes}");
    }

    // The oracle: every shard's entries read whole, in ZREVRANGE order over all of them.
    let mut conn = app.store.connection().await.unwrap();
    let all = in_rank_order(&mut conn, &sets).await;
    assert_eq!(all.len() as u32, USERS);
    let probes: Vec<(&str, f64)> = [3usize, 17, 42].iter().map(|i| (all[*i].0.as_str(), all[*i].1)).collect();

    // A transaction a shard (sizes) and a script call a shard (counts): one request a node,
    // once each node has the script (a node without it answers NOSCRIPT, and the script is
    // loaded and the node's parts sent again: which test reads counts first is not this one's to
    // know; faults/noscript_reads.rs counts that case).
    sharded::sizes(&conn, &sets).await.unwrap();
    sharded::counts(&conn, &sets, &probes, &[]).await.unwrap();
    let before = app.store.round_trips();
    let sizes = sharded::sizes(&conn, &sets).await.unwrap();
    assert_eq!(app.store.round_trips() - before, nodes, "sizes of {SHARDS} shards");
    assert_eq!(sizes.iter().sum::<u64>(), u64::from(USERS));
    let before = app.store.round_trips();
    let (ranked, _) = sharded::counts(&conn, &sets, &probes, &[]).await.unwrap();
    assert_eq!(app.store.round_trips() - before, nodes, "counts of {SHARDS} shards");
    assert_eq!(ranked, vec![3, 17, 42], "members ranked before each probe");

    // A stale map: every part goes to the node of the first shard's slot; the parts of other
    // nodes come back MOVED and are sent again on their own.
    app.store.node_map().pretend_all_on("127.0.0.1:1");
    let before = app.store.round_trips();
    let (ranked, _) = sharded::counts(&conn, &sets, &probes, &[]).await.unwrap();
    let spent = app.store.round_trips() - before;
    assert_eq!(ranked, vec![3, 17, 42], "exact with a stale map");
    // The pipeline that failed (its client does not retry), then every part alone.
    let expected = if app.store.is_cluster() { 1 + u64::from(SHARDS) } else { nodes };
    assert_eq!(spent, expected, "one pipeline, then the parts alone");
    // The map was read again: one request a node once more.
    let before = app.store.round_trips();
    assert_eq!(sharded::sizes(&conn, &sets).await.unwrap().iter().sum::<u64>(), u64::from(USERS));
    assert_eq!(app.store.round_trips() - before, nodes + u64::from(app.store.is_cluster()), "the map read again, then a request a node");
    let before = app.store.round_trips();
    sharded::sizes(&conn, &sets).await.unwrap();
    assert_eq!(app.store.round_trips() - before, nodes);

    // Reading from replicas (`REDIS_READ_FROM_REPLICAS`), once each primary's replica holds the
    // writes: the transactions go to the replicas, the same answers.
    if app.store.is_cluster() {
        for set in &sets {
            let (_, acknowledged): (u64, u64) =
                redis::pipe().cmd("ZCARD").arg(&set.set).cmd("WAIT").arg(1).arg(5000).query_async(&mut app.redis.clone()).await.unwrap();
            assert_eq!(acknowledged, 1, "{} replicated", set.set);
        }
        let settings = standings::redis::settings::RedisSettings { read_from_replicas: true, ..standings_tests::redis_settings() };
        let replicas = standings::redis::store::Store::connect(&settings).unwrap();
        let conn = replicas.connection().await.unwrap();
        let (_, secondaries) = cluster_nodes(&app).await;
        let served = |nodes: Vec<String>| async move {
            let mut calls = 0;
            for node in nodes {
                calls += zcard_calls(&node).await;
            }
            calls
        };
        let on_replicas = served(secondaries.clone()).await;
        assert_eq!(sharded::sizes(&conn, &sets).await.unwrap(), sizes);
        // Served by the replicas, a ZCARD a shard there at least (the tests beside this one read
        // the cluster's primaries meanwhile, so what the primaries served says nothing).
        assert!(served(secondaries).await - on_replicas >= u64::from(SHARDS), "the replicas served the sizes");
        assert_eq!(sharded::counts(&conn, &sets, &probes, &[]).await.unwrap().0, vec![3, 17, 42]);
    }
}

/// The test cluster's primaries and replicas (`host:port`), from `CLUSTER NODES`.
async fn cluster_nodes(app: &standings_tests::TestApp) -> (Vec<String>, Vec<String>) {
    let text: String = redis::cmd("CLUSTER").arg("NODES").query_async(&mut app.redis.clone()).await.unwrap();
    let (mut primaries, mut replicas) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let address = fields[1].split('@').next().unwrap().to_owned();
        if fields[2].contains("master") {
            primaries.push(address);
        } else if fields[2].contains("slave") {
            replicas.push(address);
        }
    }
    assert!(!replicas.is_empty(), "the test cluster has replicas: {text}");
    (primaries, replicas)
}

/// How many `ZCARD`s the node at `address` has served (`INFO commandstats`).
async fn zcard_calls(address: &str) -> u64 {
    let client = redis::Client::open(format!("redis://{address}")).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(&mut conn).await.unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_zcard:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().unwrap())
}
