//! Season archival of a board spread over shards (docs/archival.md, docs/scaling.md): the
//! season of a 5-shard board and the same members on a board in one slot are archived side by
//! side; DynamoDB holds the same ranks, members, points and times for both (ties across shards
//! in the order one sorted set gives them), and the same distributions. Also: the archive job
//! sharded by pages, stopped by its deadline and run again; every shard's frozen set and
//! statements freed; a shard whose season was seen live and is gone refuses the archive.

use chrono::{DateTime, Utc};
use serde_json::json;
use standings::archive::job::{ArchiveError, Status};
use standings::archive::table::Shard;
use standings::domain::config::Config;
use standings_tests::{ArchiveHarness, Member, at, season_members, seed_board};

const SEASON: &str = "2026-10";
const SHARDS: u32 = 5;

fn far() -> DateTime<Utc> {
    at("2100-01-01T00:00:00Z")
}

fn config() -> Config {
    let board = |name: &str, shards: u32| {
        format!(
            "[[boards]]\nname = \"{name}\"\nkind = \"cumulative\"\ntimezone = \"Asia/Shanghai\"\nperiods = [\"season\"]\ntop = 10\narchive = true\nstatements = true\nshards = {shards}\nrules = [{{ action = \"a\", points = 1, scope = \"none\" }}]\n"
        )
    };
    Config::parse(&format!("{}{}", board("solo", 1), board("wide", SHARDS))).unwrap()
}

/// The same members on both boards' live season: `wide`'s each in its user's shard.
async fn seed(harness: &ArchiveHarness, n: u64) -> Vec<Member> {
    let season = ArchiveHarness::season(SEASON);
    let members = season_members(n, &season);
    seed_board(&harness.keys.board("solo").period(&season), &members).await;
    for shard in 0..SHARDS {
        let mine: Vec<Member> =
            members.iter().filter(|(user, ..)| harness.keys.layout("wide", SHARDS).shard_of(user) == shard as usize).cloned().collect();
        seed_board(&harness.keys.layout("wide", SHARDS).shard(shard as usize).period(&season), &mine).await;
    }
    harness.board_in_rank_order(&harness.keys.board("solo").period(&season)).await
}

async fn archived(harness: &ArchiveHarness, board: &str) -> Vec<(u64, String, i64, DateTime<Utc>, u64)> {
    let entries = harness.table.ranks(board, SEASON, 1, 9_999_999_999).await.unwrap();
    entries.into_iter().map(|e| (e.rank, e.user_id, e.points, e.reached_at, e.total)).collect()
}

/// Keys of `board` left in Redis (its layout record aside).
async fn left(harness: &ArchiveHarness, board: &str) -> Vec<String> {
    let pattern = format!("{}:*", harness.keys.prefix());
    let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query_async(&mut harness.redis.clone()).await.unwrap();
    keys.into_iter().filter(|key| key.contains(&format!("{{{board}")) && (key.contains(":frozen:") || key.contains(":stmt:"))).collect()
}

