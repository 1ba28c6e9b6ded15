//! Issue 58's acceptance (a score board moved to shards and a new `max_score` at once: the last
//! test). For rule boards: one board moved 1 → 8 → 3 → 1 while it takes events,
//! batches, corrections, bans and voids between the move's invocations (each stopped by its
//! deadline after a run), read after every invocation, through the deploy on the old count and
//! the one on the new, against its twin in one slot that took the same writes
//! (`sharded_rules`' operations; a board configured twice fans each event out to both). A write
//! the move's last step refuses (503 `board_resharding` for the whole write, the twin's part
//! taken) is sent again once the step is done, before anything else and at the same instant, as
//! a client retries: the twin answers it as the duplicate it is, the moved board takes it once.
//! Writes alternate between the deploys while the lines move, and each write's answers on the
//! two boards are the same.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use chrono::Duration;
use journal::S3Objects;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};
use standings::archive::objects::journal_objects;
use standings::domain::config::Config;
use standings_tests::journal::{new_bucket, s3, spawn_journaled_on};
use standings_tests::{ADMIN, TestApp, as_either_board, at, spawn_journaled};

use crate::sharded_rules::{Op, admin_write, batch, board, both, event, ops, same_reads, step};

fn config(shards: u32) -> Config {
    Config::parse(&format!("{}{}", board("solo", 1), board("wide", shards))).unwrap()
}

fn resharding(status: StatusCode, body: &Value) -> bool {
    status == StatusCode::SERVICE_UNAVAILABLE && body["error"]["code"] == "board_resharding"
}

/// `op` sent while the board moves: false when the move's last step refused it on the moving
/// board (the whole write answers 503 then, the twin's part taken: it is sent again, `retry`);
/// else both boards' answers are the same (but for the twin's `duplicate` on a retry).
async fn sent_while_moving(app: &TestApp, voids: &axum::Router, op: &Op, index: usize, retry: bool) -> bool {
    match op {
        Op::Event { id, user, review, target, active, advance } => {
            app.set_now(app.now() + Duration::seconds(*advance));
            let (status, body) = app.event(event(*id, *user, *review, *target, *active)).await;
            assert!(status.as_u16() < 500 || resharding(status, &body), "{op:?}: {body}");
            if status == StatusCode::OK {
                let (solo, wide) = both(&body).unwrap_or_else(|e| panic!("{op:?}: {e}"));
                assert_eq!(solo, wide, "{op:?}");
            }
            !resharding(status, &body)
        }
        Op::Batch(items) => {
            let (status, body) = app.post("/v1/events:batch", &batch(items)).await;
            assert_eq!(status, StatusCode::OK, "{op:?}: {body}");
            let results = body["results"].as_array().unwrap();
            for result in results.iter().filter(|result| result["error"].is_null()) {
                let (solo, wide) = both(result).unwrap_or_else(|e| panic!("{op:?}: {e}"));
                assert_eq!(solo, wide, "{op:?}");
            }
            !results.iter().any(|result| result["error"]["code"] == "board_resharding")
        }
        Op::Correct { .. } | Op::Void { .. } => {
            let (mut taken, mut answers) = (true, Vec::new());
            for name in ["solo", "wide"] {
                let (status, answer) = admin_write(app, voids, op, index, name).await;
                assert!(status.as_u16() < 500 && status != StatusCode::BAD_REQUEST || resharding(status, &answer), "{op:?}: {answer}");
                taken &= !resharding(status, &answer);
                let mut answer = as_either_board(answer, false);
                // A retry's twin answers the duplicate it is; the moved board takes it once.
                let duplicate = answer.as_object_mut().and_then(|fields| fields.remove("duplicate"));
                answers.push((status, answer, duplicate));
            }
            if taken {
                assert_eq!((&answers[0].0, &answers[0].1), (&answers[1].0, &answers[1].1), "{op:?}");
                let (twin, moved) = (answers[0].2.clone(), answers[1].2.clone());
                match retry && moved.is_some() {
                    true => assert_eq!((twin, moved), (Some(json!(true)), Some(json!(false))), "{op:?}"),
                    false => assert_eq!(twin, moved, "{op:?}"),
                }
            }
            taken
        }
        Op::Ban { user, banned } => {
            let method = if *banned { Method::POST } else { Method::DELETE };
            let (status, body) = app.call(method, &format!("/v1/admin/users/u{user}/ban"), "{}".to_owned(), ADMIN).await;
            assert!(status == StatusCode::OK || resharding(status, &body), "{op:?}: {body}");
            status == StatusCode::OK
        }
    }
}

