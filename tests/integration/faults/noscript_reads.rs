//! A sharded read whose nodes lack its script (a restart without the scripts, a failover to a
//! node that never ran them, `SCRIPT FLUSH`) loads it once and sends each node's parts again in
//! one pipeline: one request a node, one load, one request a node again, and the same answer;
//! then one request a node. Before, every part went again alone (three requests a part).
//! Flushes scripts, so on servers of its own (`standings_tests::servers`).

use standings::domain::period::{Period, PeriodKind};
use standings::redis::settings::RedisSettings;
use standings::redis::sharded;
use standings_tests::servers::{RedisCluster, RedisServer};
use standings_tests::sharded::{best_scores, in_rank_order, period_sets};
use standings_tests::{at, spawn_ingest_at};

const SHARDS: u32 = 12;
const USERS: u32 = 40;

/// Writes the board, then reads its counts with every node's scripts flushed by `flush`.
async fn counts_after_a_flush(settings: &RedisSettings, flush: impl AsyncFn()) {
    let app = spawn_ingest_at(best_scores("flushed", SHARDS), settings).await;
    let now = at("2026-11-22T08:00:00Z");
    app.set_now(now);
    for user in 0..USERS {
        let body = serde_json::json!({"event_id": format!("e{user}"), "user_id": format!("u{user}"), "score": user % 9});
        assert_eq!(app.post("/v1/boards/flushed/scores", &body).await.0, 200);
    }
    let period = Period::containing(PeriodKind::All, now, chrono_tz::UTC);
    let sets = period_sets(&app, "flushed", SHARDS, &period);
    let nodes = app.nodes_holding(&sets.iter().map(|s| s.set.clone()).collect::<Vec<_>>()).await;
    let mut conn = app.store.connection().await.unwrap();
    // Three members by every shard's entries read whole: counted before each, by the scripts.
    let all = in_rank_order(&mut conn, &sets).await;
    let probes: Vec<(&str, f64)> = [4usize, 19, 33].iter().map(|i| (all[*i].0.as_str(), all[*i].1)).collect();
    assert_eq!(sharded::counts(&conn, &sets, &probes, &[]).await.unwrap().0, vec![4, 19, 33]);

    flush().await;
    let before = app.store.round_trips();
    let (ranked, _) = sharded::counts(&conn, &sets, &probes, &[]).await.unwrap();
    assert_eq!(ranked, vec![4, 19, 33], "the same answer");
    assert_eq!(app.store.round_trips() - before, 2 * nodes + 1, "a pipeline a node, one load, a pipeline a node again");
    let before = app.store.round_trips();
    assert_eq!(sharded::counts(&conn, &sets, &probes, &[]).await.unwrap().0, vec![4, 19, 33]);
    assert_eq!(app.store.round_trips() - before, nodes, "then one request a node");
}

#[tokio::test]
async fn a_read_of_shards_whose_nodes_lack_the_script_loads_it_once_and_resends_a_pipeline_a_node() {
    let server = RedisServer::start(&[]).await;
    counts_after_a_flush(&RedisSettings::standalone(&server.url()), async || {
        let () = server.query(redis::cmd("SCRIPT").arg("FLUSH")).await.unwrap();
    })
    .await;

    let cluster = RedisCluster::start_with(3, 0, &[]).await;
    counts_after_a_flush(&cluster.settings(), async || {
        for node in &cluster.nodes {
            let () = node.query(redis::cmd("SCRIPT").arg("FLUSH")).await.unwrap();
        }
    })
    .await;
}
