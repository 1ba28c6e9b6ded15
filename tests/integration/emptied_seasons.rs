//! A season emptied on purpose (a correction down to zero, a ban of its last member) is archived
//! as the empty season it is; one whose board vanished (flush, eviction, expiry) is still
//! refused as lost. Through the archive job, on the real redis-server and moto_server.

use axum::http::Method;
use chrono::{DateTime, Utc};
use serde_json::json;
use standings::archive::job::Status;
use standings::archive::table::Shard;
use standings_tests::{ADMIN, ArchiveHarness, TestApp, at};

const SEASON: &str = "2026-10";

fn far() -> DateTime<Utc> {
    at("2100-01-01T00:00:00Z")
}

/// `ann` earns 10 points in October, then `empty` takes them away; the job runs after the grace.
async fn emptied_by(empty: impl AsyncFnOnce(&TestApp)) -> (ArchiveHarness, Result<(Status, u64), String>) {
    let harness = ArchiveHarness::new().await;
    let ingest = harness.app().await;
    ingest.set_now(at("2026-10-20T12:00:00+08:00"));
    let (status, body) = ingest.event(json!({"event_id": "e1", "user_id": "ann", "action": "learning"})).await;
    assert_eq!(status, 200, "{body}");
    empty(&ingest).await;
    let live_key = harness.keys.board("points").period(&ArchiveHarness::season(SEASON));
    let exists: bool = redis::cmd("EXISTS").arg(&live_key).query_async(&mut harness.redis.clone()).await.unwrap();
    assert!(!exists, "the season's board is empty, so Redis deleted it");
    let result = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, far()).await;
    let result = result.map(|report| (report.status, report.total)).map_err(|error| error.code().to_owned());
    (harness, result)
}

async fn admin(app: &TestApp, method: Method, path: &str, body: serde_json::Value) {
    let (status, reply) = app.call(method, path, body.to_string(), ADMIN).await;
    assert_eq!(status, 200, "{path}: {reply}");
}

#[tokio::test]
async fn a_season_corrected_down_to_zero_is_archived_empty() {
    let (harness, result) = emptied_by(async |app| {
        let body = json!({"correction_id": "c1", "delta": -10, "reason": "fraud"});
        admin(app, Method::POST, "/v1/admin/boards/points/users/ann/corrections", body).await;
    })
    .await;
    assert_eq!(result, Ok((Status::Complete, 0)));
    assert!(harness.archived(SEASON).await.is_empty());
    let again = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap();
    assert_eq!(again.status, Status::AlreadyComplete);
}

#[tokio::test]
async fn a_season_whose_last_member_was_banned_is_archived_empty() {
    let (harness, result) = emptied_by(async |app| admin(app, Method::POST, "/v1/admin/users/ann/ban", json!({})).await).await;
    assert_eq!(result, Ok((Status::Complete, 0)));
    assert!(harness.archived(SEASON).await.is_empty());
}