/// The same operation sent again at the instant it was first sent (its clock not moved on).
fn again(op: &Op) -> Op {
    match op {
        Op::Event { id, user, review, target, active, .. } => {
            Op::Event { id: *id, user: *user, review: *review, target: *target, active: *active, advance: 0 }
        }
        other => other.clone(),
    }
}

#[tokio::test]
async fn a_rule_board_moved_one_eight_three_one_while_written_reads_as_its_twin_in_one_slot() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let mut runner = TestRunner::deterministic();
    let mut generated = || ops().new_tree(&mut runner).expect("a sequence").current();
    // The writes sent to a last step after the sequence ran out: from a runner of their own, so
    // how many a machine's speed asks for leaves the later moves' sequences as they are.
    let mut extra_runner = TestRunner::deterministic();
    let mut extra = || ops().new_tree(&mut extra_runner).expect("a sequence").current().remove(0);
    let mut app = spawn_journaled(config(1)).await;
    app.set_now(at("2026-11-22T08:00:00Z"));
    let (mut index, mut during, mut resent) = (0, 0, 0);
    for op in generated() {
        step(&app, &app.void_router(&client, Some(&bucket), 30), &op, index).await.unwrap_or_else(|e| panic!("{op:?}: {e}"));
        index += 1;
    }
    for target in [8, 3, 1] {
        // Back to 1 is back to the board's own slot, which it left in the first move: its
        // journal objects there stay (another time's), and the move takes the next generation.
        // Part of the history in S3, the rest in the streams.
        app.journal_jobs(&client, &bucket, Arc::default())
            .run(json!({"drain": {}}), chrono::Utc::now() + Duration::minutes(5))
            .await
            .unwrap();
        let moved = spawn_journaled_on(config(target), app.keys.clone()).await;
        moved.set_now(app.now());
        // The first move is fenced once its first round is moved, whatever the machine's speed:
        // that round's last line and the last step's first are a line apart, so the step spans
        // invocations and meets a write (the later moves fence when their rounds find it so).
        let jobs = match target {
            8 => moved.journal_jobs_rounds(&client, &bucket, i64::MAX),
            _ => moved.journal_jobs(&client, &bucket, Arc::default()),
        };
        let voids = moved.void_router(&client, Some(&bucket), 30);
        let mut writes = generated().into_iter();
        // A write refused by the last step, with the index its ids were made from.
        let mut refused: Option<(Op, usize)> = None;
        for invocation in 0.. {
            assert!(invocation < 300, "the move to {target} did not finish");
            let report = jobs.run(json!({"reshard": {"board": "wide"}}), chrono::Utc::now() - Duration::seconds(1)).await.unwrap();
            let retry = refused.is_some();
            // The later moves' rounds may outlast the writes (each invocation here moves one line;
            // a round ends past `ROUND_MS` on a slow machine), fencing once they stop: their last
            // step is then sent one more write at each of its invocations, refused and sent again.
            if writes.len() == 0 && report["last_step"] == true && report["status"] != "complete" {
                writes = vec![extra()].into_iter();
            }
            let op = match refused.take() {
                Some((op, at)) => {
                    resent += 1;
                    Some((again(&op), at))
                }
                None => writes.next().map(|op| {
                    (index, during) = (index + 1, during + 1);
                    (op, index)
                }),
            };
            // Writes from either deploy while the lines move (both write where the data is); a
            // write sent again, and every write once the move is done, from the new one.
            let writer = if invocation % 2 == 1 && !retry && report["status"] != "complete" { &app } else { &moved };
            if let Some((op, at)) = op
                && !sent_while_moving(writer, &voids, &op, at, retry).await
            {
                refused = Some((op, at));
            }
            let now = writer.now();
            app.set_now(now);
            moved.set_now(now);
            // A write refused on the moving board is in the twin already: compared once resent.
            if refused.is_none() {
                for (deploy, reader) in [("old", &app), ("new", &moved)] {
                    reader.set_now(moved.now());
                    same_reads(reader).await.unwrap_or_else(|e| panic!("to {target}, invocation {invocation}, {deploy} deploy: {e}"));
                }
            }
            if report["status"] == "complete" && refused.is_none() {
                break;
            }
        }
        for op in writes {
            index += 1;
            step(&moved, &voids, &op, index).await.unwrap_or_else(|e| panic!("after the move to {target}, {op:?}: {e}"));
        }
        app = moved;
    }
    // Back in one slot in the next generation; the first generation's objects left as they were.
    let record: String = redis::cmd("GET").arg(app.keys.board_layout("wide")).query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(record, "1:1");
    let objects = S3Objects::new(client.clone(), &bucket);
    assert!(!journal_objects(&objects, app.keys.prefix(), "wide").await.unwrap().is_empty(), "another time's objects stay");
    // Redis lost (after a drain: the twin's history is in S3 then too): the restore finds the
    // board in its second generation by S3's record alone, and brings it back equal to the twin.
    app.journal_jobs(&client, &bucket, Arc::default()).run(json!({"drain": {}}), chrono::Utc::now() + Duration::minutes(5)).await.unwrap();
    app.lose_written_keys().await;
    let restorer = journal::Restorer::new(app.config.clone(), app.keys.clone(), app.store.clone(), objects);
    let restored = restorer.restore(None, chrono::Utc::now() + Duration::minutes(5)).await.unwrap();
    assert_eq!(restored.status, journal::Status::Complete, "{restored:?}");
    same_reads(&app).await.unwrap_or_else(|e| panic!("restored after the moves: {e}"));
    assert!(during >= 9 && resent >= 1, "writes during the moves: {during}, sent again after a last step's refusal: {resent}");
}

