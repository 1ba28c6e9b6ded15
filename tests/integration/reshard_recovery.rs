//! Recovery around moves between layouts (docs/scaling.md#changing-shards, docs/journal.md#restore):
//! a Redis lost right after a switch, a move back to a layout the board had before, and which
//! layout a restore chooses when nothing is recorded.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use aws_sdk_s3::Client;
use axum::http::{Method, StatusCode};
use journal::{Resharder, Restorer, S3Objects, Status};
use serde_json::{Value, json};
use standings::services::journal::births;
use standings_tests::journal::{new_bucket, s3, spawn_journaled_on, spawn_journaled_unborn_on};
use standings_tests::sim::faults::DrainOnList;
use standings_tests::{ADMIN, TestApp, spawn_journaled};

use crate::sharded_reshard::{far, game, reads, submit};

/// Board `game` in one slot with `n` submissions (user `i % users`, score `base + i`).
async fn written_one_slot(n: i64, users: i64, base: i64) -> TestApp {
    let one = spawn_journaled(game(1)).await;
    for i in 0..n {
        assert_eq!(submit(&one, &format!("s{i}"), &format!("u{}", i % users), base + i).await.0, StatusCode::OK);
    }
    one
}

pub(crate) async fn drain(app: &TestApp, client: &Client, bucket: &str) {
    app.journal_jobs(client, bucket, Arc::default()).run(json!({"drain": {}}), far()).await.expect("a drain");
}

pub(crate) fn restorer(app: &TestApp, client: &Client, bucket: &str) -> Restorer<S3Objects> {
    Restorer::new(app.config.clone(), app.keys.clone(), app.store.clone(), S3Objects::new(client.clone(), bucket))
}

/// A move's new layout holds the board's whole history in its streams only until the drain
/// stores them: a Redis lost right after the switch, before any drain, must still be restorable
/// (the old layout's objects hold that history, but a restore reads the new layout's journal).
#[tokio::test]
async fn a_redis_lost_right_after_a_move_is_restored_whole() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = written_one_slot(12, 5, 1).await;
    drain(&one, &client, &bucket).await;
    let four = spawn_journaled_on(game(4), one.keys.clone()).await;
    four.set_now(one.now());
    let before = reads(&four).await;
    let jobs = four.journal_jobs(&client, &bucket, Arc::default());
    assert_eq!(jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap()["status"], "complete");
    assert_eq!(reads(&four).await, before);
    four.lose_written_keys().await;
    let restorer = restorer(&four, &client, &bucket);
    let restored = restorer.restore(Some("game"), far()).await.expect("the restore runs");
    assert_eq!(restored.status, Status::Complete, "{restored:?}");
    four.set_now(one.now());
    assert_eq!(reads(&four).await, before, "every acknowledged write is back");
}

/// Back to a layout the board had before (its journal objects left in S3, another time's): the
/// drain takes them for no loss while the move is due, and the move takes the next generation,
/// the board reading as before and restorable from it.
#[tokio::test]
async fn a_board_moved_back_to_a_layout_it_had_before_takes_the_next_generation() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = written_one_slot(10, 4, 1).await;
    drain(&one, &client, &bucket).await;
    let four = spawn_journaled_on(game(4), one.keys.clone()).await;
    let jobs = four.journal_jobs(&client, &bucket, Arc::default());
    assert_eq!(jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap()["status"], "complete");
    assert_eq!(submit(&four, "s10", "u1", 5).await.0, StatusCode::OK);

    let back = spawn_journaled_on(game(1), one.keys.clone()).await;
    back.set_now(four.now());
    let before = reads(&back).await;
    let jobs = back.journal_jobs(&client, &bucket, Arc::default());
    let drained = jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    assert!(drained["boards"].as_array().unwrap().iter().all(|b| b["lost"] != true), "no loss while the move is due: {drained}");
    // Verified where its data is (the 4 shards recorded), not in the configured one slot.
    let verified = jobs.run(json!({"verify": {"board": "game"}}), far()).await.expect("a verify");
    assert_eq!(verified["mismatches"], 0, "{verified}");
    let report = jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap();
    assert_eq!((report["status"].as_str(), report["to"].as_u64()), (Some("complete"), Some(1)), "{report}");
    let record: String = redis::cmd("GET").arg(back.keys.board_layout("game")).query_async(&mut back.redis.clone()).await.unwrap();
    assert_eq!(record, "1:1", "the next generation");
    assert_eq!(reads(&back).await, before);
    let (status, retry) = submit(&back, "s10", "u1", 5).await;
    assert_eq!((status, retry["duplicate"].as_bool()), (StatusCode::OK, Some(true)), "{retry}");

    // Redis lost: the restore finds the second generation by S3's record and brings it back.
    back.lose_written_keys().await;
    let restorer = restorer(&back, &client, &bucket);
    assert_eq!(restorer.restore(Some("game"), far()).await.expect("the restore runs").status, Status::Complete);
    back.set_now(four.now());
    assert_eq!(reads(&back).await, before, "restored from the second generation's journal");
}

