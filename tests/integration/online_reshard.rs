//! A move between layouts while the board serves (docs/scaling.md#changing-shards): writes from
//! the old deploy and the new one go on while the lines move (to the old layout, where the data
//! is), concurrent with each invocation and between them; only the move's last step refuses
//! them (503 `board_resharding`, nothing written). Every write a deploy acknowledged is in the
//! moved board, exactly once, and in the new layout's journal: a restore after the whole
//! deployment is lost brings it back.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use journal::{Restorer, S3Objects, Status};
use serde_json::{Value, json};
use standings::redis::restore::Birth;
use standings::services::journal::births;
use standings_tests::journal::{new_bucket, s3, spawn_journaled_on};
use standings_tests::moves::{far, game, settle as settle_as, submit, sums};
use standings_tests::{TestApp, spawn_journaled};

/// Invocations with writes beside them.
const WRITING_STEPS: usize = 30;

/// A write's outcome: taken (counted in `model`) or refused by the move's last step.
fn settle(model: &mut BTreeMap<String, i64>, write: (&str, i64), answer: (StatusCode, Value)) -> bool {
    settle_as(model, write, answer, &["board_resharding"])
}

#[tokio::test]
async fn writes_go_on_while_a_board_moves_and_wait_only_for_its_last_step() {
    moved_online(false).await;
}

/// A board with no stream when the move starts (restored from S3, which brings none back): its
/// starting point is taken from the clock, and the writes that make the stream again are moved.
#[tokio::test]
async fn a_board_with_no_stream_moves_online_too() {
    moved_online(true).await;
}

async fn moved_online(without_stream: bool) {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = spawn_journaled(game(1, "")).await;
    let mut model: BTreeMap<String, i64> = BTreeMap::new();
    for i in 0..60 {
        let user = format!("u{}", i % 17);
        assert!(settle(&mut model, (&user, 1 + i % 5), submit(&one, &format!("s{i}"), &user, 1 + i % 5).await));
        if i == 30 {
            // Part of the history in S3, the rest in the stream.
            one.journal_jobs(&client, &bucket, Arc::default()).run(json!({"drain": {}}), far()).await.expect("a drain");
        }
    }
    if without_stream {
        one.journal_jobs(&client, &bucket, Arc::default()).run(json!({"drain": {}}), far()).await.expect("a drain");
        let () = redis::cmd("DEL").arg(one.keys.board("game").journal()).query_async(&mut one.redis.clone()).await.unwrap();
    }
    // The new count deployed: its writes go where the data is until the move's switch.
    let four = spawn_journaled_on(game(4, ""), one.keys.clone()).await;
    if !without_stream {
        assert!(settle(&mut model, ("u1", 3), submit(&four, "before-move", "u1", 3).await), "the new deploy writes before the move");
    }
    assert_eq!(sums(&four).await, model);

    // Each invocation below moves a line and stops: rounds go on until one finds nothing new.
    let jobs = four.journal_jobs_rounds(&client, &bucket, 0);
    let (mut taken, mut refused, mut last_steps) = (0, 0, 0);
    for step in 0..400 {
        // Each invocation moves a run and stops (its deadline passed); for 30 of them, with a
        // write from each deploy in flight beside it.
        let run = jobs.run(json!({"reshard": {"board": "game"}}), Utc::now() - Duration::seconds(1));
        // Not beside the first, which takes the starting points (with no stream: from the clock).
        let writes = (1..=WRITING_STEPS).contains(&step);
        let (user, old_id, new_id) = (format!("u{}", step % 17), format!("o{step}"), format!("n{step}"));
        let (report, old_write, new_write) = if writes {
            let (report, old_write, new_write) = tokio::join!(run, submit(&one, &old_id, &user, 2), submit(&four, &new_id, &user, 3));
            (report, Some(old_write), Some(new_write))
        } else {
            (run.await, None, None)
        };
        let report = report.unwrap_or_else(|e| panic!("step {step}: {e:?}"));
        for (score, outcome) in [(2, old_write), (3, new_write)] {
            let Some(outcome) = outcome else { continue };
            if settle(&mut model, (&user, score), outcome) { taken += 1 } else { refused += 1 }
        }
        if report["status"] == "complete" {
            break;
        }
        let last_step = report["last_step"] == true;
        if last_step {
            // Fenced: each deploy's write refused with nothing written.
            last_steps += 1;
            let before = four.keyspace().await;
            for (app, id) in [(&one, format!("fenced-old{step}")), (&four, format!("fenced-new{step}"))] {
                assert!(!settle(&mut model, ("u5", 7), submit(app, &id, "u5", 7).await), "refused in the last step");
            }
            assert_eq!(four.keyspace().await, before, "a refused write writes nothing");
        } else if writes {
            // Between invocations too: taken while the lines move.
            let (status, reply) = submit(&four, &format!("between{step}"), "u2", 1).await;
            assert!(settle(&mut model, ("u2", 1), (status, reply)), "step {step}");
        }
        assert_eq!(sums(&four).await, model, "step {step}: reads answer the board as written so far");
    }
    assert!((1..=3).contains(&last_steps), "the last step only is fenced: {last_steps} invocations");
    assert_eq!((taken, refused), (2 * WRITING_STEPS, 0), "every write made while the lines moved was taken");
    assert_eq!(sums(&four).await, model, "every write taken is in the moved board, once");
    let (status, after) = submit(&four, "after", "u3", 4).await;
    assert!(settle(&mut model, ("u3", 4), (status, after)), "writes resume after the switch");
    // The old deploy writes where the data is now, once it probed the new layout.
    let (status, old_after) = submit(&one, "old-after", "u4", 5).await;
    let (status, old_after) = if status == StatusCode::OK { (status, old_after) } else { submit(&one, "old-after", "u4", 5).await };
    assert!(settle(&mut model, ("u4", 5), (status, old_after)), "the old deploy's writes land in the new layout");
    assert_eq!(sums(&four).await, model);

    // The whole deployment lost: the new layout's journal holds every write, those taken
    // during the move included.
    jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    four.lose_written_keys().await;
    let restorer = Restorer::new(four.config.clone(), four.keys.clone(), four.store.clone(), S3Objects::new(client, &bucket));
    let restored = restorer.restore(Some("game"), far()).await.expect("the restore runs");
    assert_eq!(restored.status, Status::Complete, "{restored:?}");
    assert_eq!(sums(&four).await, model, "restored from the new layout's journal alone");
}

