//! A rollback's window (docs/journal.md#rollbacks) after the restore that dealt with it, when
//! the board's guard is lost again before a drain stored what came since.

use std::sync::Arc;

use axum::http::StatusCode;
use journal::{S3Objects, Status};
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
    assert_eq!(learn(&app, "window-0", "bo").await.0, StatusCode::OK, "the older store, before its fence");
    let report = drain().await;
    assert!(report.boards.iter().any(|b| b.board == "points" && b.lost), "{:?}", report.boards);
    let restorer = app.journal_jobs(&client, &bucket, Arc::default()).restorer;
    assert_eq!(restorer.restore(None, far()).await.unwrap().status, Status::Complete);
    assert_eq!(points(&app, "bo").await, (StatusCode::OK, Some(10)));

    let guard = app.keys.board("points").guard();
    let () = redis::cmd("DEL").arg(guard).query_async(&mut app.redis.clone()).await.unwrap();
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