#[tokio::test]
async fn a_sharded_season_is_archived_rank_for_rank_as_one_board_would_be() {
    let harness = ArchiveHarness::with_config(config()).await;
    let live = seed(&harness, 3_700).await;
    // A statement on a shard, released with the season.
    let app = harness.app().await;
    app.set_now(at("2026-10-20T10:00:00+08:00"));
    assert_eq!(app.event(json!({"event_id": "s1", "user_id": "u000007", "action": "a"})).await.0, 200);
    let season = ArchiveHarness::season(SEASON);
    let live_after = harness.board_in_rank_order(&harness.keys.board("solo").period(&season)).await;
    assert_ne!(live_after, live, "the event moved u000007 on both boards");
    let live = live_after;
    harness.set_now(at("2026-11-01T01:00:00+08:00"));

    let whole = harness.archiver(harness.table.clone()).archive_season("solo", SEASON, Shard::WHOLE, far()).await.unwrap();
    assert_eq!(whole.status, Status::Complete);
    // The sharded board by two job shards at once, each stopped by its deadline (on the job's
    // clock) once frozen, then run again.
    let archiver = harness.archiver(harness.table.clone());
    let deadline = at("2026-11-01T01:00:00+08:00");
    let (even, odd) = tokio::join!(
        archiver.archive_season("wide", SEASON, Shard { index: 0, total: 2 }, deadline),
        archiver.archive_season("wide", SEASON, Shard { index: 1, total: 2 }, deadline),
    );
    assert_eq!((even.unwrap().status, odd.unwrap().status), (Status::InProgress, Status::InProgress));
    let mut statuses = Vec::new();
    for index in [0, 1] {
        statuses.push(archiver.archive_season("wide", SEASON, Shard { index, total: 2 }, far()).await.unwrap().status);
    }
    assert!(statuses.contains(&Status::Complete), "{statuses:?}");

    let solo = archived(&harness, "solo").await;
    assert_eq!(solo.len(), live.len());
    assert_eq!(solo.iter().map(|e| e.1.clone()).collect::<Vec<_>>(), live.iter().map(|m| m.0.clone()).collect::<Vec<_>>());
    assert_eq!(archived(&harness, "wide").await, solo, "the same ranks, members, points, times and total");
    for buckets in [1, 7, 20] {
        let (a, b) = (
            harness.table.distribution("solo", SEASON, buckets).await.unwrap(),
            harness.table.distribution("wide", SEASON, buckets).await.unwrap(),
        );
        assert!(a.is_some() && a == b, "{buckets} buckets: {a:?} / {b:?}");
    }
    assert_eq!(left(&harness, "wide").await, Vec::<String>::new(), "every shard's frozen set and statements freed");
    let (status, body) = app.get("/v1/boards/wide/seasons/2026-10/top?limit=3").await;
    assert_eq!((status.as_u16(), &body["entries"][0]["user_id"]), (200, &json!(live[0].0)), "{body}");
}

#[tokio::test]
async fn a_shard_seen_live_then_gone_refuses_the_archive() {
    let harness = ArchiveHarness::with_config(config()).await;
    seed(&harness, 200).await;
    harness.set_now(at("2026-10-20T10:00:00+08:00"));
    // A run while the season is live sees every shard with members.
    harness.archiver(harness.table.clone()).archive_due(far()).await.unwrap();
    for name in harness.keys.layout("wide", SHARDS).journals() {
        assert!(harness.table.seen(&name, SEASON).await.unwrap(), "{name}");
    }
    // Shard 3 flushed with its guard (a node lost): the others still hold their members.
    let season = ArchiveHarness::season(SEASON);
    let lost = harness.keys.layout("wide", SHARDS).shard(3);
    let _: () = redis::cmd("DEL").arg(lost.period(&season)).arg(lost.guard()).query_async(&mut harness.redis.clone()).await.unwrap();
    harness.set_now(at("2026-11-01T01:00:00+08:00"));
    let error = harness.archiver(harness.table.clone()).archive_season("wide", SEASON, Shard::WHOLE, far()).await.unwrap_err();
    assert!(matches!(error, ArchiveError::LiveBoardLost { .. }), "{error:?}");
    assert_eq!(harness.table.count_entries("wide", SEASON).await.unwrap(), 0, "nothing archived");
}

/// Two members on five shards: three shards never had one. A run while the season is live sees
/// the two that did; the season is archived with both, the empty shards neither refused as lost
/// nor counted.
#[tokio::test]
async fn a_season_on_more_shards_than_members_is_archived_with_its_empty_shards() {
    let harness = ArchiveHarness::with_config(config()).await;
    let app = harness.app().await;
    app.set_now(at("2026-10-20T10:00:00+08:00"));
    for (i, user) in ["ann", "bob"].into_iter().enumerate() {
        assert_eq!(app.event(json!({"event_id": format!("e{i}"), "user_id": user, "action": "a"})).await.0, 200);
    }
    harness.set_now(at("2026-10-20T10:01:00+08:00"));
    harness.archiver(harness.table.clone()).archive_due(far()).await.unwrap();
    let seen =
        futures::future::join_all(harness.keys.layout("wide", SHARDS).journals().iter().map(|name| harness.table.seen(name, SEASON))).await;
    assert_eq!(seen.into_iter().filter(|s| *s.as_ref().unwrap()).count(), 2, "only the shards holding ann and bob");
    harness.set_now(at("2026-11-01T01:00:00+08:00"));
    let report = harness.archiver(harness.table.clone()).archive_season("wide", SEASON, Shard::WHOLE, far()).await.unwrap();
    assert_eq!((report.status, report.total), (Status::Complete, 2), "{report:?}");
    let users: Vec<String> = archived(&harness, "wide").await.into_iter().map(|e| e.1).collect();
    assert_eq!(users, ["bob", "ann"], "equal points: the later id first, as one sorted set orders a tie");
}
