//! A move to another `max_score` while the board serves (docs/boards.md#changing-max_score,
//! issue 58): writes from the old deploy and the new one go on at the scale the board holds while
//! the lines move and are re-encoded; only the move's last step refuses them (503
//! `board_resharding`), and a score only the new `max_score` takes waits (503
//! `board_scale_changed`) until the switch. Here with its shards changed in the same move.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use journal::{Restorer, S3Objects, Status};
use serde_json::{Value, json};
use standings::domain::tiebreak::MAX_SCORE;
use standings_tests::journal::{new_bucket, s3, spawn_journaled_on};
use standings_tests::moves::{far, game, settle, submit, sums};
use standings_tests::{TestApp, spawn_journaled};

/// Invocations with writes beside them.
const WRITING_STEPS: usize = 20;
/// The old deploy's `max_score`; the new one's is the default.
const OLD_MAX: i64 = 4_194_303;

#[tokio::test]
async fn a_max_score_move_goes_on_beside_writes_and_waits_only_for_its_last_step() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let old = spawn_journaled(game(1, &format!("max_score = {OLD_MAX}"))).await;
    let mut model: BTreeMap<String, i64> = BTreeMap::new();
    for i in 0..40 {
        let user = format!("u{}", i % 13);
        assert!(settle(&mut model, (&user, 1 + i % 5), submit(&old, &format!("s{i}"), &user, 1 + i % 5).await, &[]));
        if i == 20 {
            old.journal_jobs(&client, &bucket, Arc::default()).run(json!({"drain": {}}), far()).await.expect("a drain");
        }
    }
    // The default `max_score` and four shards deployed: writes go on where the data is, at the
    // scale it holds; one only the new scale takes waits, nothing written.
    let new = spawn_journaled_on(game(4, ""), old.keys.clone()).await;
    assert!(settle(&mut model, ("u1", 3), submit(&new, "before-move", "u1", 3).await, &[]), "the new deploy writes before the move");
    let state = new.keyspace().await;
    let (status, waits) = submit(&new, "high", "u7", OLD_MAX + 1).await;
    assert_eq!((status, waits["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_scale_changed")), "{waits}");
    assert_eq!(new.keyspace().await, state, "a write that waits writes nothing");
    assert_eq!(sums(&new).await, model);

    let jobs = new.journal_jobs_rounds(&client, &bucket, 0);
    let (mut taken, mut last_steps) = (0, 0);
    let mut report = Value::Null;
    for step in 0..400 {
        // Each invocation moves a run and stops (its deadline passed); for some, with a write
        // from each deploy beside it.
        let run = jobs.run(json!({"reshard": {"board": "game"}}), Utc::now() - Duration::seconds(1));
        let writes = (1..=WRITING_STEPS).contains(&step);
        let (user, old_id, new_id) = (format!("u{}", step % 13), format!("o{step}"), format!("n{step}"));
        let (ran, outcomes) = if writes {
            let (ran, old_write, new_write) = tokio::join!(run, submit(&old, &old_id, &user, 2), submit(&new, &new_id, &user, 3));
            (ran, vec![(2, old_write), (3, new_write)])
        } else {
            (run.await, Vec::new())
        };
        report = ran.unwrap_or_else(|e| panic!("step {step}: {e:?}"));
        for (score, outcome) in outcomes {
            assert!(settle(&mut model, (&user, score), outcome, &[]), "step {step}: a write beside the lines moving is taken");
            taken += 1;
        }
        if report["status"] == "complete" {
            break;
        }
        if report["last_step"] == true {
            last_steps += 1;
            let before = new.keyspace().await;
            for (app, id) in [(&old, format!("fenced-old{step}")), (&new, format!("fenced-new{step}"))] {
                assert!(!settle(&mut model, ("u5", 7), submit(app, &id, "u5", 7).await, &["board_resharding"]), "refused in the last step");
            }
            assert_eq!(new.keyspace().await, before, "a refused write writes nothing");
        } else if writes {
            assert!(settle(&mut model, ("u2", 1), submit(&new, &format!("between{step}"), "u2", 1).await, &[]), "step {step}");
        }
        assert_eq!(sums(&new).await, model, "step {step}: reads answer the board as written so far, at its held scale");
    }
    assert_eq!(report["status"], "complete", "{report}");
    assert_eq!((&report["from"], &report["to"]), (&json!(1), &json!(4)), "{report}");
    assert_eq!(report["max_score"], json!({"from": OLD_MAX, "to": MAX_SCORE}), "{report}");
    assert!((1..=3).contains(&last_steps), "the last step only is fenced: {last_steps} invocations");
    assert_eq!(taken, 2 * WRITING_STEPS, "every write made while the lines moved was taken");
    assert_eq!(sums(&new).await, model, "every write taken is in the re-encoded board, once");
    let mut conn = new.redis.clone();
    let records: (Option<String>, Option<i64>) =
        redis::pipe().get(new.keys.board_layout("game")).get(new.keys.board_scale("game")).query_async(&mut conn).await.unwrap();
    assert_eq!(records, (Some("4:1".to_owned()), Some(MAX_SCORE)), "four shards of the next generation, at the new scale");

    // The score that waited is taken now; the old deploy writes at the scale the board holds.
    assert!(settle(&mut model, ("u7", OLD_MAX + 1), submit(&new, "high", "u7", OLD_MAX + 1).await, &[]), "taken after the switch");
    let (status, reply) = submit(&old, "old-after", "u4", 5).await;
    let outcome = if status == StatusCode::OK { (status, reply) } else { submit(&old, "old-after", "u4", 5).await };
    assert!(settle(&mut model, ("u4", 5), outcome, &[]), "the old deploy writes into the new layout, at its scale");
    assert_eq!(sums(&new).await, model);
    assert_eq!(sums(&old).await, model, "the old deploy reads the board at the scale it holds");
    let verify = jobs.run(json!({"verify": {"board": "game"}}), far()).await.expect("a verify");
    assert_eq!(verify["mismatches"], 0, "every moved line replays at the new scale as the move wrote it: {verify}");

    // The whole deployment lost: the new generation's journal holds every write.
    jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    new.lose_written_keys().await;
    let restorer = Restorer::new(new.config.clone(), new.keys.clone(), new.store.clone(), S3Objects::new(client, &bucket));
    let restored = restorer.restore(Some("game"), far()).await.expect("the restore runs");
    assert_eq!(restored.status, Status::Complete, "{restored:?}");
    new.store.forget_layout(&new.keys, "game");
    assert_eq!(sums(&new).await, model, "restored from the new generation's journal alone");
}

