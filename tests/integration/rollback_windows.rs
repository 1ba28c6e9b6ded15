//! A rollback's window (docs/journal.md#rollbacks) after the restore that dealt with it, when
//! the board's guard is lost again before a drain stored what came since.

use std::sync::Arc;

use axum::http::StatusCode;
use journal::{S3Objects, Status};
use serde_json::json;
use standings::domain::config::{Config, DEFAULT_CONFIG};
use standings::redis::settings::RedisSettings;
use standings_tests::TestApp;
use standings_tests::journal::{drain_to_new_bucket, spawn_journaled_at};
use standings_tests::servers::{RedisServer, eventually};

use super::rollback::{far, learn, points};

/// A board rolled back with nothing in its window (no write between the rollback and its
/// fence), restored onto its keys; then a live write, and the guard lost before a drain: the
/// next restore applies the live write as recorded, under whatever rules are configured by
/// then. Before, it was kept as the window (none was kept when it was empty) and decided again:
/// under rules that now give a learning 20 points, it counted 20 (found by review).
#[tokio::test]
async fn live_writes_after_an_empty_windows_restore_stay_as_recorded_when_the_guard_is_lost() {
    let (_server, app, client, bucket) = restarted_from_a_snapshot().await;
    let drain = || async { app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).drain(far()).await };
    let report = drain().await;
    assert!(report.boards.iter().any(|b| b.board == "points" && b.lost), "{:?}", report.boards);
    let restorer = app.journal_jobs(&client, &bucket, Arc::default()).restorer;
    assert_eq!(restorer.restore(None, far()).await.unwrap().status, Status::Complete);
    assert_eq!(points(&app, "ann").await, (StatusCode::OK, Some(20)));

    let (status, live) = learn(&app, "live-0", "cy").await;
    assert_eq!((status, live["duplicate"].as_bool()), (StatusCode::OK, Some(false)), "{live}");
    let guard = app.keys.board("points").guard();
    let () = redis::cmd("DEL").arg(guard).query_async(&mut app.redis.clone()).await.unwrap();

    let doubled = DEFAULT_CONFIG.replace(r#"action = "learning", points = 10"#, r#"action = "learning", points = 20"#);
    assert_ne!(doubled, DEFAULT_CONFIG);
    let objects = S3Objects::new(client.clone(), &bucket);
    let later = journal::Restorer::new(Arc::new(Config::parse(&doubled).unwrap()), app.keys.clone(), app.store.clone(), objects);
    assert_eq!(later.restore(None, far()).await.unwrap().status, Status::Complete);
    assert_eq!(points(&app, "cy").await, (StatusCode::OK, Some(10)), "as the live write was decided");
    assert_eq!(points(&app, "ann").await, (StatusCode::OK, Some(20)));
}

/// A window decided whole by a restore, then the guard lost, then a drain, then every key lost:
/// the drain took the stream for writes still to decide (the guard gone, its record of the
/// rollback kept) and stored nothing, so the decisions were in no object, and the next restore
/// decided the window again under the rules of that day (found by the simulation: nine days on,
/// the writes were refused as too old and the points were gone). The drain now stores such a
/// stream as history and forgets the rollback: the decisions are restored as they were made.
#[tokio::test]
async fn a_windows_decisions_survive_a_lost_guard_then_a_loss_of_every_key() {
    let (_server, app, client, bucket) = restarted_from_a_snapshot().await;
    let drain = || async { app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).drain(far()).await };
    window_decided_then_guard_lost(&app, &client, &bucket).await;
    let report = drain().await;
    assert!(report.boards.iter().any(|b| b.board == "points" && b.lost && b.error.is_none()), "{:?}", report.boards);
    let () = redis::cmd("FLUSHALL").query_async(&mut app.redis.clone()).await.unwrap();

    let doubled = DEFAULT_CONFIG.replace(r#"action = "learning", points = 10"#, r#"action = "learning", points = 20"#);
    let objects = S3Objects::new(client.clone(), &bucket);
    let later = journal::Restorer::new(Arc::new(Config::parse(&doubled).unwrap()), app.keys.clone(), app.store.clone(), objects);
    assert_eq!(later.restore(None, far()).await.unwrap().status, Status::Complete);
    assert_eq!(points(&app, "bo").await, (StatusCode::OK, Some(10)), "as the window's write was decided");
    assert_eq!(points(&app, "ann").await, (StatusCode::OK, Some(20)));
}