/// A board of two shards holding 40 submissions, deployed with three; its jobs.
async fn two_to_three() -> (TestApp, TestApp, journal::Jobs<S3Objects>, BTreeMap<String, i64>) {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let (two, three, model) = two_deployed_with_three().await;
    let jobs = three.journal_jobs(&client, &bucket, Arc::default());
    (two, three, jobs, model)
}

async fn two_deployed_with_three() -> (TestApp, TestApp, BTreeMap<String, i64>) {
    let two = spawn_journaled(game(2, "")).await;
    let mut model = BTreeMap::new();
    for i in 0..40 {
        let user = format!("u{}", i % 13);
        assert!(settle(&mut model, (&user, 1 + i % 4), submit(&two, &format!("s{i}"), &user, 1 + i % 4).await));
    }
    let three = spawn_journaled_on(game(3, ""), two.keys.clone()).await;
    three.set_now(two.now());
    (two, three, model)
}

async fn fence_of(app: &TestApp, shard: &standings::redis::keys::BoardKeys) -> Option<String> {
    redis::cmd("HGET").arg(shard.guard()).arg("fence").query_async(&mut app.redis.clone()).await.unwrap()
}

/// A fence a killed invocation left on some old shards only (its `HSETNX`s are one a shard) is
/// put on all of them by the next: no write lands on an old shard after the last step read it.
#[tokio::test]
async fn a_fence_left_on_some_old_shards_is_completed_by_the_next_invocation() {
    let (two, three, jobs, mut model) = two_to_three().await;
    let past = || Utc::now() - Duration::seconds(1);
    let first = jobs.run(json!({"reshard": {"board": "game"}}), past()).await.unwrap();
    assert_eq!((first["status"].as_str(), first["last_step"].as_bool()), (Some("in_progress"), Some(false)), "{first}");
    let old = two.keys.layout("game", 2);
    let () = redis::cmd("HSET").arg(old.shard(0).guard()).arg("fence").arg("moving").query_async(&mut two.redis.clone()).await.unwrap();
    let next = jobs.run(json!({"reshard": {"board": "game"}}), past()).await.unwrap();
    assert_eq!(next["last_step"], true, "{next}");
    assert_eq!(fence_of(&two, &old.shard(1)).await.as_deref(), Some("moving"), "the other old shard fenced too");
    let user = (0..).map(|u| format!("w{u}")).find(|user| old.shard_of(user) == 1).unwrap();
    assert!(!settle(&mut model, (&user, 5), submit(&three, "late", &user, 5).await), "refused on the shard fenced late");
    loop {
        if jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap()["status"] == "complete" {
            break;
        }
    }
    assert_eq!(sums(&three).await, model);
}