/// A board in its one slot (never moved: nothing recorded) whose deploy now says 8 shards, the
/// move not run yet: the deploy's start marked the 8 new shards born, and a restore restored
/// them (empty) instead of the slot the data is in, which stayed fenced; after the whole
/// deployment is lost, a restore found no record, no guard and no generation, and restored the 8
/// empty shards too. Both restore the one slot.
#[tokio::test]
async fn a_restore_of_a_board_whose_first_move_is_due_restores_its_one_slot() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = written_one_slot(8, 3, 2).await;
    drain(&one, &client, &bucket).await;
    let eight = spawn_journaled_on(game(8), one.keys.clone()).await;
    eight.set_now(one.now());
    let before = reads(&eight).await;
    let restorer = restorer(&eight, &client, &bucket);

    // A bad `DEL` of the slot's all-time set: the next write finds it gone and fences the board.
    let mut conn = eight.redis.clone();
    let _: () = redis::cmd("DEL").arg(one.keys.board("game").relative(":z:all:all")).query_async(&mut conn).await.unwrap();
    let (status, body) = submit(&eight, "x1", "u1", 1).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{body}");
    assert_eq!(restorer.restore(Some("game"), far()).await.expect("the restore runs").status, Status::Complete);
    eight.set_now(one.now());
    assert_eq!(reads(&eight).await, before, "the one slot restored");

    // The whole deployment lost: S3 alone says where the board was.
    eight.lose_written_keys().await;
    assert_eq!(restorer.restore(Some("game"), far()).await.expect("the restore runs").status, Status::Complete);
    eight.set_now(one.now());
    assert_eq!(reads(&eight).await, before, "the one slot restored from S3 alone");
}

