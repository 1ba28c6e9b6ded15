//! Season archives, from the real redis-server to the real moto_server through the real AWS
//! SDK. The only stand-ins are small wrappers around the real table's BatchWriteItem that crash,
//! leave items unprocessed or count calls.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_dynamodb::types::{AttributeValue, WriteRequest};
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use standings::Clock;
use standings::archive::freeze::Standing;
use standings::archive::job::{ArchiveError, Status};
use standings::archive::table::{ArchiveSink, SeasonTable, Shard, TableError, entry_item, put_request};
use standings_tests::{ArchiveHarness, at, season_members};

pub(crate) const SEASON: &str = "2026-10";

/// A deadline no test reaches.
pub(crate) fn far() -> DateTime<Utc> {
    at("2100-01-01T00:00:00Z")
}

/// Fails every BatchWriteItem after the first `allowed`: the function dying mid-run.
struct CrashAfter {
    inner: SeasonTable,
    allowed: usize,
    calls: AtomicUsize,
}

impl ArchiveSink for CrashAfter {
    async fn batch_write(&self, requests: Vec<WriteRequest>) -> Result<Vec<WriteRequest>, TableError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) >= self.allowed {
            return Err(TableError::Request("injected crash".into()));
        }
        self.inner.batch_write(requests).await
    }
}

/// Writes two thirds of each batch and hands the rest back as unprocessed, as a throttled
/// table does.
struct LeavesAThird {
    inner: SeasonTable,
    calls: AtomicUsize,
}

impl ArchiveSink for LeavesAThird {
    async fn batch_write(&self, mut requests: Vec<WriteRequest>) -> Result<Vec<WriteRequest>, TableError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let left = requests.split_off(requests.len() - requests.len() / 3);
        let mut unprocessed = self.inner.batch_write(requests).await?;
        unprocessed.extend(left);
        Ok(unprocessed)
    }
}

/// Counts BatchWriteItem calls.
#[derive(Clone)]
struct Counting {
    inner: SeasonTable,
    calls: Arc<AtomicUsize>,
}

impl ArchiveSink for Counting {
    async fn batch_write(&self, requests: Vec<WriteRequest>) -> Result<Vec<WriteRequest>, TableError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.batch_write(requests).await
    }
}

/// A clock that reads `start` for its first `reads` readings, then an hour later: a deadline
/// within that hour passes part way through a run, without sleeping.
pub(crate) fn clock_jumping_after(reads: usize, start: DateTime<Utc>) -> Clock {
    let count = AtomicUsize::new(0);
    Arc::new(move || if count.fetch_add(1, Ordering::SeqCst) < reads { start } else { start + Duration::hours(1) })
}

/// Seeds `n` members into SEASON and answers the live board in rank order (the oracle).
pub(crate) async fn seeded(harness: &ArchiveHarness, n: u64) -> Vec<standings_tests::Member> {
    let season = ArchiveHarness::season(SEASON);
    harness.seed(SEASON, &season_members(n, &season)).await;
    let live = harness.board_in_rank_order(&harness.keys.board("points").period(&season)).await;
    assert_eq!(live.len() as u64, n);
    live
}

/// The archived season holds exactly `live`, rank for rank.
pub(crate) async fn assert_archived_exactly(harness: &ArchiveHarness, live: &[standings_tests::Member]) {
    let archived = harness.archived(SEASON).await;
    assert_eq!(archived.len(), live.len(), "one item per member");
    for (i, (entry, (user, points, reached_at))) in archived.iter().zip(live).enumerate() {
        let expected = (i as u64 + 1, user.as_str(), *points, *reached_at, live.len() as u64);
        assert_eq!((entry.rank, entry.user_id.as_str(), entry.points, entry.reached_at, entry.total), expected);
    }
    assert_eq!(harness.table.count_entries("points", SEASON).await.unwrap(), live.len() as u64);
}

pub(crate) async fn frozen_exists(harness: &ArchiveHarness) -> bool {
    let key = harness.keys.board("points").frozen(&ArchiveHarness::season(SEASON));
    redis::cmd("EXISTS").arg(key).query_async::<bool>(&mut harness.redis.clone()).await.unwrap()
}