#[tokio::test]
async fn a_season_whose_only_points_were_taken_back_is_archived_empty() {
    let config = standings::domain::config::Config::parse(
        r#"[[boards]]
name = "points"
kind = "cumulative"
timezone = "Asia/Shanghai"
periods = ["season"]
top = 10
archive = true
rules = [{ action = "praise", points = 2, scope = "user_target_day", reversible = true }]
"#,
    )
    .unwrap();
    let harness = ArchiveHarness::with_config(config).await;
    let ingest = harness.app().await;
    ingest.set_now(at("2026-10-20T12:00:00+08:00"));
    for active in [true, false] {
        let (status, body) = ingest
            .event(json!({"event_id": format!("p-{active}"), "user_id": "ann", "action": "praise", "target": "a1", "active": active}))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let live_key = harness.keys.board("points").period(&ArchiveHarness::season(SEASON));
    let exists: bool = redis::cmd("EXISTS").arg(&live_key).query_async(&mut harness.redis.clone()).await.unwrap();
    assert!(!exists, "the take-back emptied the season's board");
    let report = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap();
    assert_eq!((report.status, report.total), (Status::Complete, 0));
}

#[tokio::test]
async fn a_season_emptied_then_written_again_is_lost_if_it_then_vanishes() {
    let harness = ArchiveHarness::new().await;
    let ingest = harness.app().await;
    ingest.set_now(at("2026-10-20T12:00:00+08:00"));
    ingest.event(json!({"event_id": "e1", "user_id": "ann", "action": "learning"})).await;
    let body = json!({"correction_id": "c1", "delta": -10, "reason": "fraud"});
    admin(&ingest, Method::POST, "/v1/admin/boards/points/users/ann/corrections", body).await;
    let (status, _) = ingest.event(json!({"event_id": "e2", "user_id": "bob", "action": "learning"})).await;
    assert_eq!(status, 200);
    // Bob's points vanish as a flush would take them: that is a loss, not an empty season.
    let live_key = harness.keys.board("points").period(&ArchiveHarness::season(SEASON));
    let _: u64 = redis::cmd("DEL").arg(&live_key).query_async(&mut harness.redis.clone()).await.unwrap();
    let error = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap_err();
    assert_eq!(error.code(), "live_board_lost");
}

/// A flush of the whole database takes the board's guard with it, so Redis alone cannot tell a
/// flushed season from one nobody played: an hourly run that saw the season with members
/// remembers it in the table, and the season is then refused as lost.
#[tokio::test]
async fn a_season_flushed_with_its_guard_is_lost_once_a_run_saw_it_had_members() {
    let harness = ArchiveHarness::new().await;
    let ingest = harness.app().await;
    ingest.set_now(at("2026-10-20T12:00:00+08:00"));
    let (status, body) = ingest.event(json!({"event_id": "e1", "user_id": "ann", "action": "learning"})).await;
    assert_eq!(status, 200, "{body}");
    harness.set_now(at("2026-10-20T13:00:00+08:00"));
    harness.archiver(harness.table.clone()).archive_due(far()).await.unwrap();

    let mut conn = harness.redis.clone();
    for key in ingest.written_keys().await {
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.unwrap();
    }
    assert!(ingest.written_keys().await.is_empty(), "every key of the board is gone, its guard too");
    harness.set_now(at("2026-11-01T01:00:00+08:00"));
    let archiver = harness.archiver(harness.table.clone());
    let error = archiver.archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap_err();
    assert_eq!(error.code(), "live_board_lost");
    let again = archiver.archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap_err();
    assert_eq!(again.code(), "live_board_lost", "a re-run refuses it again");
    assert!(harness.table.completed("points", SEASON).await.unwrap().is_none());
}

/// The same flush of a season no run saw with members (it was never played, as far as anything
/// outside Redis knows): archived as the empty season it looks like.
#[tokio::test]
async fn a_season_no_run_saw_with_members_is_archived_empty_after_a_flush() {
    let harness = ArchiveHarness::new().await;
    harness.set_now(at("2026-10-20T13:00:00+08:00"));
    harness.archiver(harness.table.clone()).archive_due(far()).await.unwrap();
    harness.set_now(at("2026-11-01T01:00:00+08:00"));
    let report = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap();
    assert_eq!((report.status, report.total), (Status::Complete, 0));
}

/// A journaled board flushed: the run refuses it as being restored (`board_restoring`) and writes
/// nothing into the lost guard, so the restore sees the loss, brings the season back from the
/// journal, and the next run archives what it had.
#[tokio::test]
async fn a_flushed_journaled_season_waits_for_its_restore_and_is_archived_whole() {
    let mut harness = ArchiveHarness::new().await;
    harness.keys = harness.keys.clone().with_journal(true);
    let ingest = harness.app().await;
    ingest.set_now(at("2026-10-20T12:00:00+08:00"));
    for (id, user) in [("e1", "ann"), ("e2", "bob"), ("e3", "ann")] {
        let (status, body) = ingest.event(json!({"event_id": id, "user_id": user, "action": "learning"})).await;
        assert_eq!(status, 200, "{body}");
    }
    harness.set_now(at("2026-10-20T13:00:00+08:00"));
    harness.archiver(harness.table.clone()).archive_due(far()).await.unwrap();
    let client = standings_tests::journal::s3().await;
    let bucket = standings_tests::journal::new_bucket(&client).await;
    let objects = || journal::S3Objects::new(client.clone(), &bucket);
    let drained = ingest.drainer(objects(), std::sync::Arc::default()).drain(chrono::Utc::now() + chrono::Duration::minutes(5)).await;
    assert!(drained.boards.iter().all(|b| b.error.is_none()), "{drained:?}");

    let mut conn = harness.redis.clone();
    for key in ingest.written_keys().await {
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.unwrap();
    }
    harness.set_now(at("2026-11-01T01:00:00+08:00"));
    let archiver = harness.archiver(harness.table.clone());
    let refused = archiver.archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap_err();
    assert_eq!(refused.code(), "board_restoring");
    assert!(ingest.written_keys().await.is_empty(), "nothing written into the lost board");

    let restorer = journal::Restorer::new(ingest.config.clone(), ingest.keys.clone(), ingest.store.clone(), objects());
    let restored = restorer.restore(Some("points"), chrono::Utc::now() + chrono::Duration::minutes(5)).await.unwrap();
    assert_eq!(restored.status, journal::Status::Complete, "{restored:?}");
    assert!(restored.boards.iter().all(|b| b.refused == 0), "{restored:?}");

    let report = archiver.archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap();
    assert_eq!((report.status, report.total), (Status::Complete, 2));
    let archived: Vec<(String, i64)> = harness.archived(SEASON).await.into_iter().map(|e| (e.user_id, e.points)).collect();
    assert_eq!(archived, [("ann".to_owned(), 20), ("bob".to_owned(), 10)]);
}