/// A store rolled back to before a move's switch (here: the layout record gone and the one
/// slot's guard back, as a snapshot taken before the switch holds them): the restore restores
/// the shards, whose journal in S3 holds the switch (the move stores it first), with every write
/// taken after it; not the one slot, whose journal ends at the switch.
#[tokio::test]
async fn a_restore_with_the_record_gone_and_the_old_guard_back_restores_the_shards() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = written_one_slot(6, 3, 2).await;
    let four = spawn_journaled_on(game(4), one.keys.clone()).await;
    let jobs = four.journal_jobs(&client, &bucket, Arc::default());
    assert_eq!(jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap()["status"], "complete");
    assert_eq!(submit(&four, "after", "u1", 9).await.0, StatusCode::OK, "a write after the switch");
    four.set_now(one.now());
    let before = reads(&four).await;
    let mut conn = four.redis.clone();
    let _: () = redis::cmd("DEL").arg(four.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    let _: () = redis::cmd("HSET").arg(one.keys.board("game").guard()).arg("born").arg(1).query_async(&mut conn).await.unwrap();
    let restorer = restorer(&four, &client, &bucket);
    assert_eq!(restorer.restore(Some("game"), far()).await.expect("the restore runs").status, Status::Complete);
    let record: Option<String> = redis::cmd("GET").arg(four.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    assert_eq!(record.as_deref(), Some("4"), "the shards recorded again");
    four.set_now(one.now());
    assert_eq!(reads(&four).await, before, "the shards' data, the write after the switch included");
}

/// A move reads an old shard's stream a page at a time, not whole (its memory is bounded), while
/// the drain on its schedule stores and trims that stream beneath it: here the drain runs at each
/// listing of the board's objects once the move has begun, so it stores and trims every line
/// after the first page was read, and the rest are moved from the object it stored, none lost
/// and none twice.
#[tokio::test]
async fn a_move_whose_old_journal_is_drained_beneath_it_moves_every_line_once() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    // 2,500 lines in the stream, none stored yet; pages of 100.
    let one = written_one_slot(2_500, 40, 1).await;
    let four = spawn_journaled_on(game(4), one.keys.clone()).await;
    four.set_now(one.now());
    let before = reads(&four).await;
    let drainer = four.drainer(S3Objects::new(client.clone(), &bucket), Arc::default());
    let begun = four.keys.layout_at("game", 4, 0).all()[0].reshard_checkpoint();
    let objects = DrainOnList {
        once: Some((four.redis.clone(), begun)),
        ..DrainOnList::new(S3Objects::new(client.clone(), &bucket), Some(drainer), "game")
    };
    let drains = objects.drains.clone();
    let mut jobs = four.journal_jobs_over(objects.clone(), Arc::default());
    jobs.resharder = Resharder::new(four.config.clone(), four.keys.clone(), four.store.clone(), objects).with_stream_page(100);
    let report = jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap();
    assert_eq!((report["status"].as_str(), report["moved"].as_u64()), (Some("complete"), Some(2_500)), "{report}");
    assert!(drains.load(Ordering::Relaxed) >= 2, "the drain ran under the move, and its listing again after a page");
    four.set_now(one.now());
    assert_eq!(reads(&four).await, before, "every line moved once");
}

/// u1's all-time score on `app`'s board.
async fn u1_score(app: &TestApp) -> Value {
    let (status, body) = app.get("/v1/boards/game/users/u1?period=all").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["score"].clone()
}

/// A deploy of `game` on `shards` beside `app`, its start judging the boards not born as a
/// function's does (against the journal in `bucket`).
async fn deploy(app: &TestApp, shards: u32, client: &Client, bucket: &str) -> TestApp {
    started(spawn_journaled_unborn_on(game(shards), app.keys.clone()).await, client, bucket).await
}

/// `deployed` once its start judged its boards (`births::at_start`), as a function's does.
pub(crate) async fn started(deployed: TestApp, client: &Client, bucket: &str) -> TestApp {
    let objects = S3Objects::new(client.clone(), bucket);
    for (board, judged) in births::at_start(&deployed.config, &deployed.keys, &deployed.store, &objects).await {
        assert!(judged.is_ok(), "{board}: {judged:?}");
    }
    deployed
}

/// The journal function's `reshard` of the game board, run to its end in one invocation.
pub(crate) async fn moved(app: &TestApp, client: &Client, bucket: &str) {
    let jobs = app.journal_jobs(client, bucket, Arc::default());
    assert_eq!(jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap()["status"], "complete");
}