/// Every item of the table, in key order.
pub(crate) async fn table_items(table: &SeasonTable) -> Vec<Vec<(String, AttributeValue)>> {
    let items: Vec<_> =
        table.client().scan().table_name(table.name()).consistent_read(true).into_paginator().items().send().try_collect().await.unwrap();
    let mut items: Vec<Vec<(String, AttributeValue)>> = items
        .into_iter()
        .map(|item| {
            let mut attributes: Vec<_> = item.into_iter().collect();
            attributes.sort_by(|a, b| a.0.cmp(&b.0));
            attributes
        })
        .collect();
    items.sort_by_key(|item| format!("{:?}", &item[..]));
    items
}

#[tokio::test]
async fn a_season_of_25001_members_is_archived_rank_for_rank_and_redis_is_freed() {
    let harness = ArchiveHarness::new().await;
    let live = seeded(&harness, 25_001).await;

    let report = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap();
    assert_eq!((report.status, report.total, report.items_written, report.next_rank), (Status::Complete, 25_001, 25_001, None));

    assert_archived_exactly(&harness, &live).await;
    let users: HashSet<_> = harness.archived(SEASON).await.into_iter().map(|entry| entry.user_id).collect();
    assert_eq!(users.len(), 25_001, "every member once");
    for (rank, (user, points, reached_at)) in (1u64..).zip(&live).step_by(1_009).chain([(25_001, live.last().unwrap())]) {
        let entry = harness.table.user_entry("points", SEASON, user).await.unwrap().expect("an archived member is found by id");
        assert_eq!((entry.rank, entry.points, entry.reached_at), (rank, *points, *reached_at), "{user}");
    }
    assert_eq!(harness.table.user_entry("points", SEASON, "never-scored").await.unwrap(), None);

    let completed = harness.table.completed("points", SEASON).await.unwrap().expect("marked complete");
    assert_eq!(completed.total, 25_001);
    assert!(!frozen_exists(&harness).await, "the frozen board is released once verified");
    let guard: Option<String> = redis::cmd("HGET")
        .arg(harness.keys.board("points").guard())
        .arg("closed|season:2026-10")
        .query_async(&mut harness.redis.clone())
        .await
        .unwrap();
    assert_eq!(guard.as_deref(), Some("25001"), "the season stays closed, remembering its size");
}

#[tokio::test]
async fn a_crash_after_some_batches_then_a_rerun_leaves_the_same_table_as_one_run() {
    let one_shot = ArchiveHarness::new().await;
    let live = seeded(&one_shot, 3_210).await;
    one_shot.archiver(one_shot.table.clone()).archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap();

    let crashed = ArchiveHarness::new().await;
    seeded(&crashed, 3_210).await;
    // The first page is 40 batches; the crash comes part way through the second.
    let crashing = CrashAfter { inner: crashed.table.clone(), allowed: 57, calls: AtomicUsize::new(0) };
    let error = crashed.archiver(crashing).archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap_err();
    assert_eq!(error.code(), "table_unavailable", "{error}");
    assert_eq!(crashed.table.checkpoint("points", SEASON, Shard::WHOLE).await.unwrap(), Some(1_001), "only whole pages count");
    let partial = crashed.table.count_entries("points", SEASON).await.unwrap();
    assert!((1_000..3_210).contains(&partial), "{partial} items before the crash");
    assert_eq!(crashed.table.completed("points", SEASON).await.unwrap(), None);

    let rerun = crashed.archiver(crashed.table.clone()).archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap();
    assert_eq!((rerun.status, rerun.items_written), (Status::Complete, 2_210), "resumes at the page that crashed");
    assert_eq!(crashed.archived(SEASON).await, one_shot.archived(SEASON).await);
    assert_archived_exactly(&crashed, &live).await;
}

#[tokio::test]
async fn items_left_unprocessed_are_retried_with_backoff_and_nothing_is_lost() {
    let harness = ArchiveHarness::new().await;
    let live = seeded(&harness, 2_345).await;
    let sink = LeavesAThird { inner: harness.table.clone(), calls: AtomicUsize::new(0) };
    let archiver = harness.archiver(sink);
    let report = archiver.archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap();
    assert_eq!((report.status, report.items_written), (Status::Complete, 2_345));
    // 93 full batches of 25 take 3 calls each (25 → 8 left → 2 left → done); the last, of 20, too.
    assert_eq!(report.batch_calls, 94 * 3);
    assert_archived_exactly(&harness, &live).await;
}