/// A lower `max_score` than a sum written while the lines move (by the deploy still on the old
/// configuration): the move is refused once fenced, before its last step's lines, its fence
/// lifted and the board written on; corrected, the move run again finishes with every write once
/// (two old shards, whose last step's places a refusal after them would have taken).
#[tokio::test]
async fn a_lower_max_score_than_a_sum_written_during_the_move_refuses_it_and_a_run_again_finishes() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let old = spawn_journaled(game(2, "")).await;
    let mut model: BTreeMap<String, i64> = BTreeMap::new();
    for i in 0..24 {
        let user = format!("u{}", i % 8);
        assert!(settle(&mut model, (&user, 1 + i % 4), submit(&old, &format!("s{i}"), &user, 1 + i % 4).await, &[]));
    }
    let new = spawn_journaled_on(game(2, "max_score = 1000"), old.keys.clone()).await;
    let jobs = new.journal_jobs_rounds(&client, &bucket, 0);
    let step = || jobs.run(json!({"reshard": {"board": "game"}}), Utc::now() - Duration::seconds(1));
    let first = step().await.expect("the move starts: every held score fits");
    assert_eq!(first["status"], "in_progress", "{first}");
    assert!(settle(&mut model, ("u3", 5000), submit(&old, "big", "u3", 5000).await, &[]), "the old deploy takes it");
    let mut written = 0;
    let refused = loop {
        written += 1;
        assert!(settle(&mut model, ("u1", 1), submit(&new, &format!("w{written}"), "u1", 1).await, &[]), "beside the lines moving");
        match step().await {
            Ok(report) => assert_eq!(report["status"], "in_progress", "{report}"),
            Err(error) => break format!("{error:?}"),
        }
    };
    assert!(refused.contains("max_score 1000"), "{refused}");
    // Not fenced: both deploys write on.
    assert!(settle(&mut model, ("u2", 2), submit(&new, "after-refusal", "u2", 2).await, &[]), "written on after the refusal");
    let (status, removed) = old
        .call(
            axum::http::Method::POST,
            "/v1/admin/boards/game/users/u3/corrections",
            json!({"remove": true, "reason": "too high"}).to_string(),
            standings_tests::ADMIN,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{removed}");
    model.remove("u3");
    let mut report = Value::Null;
    for n in 0..400 {
        report = step().await.unwrap_or_else(|e| panic!("run again, step {n}: {e:?}"));
        if report["status"] == "complete" {
            break;
        }
        if report["last_step"] != true {
            assert!(settle(&mut model, ("u4", 1), submit(&new, &format!("again{n}"), "u4", 1).await, &[]), "step {n}");
        }
    }
    assert_eq!((&report["status"], &report["max_score"]["to"]), (&json!("complete"), &json!(1000)), "{report}");
    assert_eq!(sums(&new).await, model, "every write taken is in the re-encoded board, once");
}

