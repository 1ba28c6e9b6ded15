//! Rollbacks (docs/journal.md#rollbacks): a Redis restarted from an older snapshot (its RDB, as
//! a self-run Redis after a crash, or a cache restored from last night's backup) holds every
//! key, each as it was then. The drain sees it within one run (or the restore, run first), the
//! board is fenced, and one restore brings every key back as it stood before the rollback.

use std::sync::Arc;

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use journal::{S3Objects, Status};
use serde_json::json;
use standings::domain::config::Config;
use standings::redis::settings::RedisSettings;
use standings_tests::TestApp;
use standings_tests::journal::{drain_to_new_bucket, spawn_journaled_at};
use standings_tests::servers::{RedisCluster, RedisServer, eventually};

pub(crate) fn far() -> chrono::DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

pub(crate) async fn learn(app: &TestApp, id: &str, user: &str) -> (StatusCode, serde_json::Value) {
    app.set_now(Utc::now());
    app.event(json!({"event_id": id, "user_id": user, "action": "learning"})).await
}

pub(crate) async fn points(app: &TestApp, user: &str) -> (StatusCode, Option<i64>) {
    let (status, me) = app.get(&format!("/v1/boards/points/users/{user}?period=season")).await;
    (status, me["score"].as_i64())
}

/// The keys a restore brings back: every key but the journals' streams and the notices (rank
/// moves are not journaled: docs/notifications.md).
async fn state(app: &TestApp) -> Vec<(String, Vec<u8>, i64)> {
    app.keyspace().await.into_iter().filter(|(key, ..)| !key.ends_with(":journal") && !key.contains(":notice")).collect()
}

/// The journal's bucket through a client that cannot write the drain's record (its `put` fails,
/// as under a policy that denies it): the drain must see a rollback from the objects alone.
struct WithoutRecord(S3Objects);