#[tokio::test]
async fn a_deadline_mid_run_reports_in_progress_and_the_next_invocation_finishes() {
    let harness = ArchiveHarness::new().await;
    let live = seeded(&harness, 3_500).await;
    let start = at("2026-11-01T01:00:00+08:00");
    // The clock passes the deadline after a few pages.
    let archiver = harness.archiver_with_clock(harness.table.clone(), clock_jumping_after(5, start));
    let deadline = start + Duration::minutes(10);

    let first = archiver.archive_season("points", SEASON, Shard::WHOLE, deadline).await.unwrap();
    assert_eq!(first.status, Status::InProgress);
    let next_rank = first.next_rank.expect("an unfinished run says where it stopped");
    let pages_done = (next_rank - 1) / 1_000;
    assert!((1..4).contains(&pages_done), "stopped after {pages_done} of 4 pages");
    assert_eq!(next_rank, pages_done * 1_000 + 1);
    assert_eq!(first.items_written, pages_done * 1_000);
    assert_eq!(harness.table.count_entries("points", SEASON).await.unwrap(), pages_done * 1_000);
    assert!(frozen_exists(&harness).await);

    let second = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap();
    assert_eq!((second.status, second.items_written), (Status::Complete, 3_500 - pages_done * 1_000));
    assert_archived_exactly(&harness, &live).await;
}

#[tokio::test]
async fn two_shards_at_once_leave_no_gap_nor_duplicate_and_a_rerun_writes_nothing() {
    let harness = ArchiveHarness::new().await;
    let live = seeded(&harness, 4_400).await;
    let archiver = harness.archiver(harness.table.clone());
    let (even, odd) = tokio::join!(
        archiver.archive_season("points", SEASON, Shard { index: 0, total: 2 }, far()),
        archiver.archive_season("points", SEASON, Shard { index: 1, total: 2 }, far()),
    );
    let (even, odd) = (even.unwrap(), odd.unwrap());
    // Pages 1, 3, 5 (the last holding 400 members) and 2, 4.
    assert_eq!((even.items_written, odd.items_written), (2_400, 2_000), "each page written once, by its own shard");
    let statuses = [even.status, odd.status];
    assert!(statuses.contains(&Status::Complete), "{statuses:?}");
    assert!(statuses.iter().all(|s| matches!(s, Status::Complete | Status::ShardDone)), "{statuses:?}");
    assert_archived_exactly(&harness, &live).await;
    assert!(!frozen_exists(&harness).await);

    let before = table_items(&harness.table).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counting = harness.archiver(Counting { inner: harness.table.clone(), calls: calls.clone() });
    for shard in [Shard { index: 0, total: 2 }, Shard { index: 1, total: 2 }, Shard::WHOLE] {
        let again = counting.archive_season("points", SEASON, shard, far()).await.unwrap();
        assert_eq!((again.status, again.items_written, again.total), (Status::AlreadyComplete, 0, 4_400));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no BatchWriteItem after completion");
    assert_eq!(table_items(&harness.table).await, before, "nothing at all written after completion");
}

#[tokio::test]
async fn a_season_is_complete_and_served_only_when_every_shard_is_done() {
    let harness = ArchiveHarness::new().await;
    let live = seeded(&harness, 2_500).await;
    let app = harness.app().await;
    let archiver = harness.archiver(harness.table.clone());

    let first = archiver.archive_season("points", SEASON, Shard { index: 1, total: 2 }, far()).await.unwrap();
    assert_eq!((first.status, first.items_written), (Status::ShardDone, 1_000));
    let (status, body) = app.get("/v1/boards/points/seasons/2026-10/top").await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (404, Some("season_not_archived")));
    assert!(frozen_exists(&harness).await, "kept until the season is verified");

    let second = archiver.archive_season("points", SEASON, Shard { index: 0, total: 2 }, far()).await.unwrap();
    assert_eq!((second.status, second.items_written), (Status::Complete, 1_500));
    let (status, body) = app.get("/v1/boards/points/seasons/2026-10/top").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["total"], 2_500);
    assert_archived_exactly(&harness, &live).await;
}

