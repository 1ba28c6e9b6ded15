//! A board's layout record lost alone (a bad `DEL`, an eviction) while a move is due or after
//! one (docs/scaling.md#changing-shards): no write goes into a layout taken for a new board, every
//! write waits (503 `board_restoring`) for the restore that records where the data is.

use axum::http::StatusCode;
use journal::Status;
use serde_json::json;
use standings::domain::guard;
use standings::services::journal::births;
use standings_tests::journal::{new_bucket, s3, spawn_journaled_unborn_on};
use standings_tests::{TestApp, spawn_journaled};

use crate::reshard_recovery::{drain, moved, restorer, scaled, started};
use crate::sharded_reshard::{far, reads, submit};

/// A move due (the board at 3 shards, configured with 5, the new layout's guards born at a
/// function's start) when the layout record alone is lost: the configured layout born is the
/// move's target, not a new board. A write records nothing and is refused until a restore
/// records the layout the data is in. Before, it recorded "5" and was decided against the new
/// layout's empty shards: the board read back as that one write (the review's finding).
#[tokio::test]
async fn a_layout_record_lost_alone_while_a_move_is_due_is_not_taken_for_a_new_board() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let first = spawn_journaled(scaled(1)).await;
    for i in 0..6 {
        assert_eq!(submit(&first, &format!("s{i}"), &format!("u{}", i % 4), 2 + i).await.0, StatusCode::OK);
    }
    drain(&first, &client, &bucket).await;
    let three = started(spawn_journaled_unborn_on(scaled(3), first.keys.clone()).await, &client, &bucket).await;
    moved(&three, &client, &bucket).await;
    let before = reads(&three).await;
    drain(&three, &client, &bucket).await;
    let five = started(spawn_journaled_unborn_on(scaled(5), first.keys.clone()).await, &client, &bucket).await;
    let mut conn = five.redis.clone();
    let _: () = redis::cmd("DEL").arg(five.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    // Another container, which has not probed the board before the loss.
    let other = spawn_journaled_unborn_on(scaled(5), first.keys.clone()).await;
    other.set_now(five.now());
    refused_until_restored(&five, &other, (&client, &bucket), "3").await;
    five.set_now(three.now());
    assert_eq!(reads(&five).await, before, "every acknowledged write is there");
}

/// A move due from 3 shards to the one slot (the one slot born as its target at a function's
/// start) when the layout record alone is lost: a write refuses (503 `board_restoring`) and
/// writes nothing (no scale either), and a read answers the same, rather than taking the one
/// slot for the board; the restore records the layout the data is in. Before, the write went
/// into the empty one slot of a board sharded from its creation (its start judged that slot a
/// new board's; found by the simulation), and one of a board that had been in its one slot
/// recorded the scale there.
#[tokio::test]
async fn a_layout_record_lost_alone_while_a_move_to_one_slot_is_due_takes_no_write_there() {
    back_to_one_slot(false).await;
}

#[tokio::test]
async fn a_layout_record_lost_alone_while_a_move_back_to_one_slot_is_due_takes_no_write_there() {
    back_to_one_slot(true).await;
}