/// A board moved from its one slot to 3 shards and back (to a later generation: the first one
/// slot's lines are in S3), its layout record then lost alone (a bad `DEL`): a deploy started
/// after it takes no write into another layout (its start finds the board's generation from the
/// journal, whose guards it does not mark born): they wait (503 `board_restoring`) for the
/// restore that records the layout again, never go into an empty layout taken for a new board.
#[tokio::test]
async fn a_board_moved_back_to_one_slot_whose_layout_record_is_lost_alone_is_never_written_elsewhere() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let first = written_one_slot(6, 4, 2).await;
    drain(&first, &client, &bucket).await;
    let mut moved = Vec::new();
    for shards in [3, 1] {
        let app = deploy(&first, shards, &client, &bucket).await;
        let jobs = app.journal_jobs(&client, &bucket, Arc::default());
        assert_eq!(jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap()["status"], "complete");
        moved.push(app);
    }
    let one = moved.pop().unwrap();
    let mut conn = one.redis.clone();
    let record: String = redis::cmd("GET").arg(one.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    assert_eq!(record, "1:1", "a later generation than the first one slot's");
    let held = u1_score(&one).await.as_i64().unwrap();
    let _: () = redis::cmd("DEL").arg(one.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    let later = deploy(&first, 1, &client, &bucket).await;
    let (status, reply) = submit(&later, "after", "u1", 9).await;
    assert_eq!((status, reply["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{reply}");
    let restored = restorer(&later, &client, &bucket).restore(Some("game"), far()).await.expect("the restore runs");
    assert_eq!(restored.status, Status::Complete, "{restored:?}");
    let again: Option<String> = redis::cmd("GET").arg(one.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    assert_eq!(again, Some(record), "recorded again");
    assert_eq!(submit(&later, "after", "u1", 9).await.0, StatusCode::OK, "sent again");
    for app in [&later, &one] {
        assert_eq!(u1_score(app).await, json!(held + 9), "applied where the board is");
    }
}

/// `game` on `shards` at a `max_score` other than the default (its scale recorded beside its layout).
pub(crate) fn scaled(shards: u32) -> standings::domain::config::Config {
    let text = format!(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"sum\"\nmax_score = 4194303\ntimezone = \"UTC\"\nperiods = [\"day\", \"all\"]\ntop = 10\nstatements = true\nshards = {shards}\n"
    );
    standings::domain::config::Config::parse(&text).unwrap()
}

/// A sharded board at a later generation (1 → 3 → 1 → 3: "3:1"), at a non-default scale, lost
/// with everything: a write before the restore records nothing (neither the configured layout
/// at generation 0 nor the scale) and is refused, and the restore brings the board back where it
/// was. Before, the write recorded "3", the restore trusted it and brought back generation 0's
/// empty shards (found by the cluster simulation).
#[tokio::test]
async fn a_sharded_board_lost_whole_at_a_later_generation_records_nothing_before_its_restore() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let first = spawn_journaled(scaled(1)).await;
    for i in 0..6 {
        assert_eq!(submit(&first, &format!("s{i}"), &format!("u{}", i % 4), 2 + i).await.0, StatusCode::OK);
    }
    drain(&first, &client, &bucket).await;
    let mut last = None;
    for shards in [3, 1, 3] {
        let deployed = started(spawn_journaled_unborn_on(scaled(shards), first.keys.clone()).await, &client, &bucket).await;
        moved(&deployed, &client, &bucket).await;
        last = Some(deployed);
    }
    let three = last.unwrap();
    let mut conn = three.redis.clone();
    let record: String = redis::cmd("GET").arg(three.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    assert_eq!(record, "3:1");
    let before = reads(&three).await;
    drain(&three, &client, &bucket).await;
    three.lose_written_keys().await;
    let later = started(spawn_journaled_unborn_on(scaled(3), first.keys.clone()).await, &client, &bucket).await;
    let lost = later.keyspace().await;
    let (status, reply) = submit(&later, "after", "u1", 9).await;
    assert_eq!((status, reply["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{reply}");
    assert_eq!(later.keyspace().await, lost, "a refused write records no layout and no scale");
    let restored = restorer(&later, &client, &bucket).restore(Some("game"), far()).await.expect("the restore runs");
    assert_eq!(restored.status, Status::Complete, "{restored:?}");
    let again: Option<String> = redis::cmd("GET").arg(three.keys.board_layout("game")).query_async(&mut conn).await.unwrap();
    assert_eq!(again.as_deref(), Some("3:1"), "the generation S3 says");
    later.set_now(three.now());
    assert_eq!(reads(&later).await, before, "every acknowledged write is back");
}

/// A container that probed the board in its one slot bans a user after a move's switch freed it:
/// the ban's script finds the old guard gone and is refused once (503 `board_restoring`); the
/// next ban probes again and lands in the user's shard. Before, a ban's refusal left the probe in
/// place, so every ban was refused until it expired (30 s): found by the simulation after a
/// restore that recorded the shards.
#[tokio::test]
async fn a_ban_refused_on_a_layout_a_switch_freed_probes_again() {
    ban_after_a_switch(false).await;
}

/// The same when the deployment's record of bans is gone too, so the ban first reads every
/// board's guards for the bans made before the record (decided in Rust, not refused by a
/// script): it forgets the probe of a board whose guard it found unborn. Before, every ban was
/// refused until the probe expired.
#[tokio::test]
async fn a_ban_seeding_the_record_on_a_layout_a_switch_freed_probes_again() {
    ban_after_a_switch(true).await;
}

async fn ban_after_a_switch(record_lost: bool) {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = spawn_journaled(scaled(1)).await;
    assert_eq!(submit(&one, "s0", "u1", 2).await.0, StatusCode::OK);
    let ban = async |user: &str| one.call(Method::POST, &format!("/v1/admin/users/{user}/ban"), "", ADMIN).await;
    assert_eq!(ban("u9").await.0, StatusCode::OK, "probed in the one slot");
    drain(&one, &client, &bucket).await;
    let three = started(spawn_journaled_unborn_on(scaled(3), one.keys.clone()).await, &client, &bucket).await;
    moved(&three, &client, &bucket).await;
    if record_lost {
        let _: () = redis::cmd("DEL").arg(three.keys.catalog().banned_users()).query_async(&mut three.redis.clone()).await.unwrap();
    }
    let (status, reply) = ban("u8").await;
    assert_eq!((status, reply["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{reply}");
    let (status, reply) = ban("u8").await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let shard = three.keys.layout("game", 3).of_user("u8").guard();
    let banned: bool = redis::cmd("HEXISTS").arg(shard).arg("ban|u8").query_async(&mut three.redis.clone()).await.unwrap();
    assert!(banned, "in u8's shard");
}

/// A container that probed the board in its one slot reads its audit log after a move's switch
/// freed that slot: it reads the layout recorded now at once (200, the ban moved into its user's
/// shard's log), not 503 `board_restoring` until its probe expires (from a review of the audit
/// log's fence).
#[tokio::test]
async fn an_audit_read_on_a_layout_a_switch_freed_reads_the_new_one() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = spawn_journaled(scaled(1)).await;
    assert_eq!(submit(&one, "s0", "u1", 2).await.0, StatusCode::OK);
    assert_eq!(one.call(Method::POST, "/v1/admin/users/u9/ban", "", ADMIN).await.0, StatusCode::OK);
    let audit = async || one.call(Method::GET, "/v1/admin/audit?board=game", "", ADMIN).await;
    let (status, before) = audit().await;
    assert_eq!((status, before["entries"].as_array().map(Vec::len)), (StatusCode::OK, Some(1)), "probed in the one slot: {before}");
    drain(&one, &client, &bucket).await;
    let three = started(spawn_journaled_unborn_on(scaled(3), one.keys.clone()).await, &client, &bucket).await;
    moved(&three, &client, &bucket).await;
    let (status, after) = audit().await;
    assert_eq!((status, &after), (StatusCode::OK, &before), "{after}");
}

/// A move over a journal whose objects overlap (a store rolled back and drained again leaves
/// them so: the first object holds lines after the next one's first), in invocations that each
/// move a line and stop: every line moved once, every read as before the move.
#[tokio::test]
async fn a_move_resumed_over_overlapping_objects_moves_every_line_once() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = written_one_slot(6, 6, 1).await;
    drain(&one, &client, &bucket).await;
    standings_tests::journal::store_overlapping_copy(&client, &bucket, "game", 6).await;
    let before = reads(&one).await;
    let two = spawn_journaled_on(game(2), one.keys.clone()).await;
    let jobs = two.journal_jobs(&client, &bucket, Arc::default());
    for invocation in 0.. {
        assert!(invocation < 100, "the move ends");
        let report = jobs.run(json!({"reshard": {"board": "game"}}), chrono::Utc::now() - chrono::Duration::seconds(1)).await.unwrap();
        if report["status"] == "complete" {
            break;
        }
    }
    two.set_now(chrono::Utc::now());
    assert_eq!(reads(&two).await, before, "every read as before the move");
}