#[tokio::test]
async fn a_count_that_does_not_match_keeps_the_frozen_board_and_the_season_incomplete() {
    let harness = ArchiveHarness::new().await;
    seeded(&harness, 2_100).await;
    let start = at("2026-11-01T01:00:00+08:00");
    let first = harness
        .archiver_with_clock(harness.table.clone(), clock_jumping_after(3, start))
        .archive_season("points", SEASON, Shard::WHOLE, start + Duration::minutes(10))
        .await
        .unwrap();
    assert_eq!(first.status, Status::InProgress);
    // Something else writes into the season's partition meanwhile.
    let stray = Standing { rank: 99_999, user_id: "stray".into(), points: 1, reached_at: start };
    let unprocessed = harness.table.batch_write(vec![put_request(entry_item("points", SEASON, 2_100, &stray))]).await.unwrap();
    assert!(unprocessed.is_empty());

    let error = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap_err();
    assert!(matches!(error, ArchiveError::VerificationFailed { stored: 2_101, frozen: 2_100, .. }), "{error}");
    assert!(harness.table.completed("points", SEASON).await.unwrap().is_none());
    assert!(frozen_exists(&harness).await, "nothing is freed before the count matches");
}

#[tokio::test]
async fn events_for_an_archived_season_are_refused_with_period_closed() {
    let harness = ArchiveHarness::new().await;
    let ingest = harness.app().await;
    ingest.set_now(at("2026-10-31T23:50:00+08:00"));
    let (status, body) = ingest.event(json!({"event_id": "before", "user_id": "ann", "action": "learning"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["results"][0]["periods"][0]["period_id"], SEASON);

    // The archive job's clock is past the season's end and grace; ingest still takes October.
    let report = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap();
    assert_eq!((report.status, report.total), (Status::Complete, 1));

    let keys_before = ingest.keyspace().await;
    let (status, body) = ingest.event(json!({"event_id": "after", "user_id": "ann", "action": "learning"})).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (422, Some("period_closed")), "{body}");
    assert_eq!(ingest.keyspace().await, keys_before, "a refused event writes nothing");
    let entry = harness.table.user_entry("points", SEASON, "ann").await.unwrap().unwrap();
    assert_eq!((entry.rank, entry.points, entry.reached_at), (1, 10, at("2026-10-31T23:50:00+08:00")));
}

#[tokio::test]
async fn unfinished_seasons_unknown_boards_and_bad_requests_are_clear_errors_that_change_nothing() {
    let harness = ArchiveHarness::new().await;
    seeded(&harness, 3).await;
    let archiver = harness.archiver(harness.table.clone());

    // October has ended, but the grace (longer than the event window) has not.
    harness.set_now(at("2026-11-01T00:20:00+08:00"));
    let error = archiver.archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap_err();
    assert_eq!(error.code(), "season_not_ended");
    assert!(error.to_string().contains("from 2026-10-31T16:30:00+00:00"), "{error}");
    let live = harness.keys.board("points").period(&ArchiveHarness::season(SEASON));
    assert_eq!(harness.board_in_rank_order(&live).await.len(), 3, "the live board is untouched");
    let guard: Vec<String> =
        redis::cmd("HKEYS").arg(harness.keys.board("points").guard()).query_async(&mut harness.redis.clone()).await.unwrap();
    assert!(guard.is_empty(), "not closed: {guard:?}");

    harness.set_now(at("2026-11-01T01:00:00+08:00"));
    let refusals = [
        ("no-such-board", SEASON, Shard::WHOLE, "unknown_board"),
        ("activity", SEASON, Shard::WHOLE, "board_not_archived"),
        ("points", "2026-13", Shard::WHOLE, "invalid_season"),
        ("points", "2026-12", Shard::WHOLE, "season_not_ended"),
        ("points", SEASON, Shard { index: 2, total: 2 }, "invalid_shard"),
        ("points", SEASON, Shard { index: 0, total: 0 }, "invalid_shard"),
    ];
    for (board, season, shard, code) in refusals {
        let error = archiver.archive_season(board, season, shard, far()).await.unwrap_err();
        assert_eq!(error.code(), code, "{board} {season} {shard:?}: {error}");
    }
    let error = archive::run(&archiver, &harness.closer(), json!({"board": "points"}), far()).await.unwrap_err();
    assert_eq!(error.code(), "bad_request");
    assert!(table_items(&harness.table).await.is_empty(), "no error wrote anything");
}