/// The same, but the drain after the guard's loss stops before it stores anything (its deadline
/// passed): its record keeps the rollback, so the restore after a loss of every key still
/// finds the window and decides it. Forgotten there (a review's find), the rebuild read only the
/// objects and the window's write was gone.
#[tokio::test]
async fn a_drain_that_stores_nothing_keeps_the_rollback_of_a_window_decided_whole() {
    let (_server, app, client, bucket) = restarted_from_a_snapshot().await;
    let drain = async |deadline| app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).drain(deadline).await;
    window_decided_then_guard_lost(&app, &client, &bucket).await;
    let stopped = drain(chrono::Utc::now() - chrono::Duration::seconds(1)).await;
    assert!(stopped.boards.iter().any(|b| b.board == "points" && b.lost && b.entries == 0), "{:?}", stopped.boards);
    let () = redis::cmd("FLUSHALL").query_async(&mut app.redis.clone()).await.unwrap();
    let restorer = app.journal_jobs(&client, &bucket, Arc::default()).restorer;
    assert_eq!(restorer.restore(None, far()).await.unwrap().status, Status::Complete);
    assert_eq!(points(&app, "bo").await, (StatusCode::OK, Some(10)), "the window's write");
    assert_eq!(points(&app, "ann").await, (StatusCode::OK, Some(20)));
}

/// A drain stores the window's decisions and trims them, but its record is not written (the
/// run killed before): the next run finds the stream empty and the journal holding entries after
/// the window, takes them for its decisions, and its record forgets the rollback. Kept, a later
/// loss of every key decided the window again on top of them (a review's find).
#[tokio::test]
async fn a_record_lost_after_a_window_decisions_drain_is_mended_by_the_next_run() {
    let (_server, app, client, bucket) = restarted_from_a_snapshot().await;
    let drain = async || app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).drain(far()).await;
    window_decided_then_guard_lost(&app, &client, &bucket).await;
    let record = format!("journal/_marks/prefix={}/drained.json", app.keys.prefix());
    let rolled_back = async || {
        let body = client.get_object().bucket(&bucket).key(&record).send().await.unwrap().body.collect().await.unwrap().into_bytes();
        serde_json::from_slice::<serde_json::Value>(&body).unwrap()["rolled_back"].get("points").is_some()
    };
    assert!(rolled_back().await, "recorded by the fencing run");
    let before = client.get_object().bucket(&bucket).key(&record).send().await.unwrap().body.collect().await.unwrap().into_bytes();
    assert!(drain().await.boards.iter().any(|b| b.board == "points" && b.entries > 0), "the decisions stored");
    assert!(!rolled_back().await, "forgotten once they are stored");
    client.put_object().bucket(&bucket).key(&record).body(before.into()).send().await.unwrap();
    assert!(rolled_back().await, "the record as if that run's write were lost");
    assert!(drain().await.boards.iter().any(|b| b.board == "points" && b.lost && b.error.is_none()));
    assert!(!rolled_back().await, "the next run forgets it: the journal holds the decisions");
}