/// A move begun by a release that fenced it from its first step (no rounds recorded) moves
/// every line, as that release did, rather than take its rounds from now.
#[tokio::test]
async fn a_move_begun_fenced_by_an_older_release_moves_every_line() {
    let (two, three, jobs, model) = two_to_three().await;
    for shard in two.keys.layout("game", 2).all() {
        let () = redis::cmd("HSET").arg(shard.guard()).arg("fence").arg("moving").query_async(&mut two.redis.clone()).await.unwrap();
    }
    let report = jobs.run(json!({"reshard": {"board": "game"}}), far()).await.expect("the move goes on");
    assert_eq!((report["status"].as_str(), report["moved"].as_u64()), (Some("complete"), Some(40)), "{report}");
    assert_eq!(sums(&three).await, model);
}

/// Reads go on through a move's last step and its switch, from either deploy: each new shard
/// is settled and born before the new layout is recorded, so no read finds a shard of the
/// layout it reads still fenced (before: the record came first, and reads answered 503
/// `board_restoring` while the new shards were settled one by one, 190 of 1,100 in the bench;
/// a board this small settles too fast for a read to fall in that window, so this guards the
/// order and the bench's `online-reshard` measures it).
#[tokio::test]
async fn reads_are_answered_through_a_moves_switch() {
    let (two, three, jobs, model) = two_to_three().await;
    let (report, reads) = beside_the_move(&jobs, |i| {
        let app = if i % 2 == 0 { &two } else { &three };
        async move { sums(app).await }
    })
    .await;
    assert_eq!(report.expect("the move runs")["status"], "complete");
    assert!(reads.len() > 2, "reads ran beside the move: {}", reads.len());
    for (i, read) in reads.iter().enumerate() {
        assert_eq!(read, &model, "read {i}: the board as it was written");
    }
    assert_eq!(sums(&three).await, model);
    assert_eq!(sums(&two).await, model);
}

/// The move in one invocation with `beside(i)` awaited again and again, i = 0, 1, …, until it
/// ends: its report and what each call gave.
async fn beside_the_move<T, F: std::future::Future<Output = T>>(
    jobs: &journal::Jobs<S3Objects>,
    mut beside: impl FnMut(i64) -> F,
) -> (Result<Value, journal::JournalError>, Vec<T>) {
    let done = AtomicBool::new(false);
    let run = async {
        let report = jobs.run(json!({"reshard": {"board": "game"}}), far()).await;
        done.store(true, Ordering::SeqCst);
        report
    };
    let calls = async {
        let mut given = Vec::new();
        while !done.load(Ordering::SeqCst) {
            given.push(beside(given.len() as i64).await);
        }
        given
    };
    tokio::join!(run, calls)
}

/// A move in one invocation with writes from both deploys beside it the whole time: its compare
/// of every period set runs while they go on, and the fenced one looks only at what the lines
/// moved since wrote; every write taken is in the moved board once, and both periods compared.
#[tokio::test]
async fn a_move_beside_writes_compares_while_they_go_on_and_then_only_what_they_wrote() {
    let (two, three, jobs, mut model) = two_to_three().await;
    let (report, outcomes) = beside_the_move(&jobs, |i| {
        let (user, app) = (format!("w{}", i % 23), if i % 2 == 0 { &two } else { &three });
        async move { (user.clone(), 1 + i % 3, submit(app, &format!("beside{i}"), &user, 1 + i % 3).await) }
    })
    .await;
    let report = report.expect("the move runs");
    assert_eq!((report["status"].as_str(), report["periods_checked"].as_u64()), (Some("complete"), Some(2)), "{report}");
    // A write of the old deploy that finds the old layout freed at the switch answers
    // `board_restoring` once (docs/scaling.md#changing-shards).
    let codes = ["board_resharding", "board_restoring"];
    let taken = outcomes
        .into_iter()
        .filter(|(user, score, outcome)| settle_as(&mut model, (user.as_str(), *score), outcome.clone(), &codes))
        .count();
    assert!(taken > 0, "writes were taken beside the move");
    assert_eq!(sums(&three).await, model, "every write taken is in the moved board, once");
}