/// Two score boards, `solo` in one slot at the default scale and `wide` on `shards` with
/// `max` (a `max_score` line or none).
fn score_boards(shards: u32, max: &str) -> Config {
    let board = |name: &str, shards: u32, max: &str| {
        format!(
            "[[boards]]\nname = \"{name}\"\nkind = \"scores\"\nkeep = \"best\"\ntimezone = \"UTC\"\nperiods = [\"day\", \"all\"]\ntop = 10\nshards = {shards}\n{max}\n"
        )
    };
    Config::parse(&format!("{}{}", board("solo", 1, ""), board("wide", shards, max))).unwrap()
}

/// Submission `n`: user `n % 12`'s score, never equal to another user's (its last two digits
/// name the user), so the twins order the same whatever each scale's tie step.
fn submission(n: usize) -> (String, String, i64) {
    (format!("s{n}"), format!("u{}", n % 12), ((n * 7919) % 500) as i64 * 100 + (n % 12) as i64)
}

/// Submission `n` to both boards through `app`: whether `wide` took it (the twin always does;
/// sent `again`, it answers the duplicate it is).
async fn submit_both(app: &TestApp, n: usize, again: bool) -> bool {
    let (id, user, score) = submission(n);
    let body = json!({"event_id": id, "user_id": user, "score": score});
    let (status, solo) = app.post("/v1/boards/solo/scores", &body).await;
    assert_eq!(status, StatusCode::OK, "{solo}");
    let (status, wide) = app.post("/v1/boards/wide/scores", &body).await;
    let moving = status == StatusCode::SERVICE_UNAVAILABLE
        && ["board_restoring", "board_resharding"].contains(&wide["error"]["code"].as_str().unwrap_or_default());
    assert!(status == StatusCode::OK || moving, "{wide}");
    if status == StatusCode::OK {
        let (mut solo, mut wide) = (as_either_board(solo, true), as_either_board(wide, true));
        if again {
            assert_eq!((solo["duplicate"].as_bool(), wide["duplicate"].as_bool()), (Some(true), Some(false)), "submission {n}");
            (solo["duplicate"], wide["duplicate"]) = (Value::Null, Value::Null);
        }
        assert_eq!(solo, wide, "submission {n}");
    }
    status == StatusCode::OK
}