/// A learning before a snapshot and one after it, drained; then Redis restarted from the
/// snapshot (the server returned: dropped, it stops).
async fn restarted_from_a_snapshot() -> (RedisServer, TestApp, aws_sdk_s3::Client, String) {
    let mut server = RedisServer::start(&["--appendonly", "no", "--save", ""]).await;
    let app = spawn_journaled_at(Config::default_boards(), &RedisSettings::standalone(&server.url())).await;
    assert_eq!(learn(&app, "before-0", "ann").await.0, StatusCode::OK);
    let (client, bucket) = drain_to_new_bucket(&app, 3).await;
    let () = redis::cmd("SAVE").query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(learn(&app, "after-0", "ann").await.0, StatusCode::OK);
    let drained = app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).drain(far()).await;
    assert!(drained.boards.iter().all(|b| b.error.is_none()));
    server.restart().await;
    eventually("the store reaches Redis again", std::time::Duration::from_secs(30), || async {
        let mut conn = app.store.connection().await.ok()?;
        redis::cmd("PING").query_async::<String>(&mut conn).await.ok()
    })
    .await;
    (server, app, client, bucket)
}

/// A write on the restarted store before its fence (the window), fenced by a drain, decided
/// whole by a restore; then the board's guard lost.
async fn window_decided_then_guard_lost(app: &TestApp, client: &aws_sdk_s3::Client, bucket: &str) {
    assert_eq!(learn(app, "window-0", "bo").await.0, StatusCode::OK, "the older store, before its fence");
    let report = app.drainer(S3Objects::new(client.clone(), bucket), Arc::default()).drain(far()).await;
    assert!(report.boards.iter().any(|b| b.board == "points" && b.lost), "{:?}", report.boards);
    let restorer = app.journal_jobs(client, bucket, Arc::default()).restorer;
    assert_eq!(restorer.restore(None, far()).await.unwrap().status, Status::Complete);
    assert_eq!(points(app, "bo").await, (StatusCode::OK, Some(10)));
    let () = redis::cmd("DEL").arg(app.keys.board("points").guard()).query_async(&mut app.redis.clone()).await.unwrap();
}

/// A store rolled back to a copy taken while a rollback's window waited to be decided (its
/// guard holding that rollback's point, its stream the window's writes, undecided), after a
/// restore had decided them and a drain had stored the decisions. Restored onto that copy's keys
/// from the point, the board kept what the window decided on the older copy, a retry of a write
/// counted on top of the write (the learner's statement: three learnings for two); rebuilt from
/// S3, the window left in the stream was stored as history by the next drain, and the next
/// rebuild counted it again. The copy is rebuilt from S3 and the stream's window, below the
/// drain's record, dropped (found by the simulation's statement check).
#[tokio::test]
async fn a_copy_of_the_store_holding_a_window_decided_since_is_rebuilt_and_its_window_never_stored() {
    older_copy(Before::Nothing).await;
}

/// The same, its guard (and the point in it) lost after the drain saw the copy and before the
/// restore: the drain's record keeps the point, and the copy's window leaves its stream all the
/// same (a review's find: rebuilt with it left there, a drain stored it as history).
#[tokio::test]
async fn an_older_copy_whose_guard_was_lost_before_its_restore_never_has_its_window_stored() {
    older_copy(Before::GuardLost).await;
}

/// What happens to the older copy before the restore that completes.
#[derive(PartialEq)]
enum Before {
    Nothing,
    /// A restore stopped by S3 where it has taken the window out of the stream.
    Stopped,
    GuardLost,
}

/// The same, the first restore of the older copy stopped where it has taken the window out of
/// the stream and not yet wiped the board (S3 failing it): the next one rebuilds the board too,
/// never restores it onto the copy's keys (a review's find).
#[tokio::test]
async fn an_older_copys_restore_stopped_before_its_rebuild_rebuilds_it_next_time() {
    older_copy(Before::Stopped).await;
}

/// The journal's bucket through a client that cannot reach the rollbacks' windows.
#[derive(Clone)]
struct WindowsUnreachable(S3Objects);