impl journal::Objects for WithoutRecord {
    async fn put_new(&self, key: &str, body: Vec<u8>) -> Result<journal::Put, journal::ObjectError> {
        self.0.put_new(key, body).await
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, journal::ObjectError> {
        self.0.get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, journal::ObjectError> {
        self.0.list(prefix).await
    }
}

async fn rolled_back(drain_first: bool, record: bool) {
    let mut server = RedisServer::start(&["--appendonly", "no", "--save", ""]).await;
    let app = spawn_journaled_at(Config::default_boards(), &RedisSettings::standalone(&server.url())).await;
    for i in 0..2 {
        assert_eq!(learn(&app, &format!("before-{i}"), "ann").await.0, StatusCode::OK);
    }
    let (client, bucket) = drain_to_new_bucket(&app, 3).await;
    let drain = || async {
        let objects = S3Objects::new(client.clone(), &bucket);
        if record {
            app.drainer(objects, Arc::default()).drain(far()).await
        } else {
            app.drainer(WithoutRecord(objects), Arc::default()).drain(far()).await
        }
    };
    // Last night's snapshot, its stream holding a write not drained yet; then writes after it:
    // some drained, one still in the stream.
    assert_eq!(learn(&app, "pending", "dan").await.0, StatusCode::OK);
    let () = redis::cmd("SAVE").query_async(&mut app.redis.clone()).await.unwrap();
    let at_snapshot = points(&app, "ann").await;
    for (i, user) in ["ann", "bob", "ann", "cid"].iter().enumerate() {
        assert_eq!(learn(&app, &format!("after-{i}"), user).await.0, StatusCode::OK);
    }
    assert!(drain().await.boards.iter().all(|b| b.error.is_none()));
    assert_eq!(learn(&app, "undrained", "bob").await.0, StatusCode::OK);
    assert!(drain().await.boards.iter().all(|b| b.error.is_none()));
    let before = state(&app).await;
    let ann = points(&app, "ann").await;
    assert_ne!(ann, at_snapshot);

    // Killed and started again on the snapshot: every key is there, as it was then.
    server.restart().await;
    eventually("the store reaches Redis again", std::time::Duration::from_secs(30), || async {
        let mut conn = app.store.connection().await.ok()?;
        redis::cmd("PING").query_async::<String>(&mut conn).await.ok()
    })
    .await;
    if drain_first {
        let report = drain().await;
        let lost: Vec<&str> = report.boards.iter().filter(|b| b.lost).map(|b| b.board.as_str()).collect();
        assert_eq!(lost, vec!["points"], "the drain sees the board older than its journal: {:?}", report.boards);
        let (status, body) = learn(&app, "fenced", "dan").await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{body}");
        let (status, _) = points(&app, "ann").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "no read answers from the older board");
    }
    let restorer = app.journal_jobs(&client, &bucket, Arc::default()).restorer;
    let report = restorer.restore(None, far()).await.unwrap();
    assert_eq!(report.status, Status::Complete, "{report:?}");
    assert_eq!(state(&app).await, before, "every key as it stood before the rollback");
    assert_eq!(points(&app, "ann").await, ann);
    let (status, again) = learn(&app, "after-2", "ann").await;
    assert_eq!((status, again["duplicate"].as_bool()), (StatusCode::OK, Some(true)), "a write after the snapshot is known: {again}");
    assert_eq!(learn(&app, "next", "ann").await.0, StatusCode::OK);
    let report = drain().await;
    assert!(report.boards.iter().all(|b| !b.lost && b.error.is_none()), "nothing older than the journal now: {:?}", report.boards);
    let now = state(&app).await;
    assert_eq!(restorer.restore(None, far()).await.unwrap().status, Status::Complete);
    assert_eq!(state(&app).await, now, "a second restore finds every key intact and writes nothing");
}

#[tokio::test]
async fn a_redis_restarted_from_an_older_snapshot_is_fenced_by_the_next_drain_and_restored() {
    rolled_back(true, true).await;
}

#[tokio::test]
async fn a_restore_run_first_after_a_rollback_sees_it_itself() {
    rolled_back(false, true).await;
}

#[tokio::test]
async fn a_drain_without_its_record_sees_a_rollback_from_the_objects_it_finds_stored() {
    rolled_back(true, false).await;
}

/// The journal's bucket through a client whose reads of the journal's objects fail (S3 down
/// part-way): a restore stops after it fenced and wiped the board, before any run landed.
struct ObjectsUnreadable(S3Objects);

impl journal::Objects for ObjectsUnreadable {
    async fn put_new(&self, key: &str, body: Vec<u8>) -> Result<journal::Put, journal::ObjectError> {
        self.0.put_new(key, body).await
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, journal::ObjectError> {
        if key.contains("/_marks/") { self.0.get(key).await } else { Err(journal::ObjectError("S3 is down".into())) }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, journal::ObjectError> {
        self.0.list(prefix).await
    }
}

/// The journal's bucket through a client that cannot read the drain's record (S3 down for it).
struct RecordUnreadable(S3Objects);

impl journal::Objects for RecordUnreadable {
    async fn put_new(&self, key: &str, body: Vec<u8>) -> Result<journal::Put, journal::ObjectError> {
        self.0.put_new(key, body).await
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, journal::ObjectError> {
        if key.contains("/_marks/") { Err(journal::ObjectError("S3 is down".into())) } else { self.0.get(key).await }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, journal::ObjectError> {
        if prefix.contains("/_marks/") { Err(journal::ObjectError("S3 is down".into())) } else { self.0.list(prefix).await }
    }
}

/// A board the window test writes: the shipped `points` (events), or a score board summing
/// scores over two shards (each shard its own journal).
#[derive(Clone, Copy)]
enum Window {
    Points,
    ShardedSum,
}

impl Window {
    fn config(self) -> Config {
        match self {
            Window::Points => Config::default_boards(),
            Window::ShardedSum => Config::parse(
                "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"sum\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nshards = 2\n",
            )
            .unwrap(),
        }
    }

    fn board(self) -> &'static str {
        match self {
            Window::Points => "points",
            Window::ShardedSum => "game",
        }
    }

    /// A write of `user` by id; its reply.
    async fn write(self, app: &TestApp, id: &str, user: &str) -> (StatusCode, serde_json::Value) {
        match self {
            Window::Points => learn(app, id, user).await,
            Window::ShardedSum => {
                app.set_now(Utc::now());
                app.post("/v1/boards/game/scores", &json!({"event_id": id, "user_id": user, "score": 10})).await
            }
        }
    }

    async fn score(self, app: &TestApp, user: &str) -> Option<i64> {
        match self {
            Window::Points => points(app, user).await.1,
            Window::ShardedSum => app.get(&format!("/v1/boards/game/users/{user}?period=all")).await.1["score"].as_i64(),
        }
    }
}

/// Writes the older store takes between the rollback and its fence (the drain's next run) were
/// decided against the snapshot: the restore rebuilds the board from S3 and decides each again
/// after the journal's writes (issue 57). A new write counts once; a client's retry of a write
/// acknowledged after the snapshot (no marker on the snapshot, so applied there again) is a
/// duplicate of the journal's; retries of both answer duplicate; the journal holds each once, so
/// a later loss of everything restores the same board.
/// `then`: what comes between the fence and the restore that completes.
async fn writes_in_the_window(window: Window, then: Then) {
    let mut server = RedisServer::start(&["--appendonly", "no", "--save", ""]).await;
    let app = spawn_journaled_at(window.config(), &RedisSettings::standalone(&server.url())).await;
    assert_eq!(window.write(&app, "before-0", "ann").await.0, StatusCode::OK);
    let (client, bucket) = drain_to_new_bucket(&app, 3).await;
    let drain = || async { app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).drain(far()).await };
    let () = redis::cmd("SAVE").query_async(&mut app.redis.clone()).await.unwrap();
    for (i, user) in ["ann", "bob"].iter().enumerate() {
        assert_eq!(window.write(&app, &format!("after-{i}"), user).await.0, StatusCode::OK);
    }
    assert!(drain().await.boards.iter().all(|b| b.error.is_none()));
    let (ann, bob) = (window.score(&app, "ann").await.unwrap(), window.score(&app, "bob").await.unwrap());

    server.restart().await;
    eventually("the store reaches Redis again", std::time::Duration::from_secs(30), || async {
        let mut conn = app.store.connection().await.ok()?;
        redis::cmd("PING").query_async::<String>(&mut conn).await.ok()
    })
    .await;
    // Before the drain's next run, the older store takes writes.
    let (status, new) = window.write(&app, "window-0", "ann").await;
    assert_eq!((status, new["duplicate"].as_bool()), (StatusCode::OK, Some(false)), "{new}");
    let (status, retried) = window.write(&app, "after-1", "bob").await;
    assert_eq!((status, retried["duplicate"].as_bool()), (StatusCode::OK, Some(false)), "the snapshot has no marker of it: {retried}");
    let report = drain().await;
    assert!(report.boards.iter().any(|b| b.board.starts_with(window.board()) && b.lost), "{:?}", report.boards);

    match then {
        Then::Restore => {}
        Then::FailedRestore => {
            let objects = ObjectsUnreadable(S3Objects::new(client.clone(), &bucket));
            let failing = journal::Restorer::new(app.config.clone(), app.keys.clone(), app.store.clone(), objects);
            assert!(failing.restore(None, far()).await.is_err(), "S3 is down");
        }
        Then::GuardLostMidWindow => {
            // A restore killed after deciding the window's last write but before it forgets the
            // window (its record left, the fence lifted): a live write taken, then the guard lost.
            let keys = app.keys.board(window.board());
            let mut conn = app.store.connection().await.unwrap();
            let through = standings::redis::journal::newest_id(&mut conn, &keys).await.unwrap().expect("the window's writes");
            let marks =
                standings::services::journal::Marks::load(&S3Objects::new(client.clone(), &bucket), app.keys.prefix()).await.unwrap();
            let after = marks.get(window.board()).expect("the drain's record").to_owned();
            let restorer = app.journal_jobs(&client, &bucket, Arc::default()).restorer;
            assert_eq!(restorer.restore(None, far()).await.unwrap().status, Status::Complete);
            let () = redis::cmd("SET").arg(keys.restore_redecide()).arg(format!("{after}|{through}")).query_async(&mut conn).await.unwrap();
            let (status, live) = window.write(&app, "live-0", "cy").await;
            assert_eq!((status, live["duplicate"].as_bool()), (StatusCode::OK, Some(false)), "{live}");
            let () = redis::cmd("DEL").arg(keys.guard()).query_async(&mut conn).await.unwrap();
        }
        Then::GuardLostRecordUnread => {
            // Only the drain's record says the board was rolled back now, and a drain that
            // cannot read it leaves the window's writes in the stream, the board counted lost.
            let keys = app.keys.board(window.board());
            let mut conn = app.store.connection().await.unwrap();
            let () = redis::cmd("DEL").arg(keys.guard()).query_async(&mut conn).await.unwrap();
            let held: u64 = redis::cmd("XLEN").arg(keys.journal()).query_async(&mut conn).await.unwrap();
            let report = app.drainer(RecordUnreadable(S3Objects::new(client.clone(), &bucket)), Arc::default()).drain(far()).await;
            let board = report.boards.iter().find(|b| b.board == window.board()).expect("the board drained");
            assert!(board.lost && board.error.is_some() && board.entries == 0, "{board:?}");
            let still: u64 = redis::cmd("XLEN").arg(keys.journal()).query_async(&mut conn).await.unwrap();
            assert_eq!(still, held, "the window's writes stay in the stream");
        }
        Then::EveryKeyLost => {
            // The drain's run stores what it can and the store is lost whole: the window's
            // writes, acknowledged, were only in the stream the loss took.
            assert!(drain().await.boards.iter().any(|b| b.board.starts_with(window.board()) && b.lost));
            let () = redis::cmd("FLUSHALL").query_async(&mut app.redis.clone()).await.unwrap();
        }
    }
    let restorer = app.journal_jobs(&client, &bucket, Arc::default()).restorer;
    let report = restorer.restore(None, far()).await.unwrap();
    assert_eq!(report.status, Status::Complete, "{report:?}");
    assert_eq!(window.score(&app, "ann").await, Some(ann + 10), "the new write counts once");
    assert_eq!(window.score(&app, "bob").await, Some(bob), "the retry counts once");
    if matches!(then, Then::GuardLostMidWindow) {
        assert_eq!(window.score(&app, "cy").await, Some(10), "the live write taken while the window was decided, once");
    }
    for (id, user) in [("window-0", "ann"), ("after-1", "bob")] {
        let (status, again) = window.write(&app, id, user).await;
        assert_eq!((status, again["duplicate"].as_bool()), (StatusCode::OK, Some(true)), "{id}: {again}");
    }
    let report = drain().await;
    assert!(report.boards.iter().all(|b| !b.lost && b.error.is_none()), "drained as any board now: {:?}", report.boards);
    let whole = state(&app).await;

    // The journal holds each write once, as decided again: every key lost, one restore brings
    // the same board back.
    let () = redis::cmd("FLUSHALL").query_async(&mut app.redis.clone()).await.unwrap();
    let report = restorer.restore(None, far()).await.unwrap();
    assert_eq!(report.status, Status::Complete, "{report:?}");
    assert_eq!(state(&app).await, whole, "restored from the journal alone");
}

/// What comes between a rollback's fence and the restore that completes.
#[derive(Clone, Copy)]
enum Then {
    Restore,
    /// A first restore fails once it has rebuilt nothing yet (its journal's objects
    /// unreadable), and the next one starts over.
    FailedRestore,
    /// Every key lost, the journal's stream with them (a `FLUSHALL` after a drain's run).
    EveryKeyLost,
    /// The guard lost, then a drain's run that cannot read its record (found by the simulation:
    /// the run stored the window's writes as the journal's, and the restore then rebuilt the
    /// board without the writes drained between the snapshot and the rollback).
    GuardLostRecordUnread,
    /// The board rebuilt and its window decided (the fence lifted), a live write taken, then its
    /// guard lost (found by review: the window kept its first end, and the rebuild's wipe took
    /// the live write's effects, never applied again). The decisions and the live write are then
    /// history, applied as recorded.
    GuardLostMidWindow,
}

#[tokio::test]
async fn writes_between_a_rollback_and_its_fence_count_once() {
    writes_in_the_window(Window::Points, Then::Restore).await;
}

/// Found by the simulation (a rollback, then every key lost, then a restore): the drain stored
/// nothing of a board found rolled back, so the window's writes lived only in the stream, and
/// a loss of every key lost them, acknowledged.
#[tokio::test]
async fn writes_between_a_rollback_and_its_fence_survive_a_loss_of_every_key() {
    writes_in_the_window(Window::Points, Then::EveryKeyLost).await;
}

#[tokio::test]
async fn a_guard_lost_while_the_window_is_decided_keeps_the_live_writes_after_it() {
    writes_in_the_window(Window::Points, Then::GuardLostMidWindow).await;
}

#[tokio::test]
async fn writes_between_a_rollback_and_its_fence_survive_a_loss_of_every_key_on_a_sharded_board() {
    writes_in_the_window(Window::ShardedSum, Then::EveryKeyLost).await;
}

/// Found by the simulation under CI's load (a restore whose lease lapsed before its first run):
/// the window to decide again was kept in the guard, which the next attempt's start-over deleted
/// with every key the first had claimed, and the window was applied as the snapshot decided it.
#[tokio::test]
async fn writes_between_a_rollback_and_its_fence_count_once_after_a_restore_that_failed_first() {
    writes_in_the_window(Window::Points, Then::FailedRestore).await;
}

#[tokio::test]
async fn a_drain_that_cannot_read_its_record_leaves_a_rolled_back_board_whose_guard_was_lost() {
    writes_in_the_window(Window::Points, Then::GuardLostRecordUnread).await;
}

#[tokio::test]
async fn writes_between_a_rollback_and_its_fence_count_once_on_a_sharded_board() {
    writes_in_the_window(Window::ShardedSum, Then::Restore).await;
}

/// The keys of one board (`{board}`, its hash tag) as `state` reads them.
async fn board_state(app: &TestApp, board: &str) -> Vec<(String, Vec<u8>, i64)> {
    let tag = format!("{{{board}}}");
    state(app).await.into_iter().filter(|(key, ..)| key.contains(&tag)).collect()
}

/// One primary of a cluster started again on an older copy of its files while the others are
/// current (a node's own crash and restart from its last RDB, or one shard's backup restored):
/// the board it serves is fenced by the next drain and restored as it stood, while a board on
/// another node never stops taking writes and is not touched.
#[tokio::test]
async fn a_cluster_node_restarted_from_an_older_snapshot_fences_and_restores_its_boards_only() {
    // No replicas: a replica would be failed over to, or resync the restarted node.
    let mut cluster = RedisCluster::start_with(3, 0, &["--appendonly", "yes", "--appendfsync", "always"]).await;
    let app = spawn_journaled_at(Config::default_boards(), &cluster.settings()).await;
    let lesson = |id: String, user: &'static str| {
        app.set_now(Utc::now());
        app.event(json!({"event_id": id, "user_id": user, "action": "lesson"}))
    };
    for i in 0..2 {
        assert_eq!(learn(&app, &format!("before-{i}"), "ann").await.0, StatusCode::OK);
        assert_eq!(lesson(format!("lesson-before-{i}"), "ann").await.0, StatusCode::OK);
    }
    let (client, bucket) = drain_to_new_bucket(&app, 3).await;
    let drain = || async { app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).drain(far()).await };
    let slot = |board: &str| {
        let query = redis::cmd("CLUSTER").arg("KEYSLOT").arg(format!("{{{board}}}")).clone();
        let node = &cluster.nodes[0];
        async move { node.query::<u16>(&query).await.unwrap() }
    };
    let (points_slot, xp_slot) = (slot("points").await, slot("xp").await);
    let node = cluster.primary_of(points_slot).await.expect("a primary serves the slot");
    assert_ne!(cluster.primary_of(xp_slot).await, Some(node), "xp is served by another primary than points");