async fn back_to_one_slot(was_there: bool) {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let first = spawn_journaled(scaled(if was_there { 1 } else { 3 })).await;
    let three = started(spawn_journaled_unborn_on(scaled(3), first.keys.clone()).await, &client, &bucket).await;
    if was_there {
        moved(&three, &client, &bucket).await;
    }
    for i in 0..6 {
        assert_eq!(submit(&three, &format!("s{i}"), &format!("u{}", i % 4), 2 + i).await.0, StatusCode::OK);
    }
    let before = reads(&three).await;
    drain(&three, &client, &bucket).await;
    let one = started(spawn_journaled_unborn_on(scaled(1), first.keys.clone()).await, &client, &bucket).await;
    let mut conn = one.redis.clone();
    let _: () = redis::cmd("DEL").arg(one.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    let lost = one.keyspace().await;
    // Another container, which has not probed the board before the loss.
    let other = spawn_journaled_unborn_on(scaled(1), first.keys.clone()).await;
    other.set_now(three.now());
    let (status, reply) = submit(&other, "after", "u1", 9).await;
    assert_eq!((status, reply["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{reply}");
    assert_eq!(one.keyspace().await, lost, "nothing written");
    let (status, _) = other.get("/v1/boards/game/top?period=all").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "not the empty one slot's top");
    let restored = restorer(&one, &client, &bucket).restore(Some("game"), far()).await.expect("the restore runs");
    assert_eq!(restored.status, Status::Complete, "{restored:?}");
    let again: Option<String> = redis::cmd("GET").arg(one.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    assert_eq!(again.as_deref(), Some("3"), "the layout the data is in");
    one.set_now(three.now());
    assert_eq!(reads(&one).await, before, "every acknowledged write is there");
}

/// A board moved from its one slot to 3 shards before any write, written there and not drained
/// yet, its layout record then lost alone; a deploy configured with 5 shards starts after the
/// loss. The journal bucket holds none of the board's lines, but it holds the move's switch: the
/// deploy's start judges the 5 shards' layout the lost record's, not a new board's, and a write
/// is refused (503 `board_restoring`), writing nothing, until the restore records "3" again.
/// Before, the start marked the 5 shards born as a new board's, the write recorded "5" and went
/// there, and the restore's "3" then hid it: an acknowledged write lost (found by the cluster
/// simulation).
#[tokio::test]
async fn a_layout_record_lost_before_any_drain_after_a_move_is_not_taken_for_a_new_board() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let first = spawn_journaled(scaled(1)).await;
    let three = started(spawn_journaled_unborn_on(scaled(3), first.keys.clone()).await, &client, &bucket).await;
    moved(&three, &client, &bucket).await;
    for i in 0..4 {
        assert_eq!(submit(&three, &format!("s{i}"), &format!("u{i}"), 2 + i).await.0, StatusCode::OK);
    }
    let before = reads(&three).await;
    let mut conn = three.redis.clone();
    let _: () = redis::cmd("DEL").arg(three.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    let five = started(spawn_journaled_unborn_on(scaled(5), first.keys.clone()).await, &client, &bucket).await;
    five.set_now(three.now());
    refused_until_restored(&five, &five, (&client, &bucket), "3").await;
    assert_eq!(reads(&five).await, before, "every acknowledged write is there");
}

/// A board never written, started by a deployment of 4 shards and then one of 8 (a count changed
/// before the first write), written by the second, its layout record then lost alone: a third
/// deployment of 4 started after the loss writes where the board's writes are, and every
/// acknowledged write reads back, after a restore too. Before, each start judged its own layout a
/// new board's (nothing recorded, nothing in S3): the second's write recorded "8"; with that
/// record lost the third recorded "4" and wrote into the first's empty shards, beside the 8
/// holding the board (found by the cluster simulation).
#[tokio::test]
async fn two_deployments_of_a_board_never_written_leave_one_layout_to_find_when_its_record_is_lost() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let (four, _eight) = four_then_eight(&client, &bucket).await;
    let mut conn = four.redis.clone();
    let record: Option<String> = redis::cmd("GET").arg(four.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    assert_eq!(record.as_deref(), Some("4"), "recorded by the first start");
    for shard in four.keys.layout("game", 8).all() {
        let target: Option<String> = redis::cmd("HGET").arg(shard.guard()).arg(guard::TARGET).query_async(&mut conn).await.unwrap();
        assert_eq!(target.as_deref(), Some("4"), "the second start's shards are the move's target");
    }
    let _: () = redis::cmd("DEL").arg(four.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    let later = started(spawn_journaled_unborn_on(scaled(4), four.keys.clone()).await, &client, &bucket).await;
    later.set_now(four.now());
    let (status, reply) = submit(&later, "after", "u1", 9).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let expected = json!([["u1", 12], ["u3", 5], ["u2", 4], ["u0", 2]]);
    assert_eq!(tops(&later).await, expected, "every acknowledged write in one layout");
    let restored = restorer(&later, &client, &bucket).restore(Some("game"), far()).await.expect("the restore runs");
    assert_eq!(restored.status, Status::Complete, "{restored:?}");
    assert_eq!(tops(&later).await, expected, "and after a restore");
}

/// The game's all-time top as `[user, score]` pairs.
/// A board never written, started by a deployment of 4 shards and then one of 8, and written
/// four times by the second.
async fn four_then_eight(client: &aws_sdk_s3::Client, bucket: &str) -> (TestApp, TestApp) {
    let four = started(standings_tests::journal::spawn_journaled_unborn(scaled(4)).await, client, bucket).await;
    let eight = started(spawn_journaled_unborn_on(scaled(8), four.keys.clone()).await, client, bucket).await;
    eight.set_now(four.now());
    for i in 0..4 {
        assert_eq!(submit(&eight, &format!("s{i}"), &format!("u{i}"), 2 + i).await.0, StatusCode::OK);
    }
    (four, eight)
}

async fn tops(app: &TestApp) -> serde_json::Value {
    let (status, top) = app.get("/v1/boards/game/top?period=all&limit=10").await;
    assert_eq!(status, StatusCode::OK, "{top}");
    top["entries"].as_array().unwrap().iter().map(|e| json!([e["user_id"], e["score"]])).collect()
}

/// A board written in its one slot with the journal off, its guard gone (or never written), then
/// deployed with the journal on and 3 shards: the start records no layout (its data is in the
/// one slot, where the probe finds it by its sets), so reads and writes go on there.
#[tokio::test]
async fn a_start_records_no_shards_over_a_board_whose_data_is_in_its_one_slot() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let off = standings_tests::spawn_ingest_with(scaled(1)).await;
    for i in 0..3 {
        assert_eq!(submit(&off, &format!("s{i}"), &format!("u{i}"), 2 + i).await.0, StatusCode::OK);
    }
    let mut conn = off.redis.clone();
    let _: () = redis::cmd("DEL").arg(off.keys.board("game").guard()).query_async(&mut conn).await.unwrap();
    let three = spawn_journaled_unborn_on(scaled(3), off.keys.clone()).await;
    // The shards judged before the one slot (a start judges them side by side).
    let objects = journal::S3Objects::new(client.clone(), &bucket);
    for name in three.keys.layout("game", 3).journals() {
        let judged = births::judge(&three.config, &three.store, &three.keys, &name, &objects).await.expect("judged");
        assert_eq!(judged, standings::redis::restore::Birth::New, "{name}");
    }
    let three = started(three, &client, &bucket).await;
    three.set_now(off.now());
    let record: Option<String> = redis::cmd("GET").arg(off.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    assert_eq!(record, None, "nothing recorded over the one slot's data");
    assert_eq!(tops(&three).await, json!([["u2", 4], ["u1", 3], ["u0", 2]]), "read from the one slot");
}

/// A board never written, started by a deployment of 4 shards (recording "4") and then one of 8
/// (its shards that layout's move target): the second's writes go to the 4 recorded, are
/// drained, and the store is lost whole before any move. A restore run by the deployment of 8
/// (nothing recorded, no switch, nothing stored in its own layout) brings the board back in the
/// 4 shards S3 holds lines of. Before, it took the configured 8, completed on empty shards and
/// recorded "8": the writes stayed in S3 (a review's finding).
#[tokio::test]
async fn a_board_lost_whole_before_a_move_it_never_made_is_restored_where_its_lines_are() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let (_four, eight) = four_then_eight(&client, &bucket).await;
    let expected = tops(&eight).await;
    drain(&eight, &client, &bucket).await;
    eight.lose_written_keys().await;
    let restored = restorer(&eight, &client, &bucket).restore(Some("game"), far()).await.expect("the restore runs");
    assert_eq!(restored.status, Status::Complete, "{restored:?}");
    let record: Option<String> =
        redis::cmd("GET").arg(eight.keys.board_layout("game")).query_async(&mut eight.redis.clone()).await.unwrap();
    assert_eq!(record.as_deref(), Some("4"), "where the lines are");
    assert_eq!(tops(&eight).await, expected, "every acknowledged write is back");
}

/// A write through `writer` refused (503 `board_restoring`) with nothing written, then a restore
/// run by `app` that records layout `record` again.
async fn refused_until_restored(app: &TestApp, writer: &TestApp, (client, bucket): (&aws_sdk_s3::Client, &str), record: &str) {
    let lost = app.keyspace().await;
    let (status, reply) = submit(writer, "after", "u1", 9).await;
    assert_eq!((status, reply["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{reply}");
    assert_eq!(app.keyspace().await, lost, "a refused write records no layout");
    let restored = restorer(app, client, bucket).restore(Some("game"), far()).await.expect("the restore runs");
    assert_eq!(restored.status, Status::Complete, "{restored:?}");
    let again: Option<String> = redis::cmd("GET").arg(app.keys.board_layout("game")).query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(again.as_deref(), Some(record), "the layout the data is in");
}