/// A member the two layouts hold differently with no line to say why (here the old layout's,
/// changed by hand after its lines), found by the compare made while writes go on and not
/// written since, is looked at again by the fenced one: the move stops there, the board
/// fenced, as a full compare stops it.
#[tokio::test]
async fn a_difference_the_compare_before_the_fence_found_stops_the_move() {
    let (two, _three, jobs, _) = two_to_three().await;
    let old = two.keys.layout("game", 2);
    let all = old.shard(old.shard_of("u5")).relative(":z:all:all");
    let _: f64 = redis::cmd("ZINCRBY").arg(&all).arg(1).arg("u5").query_async(&mut two.redis.clone()).await.unwrap();
    let refused = jobs.run(json!({"reshard": {"board": "game"}}), far()).await.expect_err("the move stops at the difference");
    let text = format!("{refused:?}");
    assert!(text.contains("u5") && text.contains("all:all"), "{text}");
    for shard in old.all() {
        assert_eq!(fence_of(&two, &shard).await.as_deref(), Some("moving"), "the board stays fenced");
    }
}

/// An old shard that never took a write and was never judged (no guard: its start's judgement
/// failed) is judged by the move before its starting point makes it a stream: born then, its
/// empty stream is not taken for a history by a later start, which would refuse its writes as
/// lost for the rest of the move (found by review).
#[tokio::test]
async fn an_old_shard_never_written_is_born_not_lost_once_a_move_takes_its_point() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let two = spawn_journaled(game(2, "")).await;
    let old = two.keys.layout("game", 2);
    let mut model = BTreeMap::new();
    let users: Vec<String> = (0..).map(|u| format!("u{u}")).filter(|u| old.shard_of(u) == 0).take(6).collect();
    for (i, user) in users.iter().enumerate() {
        assert!(settle(&mut model, (user, 3), submit(&two, &format!("s{i}"), user, 3).await));
    }
    let () = redis::cmd("DEL").arg(old.shard(1).guard()).query_async(&mut two.redis.clone()).await.unwrap();
    let three = spawn_journaled_on(game(3, ""), two.keys.clone()).await;
    let jobs = three.journal_jobs(&client, &bucket, Arc::default());
    let first = jobs.run(json!({"reshard": {"board": "game"}}), Utc::now() - Duration::seconds(1)).await.unwrap();
    assert_eq!(first["status"], "in_progress", "{first}");
    let found = births::at_start(&three.config, &three.keys, &three.store, &S3Objects::new(client.clone(), &bucket)).await;
    assert!(found.iter().all(|(_, birth)| !matches!(birth, Ok(Birth::History))), "{found:?}");
    let user = (0..).map(|u| format!("v{u}")).find(|u| old.shard_of(u) == 1).unwrap();
    assert!(settle(&mut model, (&user, 2), submit(&three, "late", &user, 2).await), "a write to the shard never written is taken");
    for _ in 0..50 {
        if jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap()["status"] == "complete" {
            break;
        }
    }
    assert_eq!(sums(&three).await, model);
}

/// A loss found while the move's last step is under way (a new shard already holding a line of
/// the second old shard's range), then a restore, which lifts every old shard's fence: the
/// old layout takes writes again, and the move goes on from rounds. Its next round took the
/// last step's places again, so a write the restore let into the first old shard compared
/// below the new shard's checkpoint and was skipped (the compare then refused the move, the
/// board fenced for good). The last step's bound is recorded with its fence, and a move found
/// unfenced after it began counts that step as a round: later writes go past it.
#[tokio::test]
async fn writes_after_a_restore_that_stopped_a_moves_last_step_are_moved() {
    stopped_last_step_then_restored(false).await;
}

