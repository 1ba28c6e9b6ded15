//! A store restored from a snapshot taken before a move's switch (docs/journal.md#rollbacks,
//! docs/scaling.md#changing-shards): its layout record names the layout the board moved from,
//! whose journal ends at the switch; S3's record of the switch says where the data is.

use std::sync::Arc;

use axum::http::StatusCode;
use journal::Status;
use serde_json::json;
use standings::redis::settings::RedisSettings;
use standings_tests::TestApp;
use standings_tests::journal::{new_bucket, s3, spawn_journaled_at, spawn_journaled_unborn_at};
use standings_tests::servers::{RedisServer, eventually};

use crate::reshard_recovery::{drain, moved, restorer, scaled, started};
use crate::sharded_reshard::{far, reads, submit};

/// A Redis restarted from a snapshot taken before a move's switch (3 → 5): the snapshot's layout
/// record names the old layout, whose journal in S3 ends at the switch; the writes after it are
/// in the new layout's. The drain's next run fences the board (the old layout's journal is
/// ahead of the snapshot, or S3's record of the switch names another layout), and the restore
/// brings it back where it was before the rollback, the new layout recorded, with every
/// acknowledged write (before and after the switch), the old layout freed.
#[tokio::test]
async fn a_snapshot_from_before_a_switch_is_restored_in_the_layout_moved_to() {
    from_before_a_switch(Then::Between).await;
}

/// The same with no write between the snapshot and the move: the old layout's journal ends where
/// the snapshot does, and only S3's record of the switch says the store is older.
#[tokio::test]
async fn a_snapshot_taken_right_before_a_move_is_fenced_by_the_switch_record_and_restored() {
    from_before_a_switch(Then::Nothing).await;
}

/// The older store takes a write before the drain fences it: acknowledged, in the older layout's
/// journal only. The restore brings the board back in the layout switched to, then decides that
/// write again there (docs/journal.md#rollbacks): applied once, its retry a duplicate, the older
/// layout freed with its journal. Before, the restore refused (`invalid`) and the board stayed
/// fenced.
#[tokio::test]
async fn a_write_the_older_store_took_before_its_fence_is_decided_again_where_the_board_switched_to() {
    from_before_a_switch(Then::Window).await;
}

/// The same, and every key lost after the drain fenced the older store, before any restore:
/// those writes were in their streams only (found by the simulation: lost). The drain kept them
/// in S3; the restore brings the board back, puts them back and decides them again there.
#[tokio::test]
async fn the_older_stores_writes_survive_a_loss_of_every_key_before_their_restore() {
    from_before_a_switch(Then::WindowLost).await;
}

#[derive(Clone, Copy, PartialEq)]
enum Then {
    /// A write between the snapshot and the move.
    Between,
    Nothing,
    /// A write on the restarted store, before the drain.
    Window,
    /// `Window`, then every key lost after the drain.
    WindowLost,
}

