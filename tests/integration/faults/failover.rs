//! A cluster primary is killed (SIGKILL) during a load on the board it serves. Each test
//! builds a 6-node cluster of its own (`servers::RedisCluster`, node timeout 2 s) so it may
//! break it. After the failover — a replica promoted, as every live node's `CLUSTER NODES`
//! agrees — ingestion resumes.
//!
//! Redis replicates asynchronously: a write the dying primary acknowledged but had not yet
//! streamed to its replica is lost, and Redis Cluster does not promise otherwise. The first
//! test counts such writes and checks the scores are exactly what survived; the second puts
//! the board on `wait_replicas = 1` (WAIT after each write) and asserts that none is lost.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use standings::domain::config::Config;
use standings::redis::store::{Connection, Store};
use standings_tests::cluster::marked;
use standings_tests::load::{self, Delivery, Load};
use standings_tests::servers::{RedisCluster, eventually};
use standings_tests::{TestApp, day, spawn_ingest_at};

use super::WAITING_BOARD;
use tokio::time::Instant;

const TASKS: usize = 8;
const EVENTS_PER_TASK: usize = 150;
const USERS: usize = 20;

struct Failover {
    deliveries: Vec<Delivery>,
    lost: Vec<Delivery>,
    /// From the kill until every live node agreed on the promoted replica.
    promotion: Duration,
}

/// Runs the load, kills the primary of `{activity}` a quarter of the way in, waits for the
/// promotion (and, with `restart_killed_node`, for the killed node to rejoin as a replica),
/// then checks what survived against the scores.
async fn kill_the_boards_primary_during_load(cluster: &mut RedisCluster, app: Arc<TestApp>, restart_killed_node: bool) -> Failover {
    let slot: u16 = cluster.nodes[0].query(redis::cmd("CLUSTER").arg("KEYSLOT").arg("{activity}")).await.unwrap();
    let load = Load::start(app.clone(), load::comments(TASKS, EVENTS_PER_TASK, USERS));
    load.wait_for_acknowledged(TASKS * EVENTS_PER_TASK / 4).await;
    // The slot's primary now (a starved machine may already have failed it over once).
    let primary = eventually("the board's primary", Duration::from_secs(30), || cluster.primary_of(slot)).await;
    cluster.node(primary).kill();
    let killed_at = Instant::now();
    eventually("a replica promoted for the board's slot", Duration::from_secs(30), || async {
        cluster.primary_of(slot).await.filter(|&promoted| promoted != primary)
    })
    .await;
    let promoted_at = Instant::now();
    if restart_killed_node {
        cluster.node(primary).restart().await;
        cluster.wait_until_healthy().await;
    }
    let deliveries = load.finish().await;

    // A fresh connection: it learns the new topology from scratch.
    let conn = Store::connect(&cluster.settings()).unwrap().connection().await.unwrap();
    let board = app.keys.board("activity");
    let marked =
        marked(&conn, &board, app.config.board("activity").unwrap().timezone, deliveries.iter().map(Delivery::event_id), app.now()).await;
    let (present, lost): (Vec<Delivery>, Vec<Delivery>) = deliveries.iter().cloned().partition(|d| marked.contains(d.event_id()));

    assert_eq!(deliveries.len(), TASKS * EVENTS_PER_TASK);
    assert!(deliveries.iter().any(|d| d.acknowledged_at > promoted_at), "ingestion resumed after the failover");
    assert!(deliveries.iter().any(|d| d.errors > 0), "the kill interrupted requests");
    for delivery in &lost {
        assert!(
            delivery.acknowledged_at < promoted_at && delivery.errors == 0,
            "only the dead primary's acknowledgements can be lost: {delivery:?}"
        );
    }
    // Exactly once for everything that survived: each present event counted once.
    let expected = load::expected_points(&present);
    for u in 0..USERS {
        let user = format!("u{u}");
        assert_eq!(points(&conn, &app, &user).await, expected.get(&user).copied(), "{user}");
    }
    Failover { deliveries, lost, promotion: promoted_at - killed_at }
}

async fn points(conn: &Connection, app: &TestApp, user: &str) -> Option<i64> {
    let key = app.keys.board("activity").period(&day("2026-11-22"));
    let composite: Option<f64> = redis::cmd("ZSCORE").arg(key).arg(user).query_async(&mut conn.clone()).await.unwrap();
    composite.map(standings::domain::tiebreak::points_of)
}

fn report(name: &str, failover: &Failover) {
    let retried = failover.deliveries.iter().filter(|d| d.errors > 0).count();
    let errors: u32 = failover.deliveries.iter().map(|d| d.errors).sum();
    println!(
        "{name}: {} events, promotion after {:?}, {retried} events retried ({errors} 503s), {} acknowledged writes lost",
        failover.deliveries.len(),
        failover.promotion,
        failover.lost.len(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_a_primary_dies_ingestion_resumes_and_lost_acknowledged_writes_are_counted() {
    let mut cluster = RedisCluster::start(3).await;
    let app = Arc::new(spawn_ingest_at(Config::default_boards(), &cluster.settings()).await);
    let failover = kill_the_boards_primary_during_load(&mut cluster, app, false).await;
    // Not asserted: how much is lost depends on how far the replica lagged (see README).
    report("failover without WAIT", &failover);
}

/// Events per second over `clients` concurrent clients sending 200 events in all (503s
/// retried, as a client would), and the mean time per event.
async fn rate(app: &Arc<TestApp>, tag: &str, clients: usize) -> (f64, Duration) {
    let per_client = 200 / clients;
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (app, tag) = (app.clone(), format!("{tag}-{clients}-{c}"));
            tokio::spawn(async move {
                for i in 0..per_client {
                    load::deliver(
                        &app,
                        json!({"event_id": format!("{tag}-{i}"), "user_id": tag, "action": "comment", "target": format!("x{i}")}),
                    )
                    .await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed();
    let events = clients * per_client;
    (events as f64 / elapsed.as_secs_f64(), elapsed * clients as u32 / events as u32)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_wait_replicas_no_acknowledged_write_is_lost() {
    let mut cluster = RedisCluster::start(3).await;
    let waiting = Arc::new(spawn_ingest_at(Config::parse(WAITING_BOARD).unwrap(), &cluster.settings()).await);
    let plain = Arc::new(spawn_ingest_at(Config::default_boards(), &cluster.settings()).await);
    for clients in [1, 8] {
        let ((plain_rate, plain_time), (wait_rate, wait_time)) =
            (rate(&plain, "plain", clients).await, rate(&waiting, "wait", clients).await);
        println!(
            "{clients} client(s) on loopback: {plain_rate:.0} events/s, {plain_time:?} each without WAIT; \
             {wait_rate:.0} events/s, {wait_time:?} each with WAIT 1"
        );
    }

    let failover = kill_the_boards_primary_during_load(&mut cluster, waiting, true).await;
    report("failover with WAIT 1", &failover);
    assert_eq!(failover.lost.len(), 0, "an acknowledged write was lost: {:?}", failover.lost);
}