/// The same with the lost old shard restored alone (`{"restore": {"board": "<its journal>"}}`):
/// the other stays fenced `moving`, and the next invocation fences the restored one again; the
/// writes it took meanwhile are past the recorded bound, and are moved too.
#[tokio::test]
async fn writes_after_a_restore_of_one_old_shard_during_a_moves_last_step_are_moved() {
    stopped_last_step_then_restored(true).await;
}

async fn stopped_last_step_then_restored(only_the_lost_shard: bool) {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let (two, three, mut model) = two_deployed_with_three().await;
    let jobs = three.journal_jobs_rounds(&client, &bucket, 0);
    let (old, new) = (two.keys.layout("game", 2), three.keys.layout("game", 3));
    // `a` in the second old shard and new shard t; `b` in the first old shard and the same t.
    let a = (0..).map(|u| format!("a{u}")).find(|user| old.shard_of(user) == 1).unwrap();
    let t = new.shard_of(&a);
    let b = (0..).map(|u| format!("b{u}")).find(|user| old.shard_of(user) == 0 && new.shard_of(user) == t).unwrap();
    let zero = (0..).map(|u| format!("z{u}")).find(|user| old.shard_of(user) == 0).unwrap();
    let past = || Utc::now() - Duration::seconds(1);
    let reshard = |deadline| jobs.run(json!({"reshard": {"board": "game"}}), deadline);
    assert_eq!(reshard(past()).await.unwrap()["last_step"], false, "round 0 taken, a line moved");
    for (id, user) in [("w0", &zero), ("w1", &a), ("w2", &a)] {
        assert!(settle(&mut model, (user, 2), submit(&two, id, user, 2).await));
    }
    // The fence of the next invocation, begun on one shard (a killed invocation's).
    let () = redis::cmd("HSET").arg(old.shard(0).guard()).arg("fence").arg("moving").query_async(&mut two.redis.clone()).await.unwrap();
    let checkpoint = || async {
        let through: Option<String> =
            redis::cmd("HGET").arg(new.shard(t).reshard_checkpoint()).arg("through").query_async(&mut three.redis.clone()).await.unwrap();
        through.unwrap_or_default()
    };
    // Round 0's lines, then the last step's (index 2 for the first old shard, 3 for the second).
    for invocation in 0.. {
        assert!(invocation < 200, "the last step reaches the second old shard");
        let report = reshard(past()).await.unwrap();
        assert_eq!(report["status"], "in_progress", "{report}");
        if checkpoint().await.starts_with("3/") {
            assert_eq!(report["last_step"], true, "{report}");
            break;
        }
    }
    // A loss found meanwhile (the fence `fence_lost` writes), then the runbook's restore.
    let () = redis::cmd("HSET")
        .arg(old.shard(1).guard())
        .arg("fence")
        .arg(1)
        .arg("lost")
        .arg(1)
        .query_async(&mut two.redis.clone())
        .await
        .unwrap();
    let refused = reshard(far()).await.unwrap_err();
    assert!(refused.to_string().contains("restore it, then move it"), "{refused}");
    assert_eq!(refused.code(), "board_restoring", "{refused}");
    let restorer = Restorer::new(three.config.clone(), three.keys.clone(), three.store.clone(), S3Objects::new(client.clone(), &bucket));
    let restored = if only_the_lost_shard { old.journals()[1].clone() } else { "game".to_owned() };
    assert_eq!(restorer.restore(Some(&restored), far()).await.expect("the restore runs").status, Status::Complete);
    assert_eq!(fence_of(&two, &old.shard(1)).await, None, "the restore lifted the fence");
    let fenced = fence_of(&two, &old.shard(0)).await;
    assert_eq!(fenced.as_deref(), only_the_lost_shard.then_some("moving"), "the other shard's fence");
    // A write to an old shard the restore unfenced.
    let (user, points) = if only_the_lost_shard { (&a, 5) } else { (&b, 7) };
    assert!(settle(&mut model, (user, points), submit(&two, "after-restore", user, points).await));
    for invocation in 0.. {
        assert!(invocation < 20, "the move ends");
        if reshard(far()).await.unwrap()["status"] == "complete" {
            break;
        }
    }
    assert_eq!(sums(&three).await, model);
}