/// What both score boards answer, the same: their tops, players' standings, ranks and
/// distributions.
async fn same_scores(app: &TestApp) -> Result<(), String> {
    let mut paths: Vec<String> = ["all", "day"].iter().map(|period| format!("top?period={period}&limit=20")).collect();
    paths.extend((0..12).step_by(5).map(|u| format!("users/u{u}?period=all&around=2")));
    paths.push("distribution?period=all&buckets=4".into());
    for path in paths {
        let (solo_status, solo) = app.get(&format!("/v1/boards/solo/{path}")).await;
        let (wide_status, wide) = app.get(&format!("/v1/boards/wide/{path}")).await;
        if (solo_status, as_either_board(solo.clone(), false)) != (wide_status, as_either_board(wide.clone(), false)) {
            return Err(format!("{path}: solo {solo_status} {solo}, wide {wide_status} {wide}"));
        }
    }
    Ok(())
}

/// Issue 58's acceptance for a `max_score` change: a score board at the default scale in one
/// slot moved to 4 shards and 4,194,303 in one move while submissions go on (taken at the held
/// scale while the lines move, refused by the moving board in its last step only, then sent
/// again as a client retries), read after every invocation through the deploy on the old
/// configuration and the one on the new, against its twin in one slot that took the same
/// submissions and never moved.
#[tokio::test]
async fn a_score_board_moved_to_shards_and_a_new_max_score_while_written_reads_as_its_twin() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let old = spawn_journaled(score_boards(1, "")).await;
    old.set_now(at("2026-11-22T08:00:00Z"));
    for n in 0..30 {
        assert!(submit_both(&old, n, false).await, "before the move");
    }
    old.journal_jobs(&client, &bucket, Arc::default()).run(json!({"drain": {}}), chrono::Utc::now() + Duration::minutes(5)).await.unwrap();
    let new = spawn_journaled_on(score_boards(4, "max_score = 4194303"), old.keys.clone()).await;
    new.set_now(old.now());
    let jobs = new.journal_jobs(&client, &bucket, Arc::default());
    let (mut n, mut pending, mut taken, mut finished) = (30, None, 0, None);
    for invocation in 0.. {
        assert!(invocation < 300, "the move did not finish");
        let report = jobs.run(json!({"reshard": {"board": "wide"}}), chrono::Utc::now() - Duration::seconds(1)).await.unwrap();
        // Each invocation moves a line (its deadline passed): a write every third lets it catch up.
        let writer = if invocation % 2 == 1 { &old } else { &new };
        if invocation % 3 == 0 || pending.is_some() {
            let again = pending.is_some();
            let sent = pending.take().unwrap_or_else(|| {
                n += 1;
                n
            });
            match submit_both(writer, sent, again).await {
                true => taken += 1,
                false => pending = Some(sent),
            }
        }
        if pending.is_none() {
            for (deploy, reader) in [("old", &old), ("new", &new)] {
                same_scores(reader).await.unwrap_or_else(|e| panic!("invocation {invocation}, {deploy} deploy: {e}"));
            }
        }
        // The invocation that finished the move says what it re-encoded (one after it, run while
        // a write refused at the switch is sent again, finds nothing to move).
        if report["status"] == "complete" && finished.is_none() {
            finished = Some(report.clone());
        }
        if report["status"] == "complete" && pending.is_none() {
            let finished = finished.take().expect("the move finished");
            assert_eq!(finished["max_score"], json!({"from": standings::domain::tiebreak::MAX_SCORE, "to": 4_194_303}), "{finished}");
            break;
        }
        // A re-encode switches once the new generation's journal is whole in S3.
        jobs.run(json!({"drain": {}}), chrono::Utc::now() + Duration::minutes(5)).await.expect("a drain");
    }
    assert!(taken >= 10, "the moving board took writes while its lines moved: {taken}");
    for more in n + 1..n + 20 {
        assert!(submit_both(&new, more, false).await, "after the move");
    }
    same_scores(&new).await.unwrap();
}