/// A move begun to one `max_score` and run again by a deploy on another (the configuration
/// changed in the middle of it): refused by name, the board written on; run again on the first
/// one, it finishes.
#[tokio::test]
async fn a_move_begun_to_another_max_score_is_refused_by_name() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let old = spawn_journaled(game(1, "")).await;
    let mut model: BTreeMap<String, i64> = BTreeMap::new();
    for i in 0..12 {
        let user = format!("u{}", i % 5);
        assert!(settle(&mut model, (&user, 1 + i % 3), submit(&old, &format!("s{i}"), &user, 1 + i % 3).await, &[]));
    }
    let run = |app: &TestApp| {
        let jobs = app.journal_jobs_rounds(&client, &bucket, 0);
        async move { jobs.run(json!({"reshard": {"board": "game"}}), Utc::now() - Duration::seconds(1)).await }
    };
    let first = spawn_journaled_on(game(1, "max_score = 1000"), old.keys.clone()).await;
    assert_eq!(run(&first).await.expect("begun")["status"], "in_progress");
    let other = spawn_journaled_on(game(1, "max_score = 2000"), old.keys.clone()).await;
    let refused = format!("{:?}", run(&other).await.expect_err("refused"));
    assert!(refused.contains("max_score 1000 was begun"), "{refused}");
    assert!(settle(&mut model, ("u1", 2), submit(&other, "after", "u1", 2).await, &[]), "the board is written on");
    for step in 0..200 {
        let report = run(&first).await.unwrap_or_else(|e| panic!("step {step}: {e:?}"));
        if report["status"] == "complete" {
            assert_eq!(sums(&first).await, model);
            return;
        }
    }
    panic!("the move begun to 1000 did not finish");
}

/// A deploy on another `max_score` than the board's scores are held at checks them at the held
/// one until a move re-encodes them: its verify finds no mismatch on a board that took every
/// write once, and a dry-run's `before` is the board's top as it answers (its `after`, under
/// the same rules, the same).
#[tokio::test]
async fn a_verify_and_a_dry_run_on_a_deploy_on_another_max_score_read_the_scores_as_held() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let old = spawn_journaled(game(1, &format!("max_score = {OLD_MAX}"))).await;
    let mut model: BTreeMap<String, i64> = BTreeMap::new();
    for i in 0..20 {
        let user = format!("u{}", i % 7);
        assert!(settle(&mut model, (&user, 1_000 + i), submit(&old, &format!("s{i}"), &user, 1_000 + i).await, &[]));
    }
    old.journal_jobs(&client, &bucket, Arc::default()).run(json!({"drain": {}}), far()).await.expect("a drain");
    let new = spawn_journaled_on(game(1, ""), old.keys.clone()).await;
    assert!(settle(&mut model, ("u1", 5), submit(&new, "n1", "u1", 5).await, &[]), "written at the held scale");
    assert_eq!(sums(&new).await, model);
    let jobs = new.journal_jobs(&client, &bucket, Arc::default());
    let verify = jobs.run(json!({"verify": {"board": "game"}}), far()).await.expect("a verify");
    assert_eq!(verify["mismatches"], 0, "{verify}");
    let candidate =
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"sum\"\ntimezone = \"UTC\"\nperiods = [\"day\", \"all\"]\ntop = 10\n";
    let request = json!({"dry_run": {"board": "game", "period": "all", "period_id": "all", "config": candidate}});
    let report = jobs.run(request, far()).await.expect("a dry-run");
    let top = |side: &str| -> BTreeMap<String, i64> {
        report[side].as_array().unwrap().iter().map(|s| (s["user_id"].as_str().unwrap().to_owned(), s["score"].as_i64().unwrap())).collect()
    };
    assert_eq!(top("top_before"), model, "{report}");
    assert_eq!(top("top_after"), model, "{report}");
    assert_eq!(verify["boards"][0]["refused"], 0, "{verify}");
}