impl journal::Objects for WindowsUnreachable {
    async fn put_new(&self, key: &str, body: Vec<u8>) -> Result<journal::Put, journal::ObjectError> {
        if key.contains("/_windows/") { Err(journal::ObjectError("S3 is down".into())) } else { self.0.put_new(key, body).await }
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, journal::ObjectError> {
        if key.contains("/_windows/") { Err(journal::ObjectError("S3 is down".into())) } else { self.0.get(key).await }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, journal::ObjectError> {
        if prefix.contains("/_windows/") { Err(journal::ObjectError("S3 is down".into())) } else { self.0.list(prefix).await }
    }
}

async fn older_copy(before: Before) {
    let mut server = RedisServer::start(&["--appendonly", "yes", "--save", ""]).await;
    let app = spawn_journaled_at(Config::default_boards(), &RedisSettings::standalone(&server.url())).await;
    assert_eq!(learn(&app, "before-0", "ann").await.0, StatusCode::OK);
    let (client, bucket) = drain_to_new_bucket(&app, 3).await;
    let drain = || async { app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).drain(far()).await };
    let restore = || async { app.journal_jobs(&client, &bucket, Arc::default()).restorer.restore(None, far()).await.unwrap().status };
    let back = async |server: &mut RedisServer| {
        server.roll_back().await;
        eventually("the store reaches Redis again", std::time::Duration::from_secs(30), || async {
            let mut conn = app.store.connection().await.ok()?;
            redis::cmd("PING").query_async::<String>(&mut conn).await.ok()
        })
        .await;
    };
    server.snapshot();
    assert_eq!(learn(&app, "after-0", "ann").await.0, StatusCode::OK);
    assert!(drain().await.boards.iter().all(|b| b.error.is_none()));
    back(&mut server).await;
    // The older store, before its fence: the retry of a write it lost (applied again there) and
    // a new one. The drain fences it; a copy of the store taken then holds both, undecided.
    assert_eq!(learn(&app, "after-0", "ann").await.0, StatusCode::OK);
    assert_eq!(learn(&app, "window-0", "bo").await.0, StatusCode::OK);
    assert!(drain().await.boards.iter().any(|b| b.board == "points" && b.lost));
    server.snapshot();
    assert_eq!(restore().await, Status::Complete);
    assert!(drain().await.boards.iter().all(|b| b.error.is_none()), "the window's decisions stored");

    back(&mut server).await;
    assert!(drain().await.boards.iter().any(|b| b.board == "points" && b.lost));
    if before == Before::GuardLost {
        let () = redis::cmd("DEL").arg(app.keys.board("points").guard()).query_async(&mut app.redis.clone()).await.unwrap();
    }
    if before == Before::Stopped {
        let failing = app.journal_jobs_over(WindowsUnreachable(S3Objects::new(client.clone(), &bucket)), Arc::default());
        assert!(failing.restorer.restore(None, far()).await.is_err(), "S3 fails the restore");
    }
    assert_eq!(restore().await, Status::Complete);
    explained(&app).await;
    assert!(drain().await.boards.iter().all(|b| b.error.is_none()));
    let lines = standings_tests::journal::lines(&client, &bucket, &app).await;
    let writes = |event: &str| {
        let ids: std::collections::BTreeSet<&str> =
            lines.iter().filter(|l| l["event_id"] == event).filter_map(|l| l["id"].as_str()).collect();
        ids.len()
    };
    assert_eq!((writes("after-0"), writes("window-0")), (1, 1), "each write once in the journal's history");

    let () = redis::cmd("FLUSHALL").query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(restore().await, Status::Complete);
    explained(&app).await;
}

/// Ann's two learnings and Bo's one, each once in their scores and statements.
async fn explained(app: &TestApp) {
    assert_eq!((points(app, "ann").await, points(app, "bo").await), ((StatusCode::OK, Some(20)), (StatusCode::OK, Some(10))));
    let (status, statement) = app.get("/v1/boards/points/users/ann/statement?period=season").await;
    assert_eq!(
        (status, &statement["lines"][0]["events"], &statement["unexplained"]),
        (StatusCode::OK, &json!(2), &json!(null)),
        "{statement}"
    );
}
