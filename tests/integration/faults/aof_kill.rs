//! A standalone redis-server with AOF `appendfsync always` is killed (SIGKILL) in the middle
//! of a concurrent load and restarted on the same port and directory.

use std::sync::Arc;

use standings::domain::config::Config;
use standings::redis::settings::RedisSettings;
use standings_tests::cluster;
use standings_tests::load::{self, Delivery, Load};
use standings_tests::servers::RedisServer;
use standings_tests::{day, spawn_ingest_at};
use tokio::time::Instant;

const TASKS: usize = 8;
const EVENTS_PER_TASK: usize = 150;
const USERS: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_events_survive_a_kill_and_errored_ones_apply_once_when_retried() {
    let mut server = RedisServer::start(&["--appendonly", "yes", "--appendfsync", "always"]).await;
    let app = Arc::new(spawn_ingest_at(Config::default_boards(), &RedisSettings::standalone(&server.url())).await);
    let load = Load::start(app.clone(), load::comments(TASKS, EVENTS_PER_TASK, USERS));
    load.wait_for_acknowledged(TASKS * EVENTS_PER_TASK / 4).await;
    server.kill();
    // Everything acknowledged before this instant was acknowledged by the killed server.
    let restarted_at = Instant::now();
    server.restart().await;
    let deliveries = load.finish().await;

    let before_kill = deliveries.iter().filter(|d| d.acknowledged_at < restarted_at).count();
    let retried: Vec<_> = deliveries.iter().filter(|d| d.errors > 0).collect();
    let applied_before_kill = retried.iter().filter(|d| d.duplicate).count();
    println!(
        "aof kill: {} events, {before_kill} acknowledged before the kill, {} got errors and were retried \
         ({applied_before_kill} of those had been applied and persisted before the kill)",
        deliveries.len(),
        retried.len(),
    );
    assert_eq!(deliveries.len(), TASKS * EVENTS_PER_TASK);
    assert!(before_kill >= TASKS * EVENTS_PER_TASK / 4, "the kill came mid-load");
    // Requests in flight at the kill were sent again on a new connection (store.rs) or, when
    // Redis was not back yet, answered 503 and retried by the load: either way once.
    assert!(deliveries.iter().any(|d| d.acknowledged_at >= restarted_at), "the load went on after the restart");

    // Exactly once: the scores are the sum over every event, each counted once.
    let expected = load::expected_points(&deliveries);
    for (user, points) in &expected {
        assert_eq!(app.points("activity", day("2026-11-22"), user).await, Some(*points), "{user}");
    }
    // Every event's marker is there, once, and a re-delivery gets the first answer.
    let board = app.keys.board("activity");
    let marked = cluster::marked(
        &app.redis,
        &board,
        app.config.board("activity").unwrap().timezone,
        deliveries.iter().map(Delivery::event_id),
        app.now(),
    )
    .await;
    assert_eq!(cluster::marker_count(&app.redis, &board).await, deliveries.len() as u64);
    for delivery in &deliveries {
        assert!(marked.contains(delivery.event_id()), "{}", delivery.event);
        let (status, body) = app.event(delivery.event.clone()).await;
        assert_eq!((status.as_u16(), &body["duplicate"]), (200, &serde_json::json!(true)), "{body}");
    }
}