async fn from_before_a_switch(then: Then) {
    let mut server = RedisServer::start(&["--appendonly", "no", "--save", ""]).await;
    let settings = RedisSettings::standalone(&server.url());
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let first = spawn_journaled_at(scaled(1), &settings).await;
    for i in 0..6 {
        assert_eq!(submit(&first, &format!("s{i}"), &format!("u{}", i % 4), 2 + i).await.0, StatusCode::OK);
    }
    drain(&first, &client, &bucket).await;
    let deploy =
        async |shards: u32| started(spawn_journaled_unborn_at(scaled(shards), first.keys.clone(), &settings).await, &client, &bucket).await;
    let three = deploy(3).await;
    moved(&three, &client, &bucket).await;
    assert_eq!(submit(&three, "a3", "u1", 20).await.0, StatusCode::OK);
    drain(&three, &client, &bucket).await;
    let () = redis::cmd("SAVE").query_async(&mut three.redis.clone()).await.unwrap();
    if then == Then::Between {
        assert_eq!(submit(&three, "b3", "u2", 30).await.0, StatusCode::OK, "after the snapshot, before the switch");
        drain(&three, &client, &bucket).await;
    }
    let five = deploy(5).await;
    moved(&five, &client, &bucket).await;
    assert_eq!(submit(&five, "a5", "u3", 40).await.0, StatusCode::OK, "after the switch");
    drain(&five, &client, &bucket).await;
    let before = reads(&five).await;
    let u0_before = five.get("/v1/boards/game/users/u0?period=all").await.1["score"].as_i64();
    let u2_before = five.get("/v1/boards/game/users/u2?period=all").await.1["score"].as_i64();

    restart(&mut server, &five).await;
    let later = deploy(5).await;
    let window = matches!(then, Then::Window | Then::WindowLost);
    if window {
        assert_eq!(submit(&later, "window", "u0", 60).await.0, StatusCode::OK, "the older store, not fenced yet");
        assert_eq!(submit(&later, "window2", "u2", 70).await.0, StatusCode::OK, "another shard's");
    }
    let report = later.journal_jobs(&client, &bucket, Arc::default()).run(json!({"drain": {}}), far()).await.expect("a drain");
    assert!(report["boards"].as_array().unwrap().iter().any(|b| b["lost"] == true), "the older store is seen: {report}");
    let (status, reply) = submit(&later, "fenced", "u1", 50).await;
    assert_eq!((status, reply["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{reply}");
    let kept = async || {
        let older = format!("journal/_older/prefix={}/board=game/", later.keys.prefix());
        let listed = client.list_objects_v2().bucket(&bucket).prefix(&older).send().await.expect("moto lists");
        listed.contents().iter().filter_map(|o| o.key().map(str::to_owned)).collect::<Vec<_>>()
    };
    if then == Then::WindowLost {
        let names = kept().await;
        assert_eq!(names.iter().filter(|name| name.ends_with("/window.json")).count(), 2, "both shards' writes kept: {names:?}");
        let () = redis::cmd("FLUSHALL").query_async(&mut later.redis.clone()).await.unwrap();
    }
    // With the older store's writes, in invocations that each stop at once: each goes on from
    // where the last stopped, and none decides a write twice.
    let (board, deadline) = if window { (Some("game"), chrono::Utc::now()) } else { (None, far()) };
    let mut restored = restorer(&later, &client, &bucket).restore(board, deadline).await.expect("the restore runs");
    let mut calls = 1;
    if then == Then::Window {
        // Recorded by the first invocation, before the older layout is freed: until they are
        // decided, the drain counts the board lost and a move is refused.
        let record: Option<String> =
            redis::cmd("GET").arg(later.keys.board_older_writes("game")).query_async(&mut later.redis.clone()).await.unwrap();
        assert_eq!(record.as_deref().and_then(|r| r.split_once('@')).map(|(layout, _)| layout), Some("3"), "{restored:?}");
        let jobs = later.journal_jobs(&client, &bucket, Arc::default());
        let report = jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
        assert!(report["boards"].as_array().unwrap().iter().any(|b| b["lost"] == true), "still lost: {report}");
        let refused = jobs.run(json!({"reshard": {"board": "game"}}), far()).await.expect_err("a move waits");
        assert!(refused.to_string().contains("still to be decided again"), "{refused}");
        assert_eq!(refused.code(), "board_restoring", "{refused}");
    }
    while window && restored.status != Status::Complete && calls < 100 {
        let campaign = restored.campaign.clone();
        restored =
            restorer(&later, &client, &bucket).resume(board, campaign.as_deref(), chrono::Utc::now()).await.expect("the restore goes on");
        calls += 1;
    }
    assert_eq!(restored.status, Status::Complete, "after {calls} calls: {restored:?}");
    let mut conn = later.redis.clone();
    let record: Option<String> = redis::cmd("GET").arg(later.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    assert_eq!(record.as_deref(), Some("5"), "the layout moved to");
    if window {
        assert!(kept().await.iter().any(|name| name.contains("/decided-")), "their decision recorded");
        let score = async |user: &str| later.get(&format!("/v1/boards/game/users/{user}?period=all")).await.1["score"].as_i64();
        assert_eq!(score("u0").await, u0_before.map(|points| points + 60), "the older store's write, applied once");
        assert_eq!(score("u2").await, u2_before.map(|points| points + 70), "the other, applied once");
        assert_eq!(score("u3").await, Some(40 + 5), "the write after the switch");
        assert_eq!(submit(&later, "window", "u0", 60).await.0, StatusCode::OK, "its retry: a duplicate");
        assert_eq!(score("u0").await, u0_before.map(|points| points + 60), "not applied twice");
        let record: Option<String> = redis::cmd("GET").arg(later.keys.board_older_writes("game")).query_async(&mut conn).await.unwrap();
        assert_eq!(record, None, "every kept write decided");
        let kept = later.keyspace().await;
        let again = restorer(&later, &client, &bucket).restore(None, far()).await.expect("a second restore");
        assert_eq!(again.status, Status::Complete);
        assert_eq!(later.keyspace().await, kept, "a second restore writes nothing");
        if then == Then::WindowLost {
            // Every key lost again after their decision, before a drain stored it: decided again
            // from S3; then drained and lost once more: restored from the journal, not decided
            // a third time.
            for drained in [false, true] {
                if drained {
                    drain(&later, &client, &bucket).await;
                }
                let () = redis::cmd("FLUSHALL").query_async(&mut later.redis.clone()).await.unwrap();
                let again = restorer(&later, &client, &bucket).restore(None, far()).await.expect("a restore after the loss");
                assert_eq!(again.status, Status::Complete, "{again:?}");
                assert_eq!(score("u0").await, u0_before.map(|points| points + 60), "drained {drained}: {again:?}");
                assert_eq!(score("u2").await, u2_before.map(|points| points + 70), "drained {drained}");
                assert_eq!(score("u3").await, Some(40 + 5), "drained {drained}");
            }
        }
    } else {
        later.set_now(five.now());
        assert_eq!(reads(&later).await, before, "every acknowledged write, before and after the switch");
    }
    let stale: Vec<String> = later.keyspace().await.into_iter().map(|(key, ..)| key).filter(|key| key.contains("of3:")).collect();
    assert_eq!(stale, Vec::<String>::new(), "the layout moved from is freed");
    let report = later.journal_jobs(&client, &bucket, Arc::default()).run(json!({"drain": {}}), far()).await.expect("a drain");
    assert!(report["boards"].as_array().unwrap().iter().all(|b| b["lost"] != true), "nothing lost after the restore: {report}");
}

/// A snapshot from before a board's first move (1 → 3): the store holds the one slot and no
/// layout record. The drain fences the one slot (its guard there, S3's last switch another
/// layout), and the restore brings the board back in the shards, the one slot freed.
#[tokio::test]
async fn a_snapshot_from_before_a_first_move_is_restored_in_the_shards() {
    let (_server, later) = from_before_a_move(1, 3).await;
    let one_slot: Vec<String> = later.keyspace().await.into_iter().map(|(key, ..)| key).filter(|key| key.contains("{game}:")).collect();
    assert!(one_slot.iter().all(|key| key.ends_with(":layout") || key.ends_with(":scale")), "the one slot freed: {one_slot:?}");
}

/// A snapshot from before a board sharded from its creation moved to its one slot (3 → 1): the
/// store records the shards. The restore brings the board back in the one slot and records it
/// there, the shards freed. Before, the one slot's restore recorded nothing: the record kept
/// naming the fenced shards, and every read and write answered 503 after the restore completed
/// (found by the simulation).
#[tokio::test]
async fn a_snapshot_from_before_a_move_to_the_one_slot_is_restored_there() {
    let (_server, later) = from_before_a_move(3, 1).await;
    let stale: Vec<String> = later.keyspace().await.into_iter().map(|(key, ..)| key).filter(|key| key.contains("of3:")).collect();
    assert_eq!(stale, Vec::<String>::new(), "the shards freed");
    assert_eq!(submit(&later, "after", "u2", 50).await.0, StatusCode::OK, "writes go on in the one slot");
}

/// Writes on `from` shards, a snapshot, a move to `to` and a write after its switch; Redis
/// restarted from the snapshot, the drain fences the board, and the restore brings back every
/// acknowledged write in the layout moved to, recorded there. The server (kept running while it is
/// held) and the app after the restore.
async fn from_before_a_move(from: u32, to: u32) -> (RedisServer, TestApp) {
    let mut server = RedisServer::start(&["--appendonly", "no", "--save", ""]).await;
    let settings = RedisSettings::standalone(&server.url());
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let first = spawn_journaled_at(scaled(from), &settings).await;
    for i in 0..6 {
        assert_eq!(submit(&first, &format!("s{i}"), &format!("u{}", i % 4), 2 + i).await.0, StatusCode::OK);
    }
    drain(&first, &client, &bucket).await;
    let () = redis::cmd("SAVE").query_async(&mut first.redis.clone()).await.unwrap();
    let moved_to = started(spawn_journaled_unborn_at(scaled(to), first.keys.clone(), &settings).await, &client, &bucket).await;
    moved(&moved_to, &client, &bucket).await;
    assert_eq!(submit(&moved_to, "a3", "u1", 20).await.0, StatusCode::OK, "after the switch");
    drain(&moved_to, &client, &bucket).await;
    let before = reads(&moved_to).await;

    restart(&mut server, &moved_to).await;
    let later = spawn_journaled_unborn_at(scaled(to), first.keys.clone(), &settings).await;
    let report = later.journal_jobs(&client, &bucket, Arc::default()).run(json!({"drain": {}}), far()).await.expect("a drain");
    assert!(report["boards"].as_array().unwrap().iter().any(|b| b["lost"] == true), "the older store is seen: {report}");
    let (status, _) = submit(&later, "fenced", "u2", 50).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "the older layout is fenced");
    let restored = restorer(&later, &client, &bucket).restore(None, far()).await.expect("the restore runs");
    assert_eq!(restored.status, Status::Complete, "{restored:?}");
    let record: Option<String> =
        redis::cmd("GET").arg(later.keys.board_layout("game")).query_async(&mut later.redis.clone()).await.unwrap();
    assert_eq!(record, Some(to.to_string()), "the layout moved to");
    later.set_now(moved_to.now());
    assert_eq!(reads(&later).await, before, "every acknowledged write, the one after the switch included");
    (server, later)
}

/// `server` restarted from its snapshot, once `app`'s store reaches it again.
async fn restart(server: &mut RedisServer, app: &TestApp) {
    server.restart().await;
    eventually("the store reaches Redis again", std::time::Duration::from_secs(30), || async {
        let mut conn = app.store.connection().await.ok()?;
        redis::cmd("PING").query_async::<String>(&mut conn).await.ok()
    })
    .await;
}