    // The snapshot's stream holds a write not drained yet.
    assert_eq!(learn(&app, "pending", "dan").await.0, StatusCode::OK);
    cluster.node(node).snapshot();
    let at_snapshot = points(&app, "ann").await;
    for (i, user) in ["ann", "bob", "ann"].into_iter().enumerate() {
        assert_eq!(learn(&app, &format!("after-{i}"), user).await.0, StatusCode::OK);
        assert_eq!(lesson(format!("lesson-after-{i}"), user).await.0, StatusCode::OK);
    }
    assert!(drain().await.boards.iter().all(|b| b.error.is_none()));
    assert_eq!(learn(&app, "last", "bob").await.0, StatusCode::OK);
    assert!(drain().await.boards.iter().all(|b| b.error.is_none()));
    let (points_before, xp_before) = (board_state(&app, "points").await, board_state(&app, "xp").await);
    let ann = points(&app, "ann").await;
    assert_ne!(ann, at_snapshot);

    cluster.node(node).roll_back().await;
    cluster.wait_until_healthy().await;
    eventually("the functions reach the restarted node", std::time::Duration::from_secs(30), || async {
        let (status, _) = points(&app, "ann").await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
    assert_eq!(board_state(&app, "xp").await, xp_before, "the other primaries' keys are as they were");
    assert_ne!(board_state(&app, "points").await, points_before, "the restarted node holds the snapshot");

    let report = drain().await;
    let lost: Vec<&str> = report.boards.iter().filter(|b| b.lost).map(|b| b.board.as_str()).collect();
    assert_eq!(lost, vec!["points"], "only the board of the restarted node: {:?}", report.boards);
    let (status, body) = learn(&app, "fenced", "dan").await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{body}");
    let (status, body) = lesson("other-node".into(), "dan").await;
    assert_eq!((status, body["duplicate"].as_bool()), (StatusCode::OK, Some(false)), "another node's board takes writes: {body}");
    let xp_now = board_state(&app, "xp").await;

    let restorer = app.journal_jobs(&client, &bucket, Arc::default()).restorer;
    let report = restorer.restore(None, far()).await.unwrap();
    assert_eq!(report.status, Status::Complete, "{report:?}");
    assert_eq!(board_state(&app, "points").await, points_before, "the board as it stood before the rollback");
    assert_eq!(board_state(&app, "xp").await, xp_now, "the other board untouched by the restore");
    assert_eq!(points(&app, "ann").await, ann);
    let (status, again) = learn(&app, "after-2", "ann").await;
    assert_eq!((status, again["duplicate"].as_bool()), (StatusCode::OK, Some(true)), "a write after the snapshot is known: {again}");
    let report = drain().await;
    assert!(report.boards.iter().all(|b| !b.lost && b.error.is_none()), "nothing older than the journal now: {:?}", report.boards);
}
