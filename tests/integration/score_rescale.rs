//! A score board whose `max_score` changes (docs/boards.md#changing-max_score): the journal
//! function's `reshard` re-encodes every score it holds into the next generation of its layout,
//! so the shipped `high-scores` upgrade (scores held at the default, the configuration now
//! declaring 4,194,303) is one command, not a rebuild or a new name (issue 58 item 4).

use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use journal::{Jobs, Restorer, S3Objects, Status};
use serde_json::{Value, json};
use standings::archive::objects::{Objects, generation_name, generations_of, journal_objects};
use standings::domain::config::Config;
use standings::domain::tiebreak::{EPOCH_SECS, MAX_SCORE};
use standings_tests::journal::{new_bucket, s3, spawn_journaled_on};
use standings_tests::{TestApp, spawn_journaled};

fn far() -> DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

/// The board `game`: its `keep`, its periods and more lines (`max_score`).
fn board(keep: &str, periods: &str, extra: &str) -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"{keep}\"\ntimezone = \"UTC\"\nperiods = [{periods}]\ntop = 10\n{extra}\n"
    ))
    .unwrap()
}

fn game(max_score: &str) -> Config {
    board("best", "\"day\", \"all\"", max_score)
}

async fn submit(app: &TestApp, at: DateTime<Utc>, id: &str, user: &str, score: i64) -> (StatusCode, Value) {
    app.set_now(at);
    app.post("/v1/boards/game/scores", &json!({"event_id": id, "user_id": user, "score": score})).await
}

async fn tops(app: &TestApp) -> Vec<Value> {
    let mut tops = Vec::new();
    for period in ["all", "day"] {
        let (status, top) = app.get(&format!("/v1/boards/game/top?period={period}&limit=20")).await;
        assert_eq!(status, StatusCode::OK, "{top}");
        tops.push(top["entries"].clone());
    }
    tops
}

fn ids(entries: &Value) -> Vec<&str> {
    entries.as_array().unwrap().iter().map(|entry| entry["user_id"].as_str().unwrap()).collect()
}

/// Reshards until complete, the drain's scheduled run between two invocations (a re-encode
/// switches once the new journal is whole in S3).
async fn moved(jobs: &Jobs<S3Objects>) -> Value {
    for _ in 0..20 {
        let report = jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap();
        if report["status"] == "complete" {
            return report;
        }
        jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    }
    panic!("the move did not finish in 20 invocations");
}

/// Reshards with every invocation past its deadline (each moves a run and stops), until done;
/// the drain's scheduled run between two invocations. How many runs stored lines of the new
/// generation's journal while it moved. After every invocation, each of `readers` (functions on
/// either configuration) reads `before` (issue 58: reads answer from the old layout for the
/// whole move, whatever `max_score` the reader is configured with).
async fn reshard_in_steps(
    jobs: &Jobs<S3Objects>,
    objects: &S3Objects,
    prefix: &str,
    readers: &[&TestApp],
    before: &[Value],
) -> (Value, usize) {
    let mut stored = 0;
    for step in 0..200 {
        let report = jobs
            .run(json!({"reshard": {"board": "game"}}), Utc::now() - Duration::seconds(1))
            .await
            .unwrap_or_else(|e| panic!("step {step}: {e:?}"));
        for (i, reader) in readers.iter().enumerate() {
            assert_eq!(tops(reader).await, before, "reader {i} after step {step}: {report}");
        }
        if report["status"] == "complete" {
            return (report, stored);
        }
        jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
        stored = stored.max(journal_objects(objects, prefix, "game:g1").await.unwrap().len());
    }
    panic!("the move did not finish in 200 invocations");
}

/// The upgrade: scores from before the scale was recorded (at the default, all-time ties to
/// 256 s), the configuration now 4,194,303. Written at the held scale until moved (a new score
/// too, read beside the others by either deploy); moved in steps, every score,
/// rank and time reached reads as before, retries are duplicates, a new score is exact to the
/// second, and a restore after the deployment's Redis is lost brings the re-encoded board back
/// from the new generation's journal alone.
#[tokio::test]
async fn a_board_held_at_the_default_scale_moves_to_its_configured_max_score() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let metrics = || Arc::new(Mutex::new(Vec::new()));
    // 10 s into a 256-second all-time step, in the past.
    let now = Utc::now().timestamp();
    let t0 = now - 512 - (now - EPOCH_SECS).rem_euclid(256) + 10;
    let at = |secs: i64| DateTime::from_timestamp(t0 + secs, 0).unwrap();
    let old = spawn_journaled(game("")).await;
    for (i, (user, score, secs)) in
        [("u0", 500, 0), ("u1", 500, 300), ("u2", 900, 5), ("u3", 100, 7), ("u4", 700, 3), ("u5", 500, 600)].into_iter().enumerate()
    {
        assert_eq!(submit(&old, at(secs), &format!("s{i}"), user, score).await.0, StatusCode::OK);
        if i == 2 {
            // Part of the history in S3, the rest still in the stream.
            old.journal_jobs(&client, &bucket, metrics()).run(json!({"drain": {}}), far()).await.expect("a drain");
        }
    }
    // A walk by cursor begun before the move (issue 58: a cursor names its scale).
    let (_, first) = old.get("/v1/boards/game/top?period=all&limit=2").await;
    let cursor = first["next_cursor"].as_str().expect("a page of 2 of 6 has a next one").to_owned();
    assert!(cursor.contains(&format!("~{MAX_SCORE}.")), "{cursor}");

    let new = spawn_journaled_on(game("max_score = 4194303"), old.keys.clone()).await;
    // Writes go on at the scale the board holds, until the move; reads answer from it.
    let (status, taken) = submit(&new, at(600), "s8", "u8", 50).await;
    assert_eq!(status, StatusCode::OK, "{taken}");
    old.set_now(at(600));
    let before = tops(&old).await;
    assert_eq!(ids(&before[0]), ["u2", "u4", "u0", "u1", "u5", "u3", "u8"], "{}", before[0]);
    assert_eq!(tops(&new).await, before, "read at the scale the board holds, before the move");
    let jobs = new.journal_jobs(&client, &bucket, metrics());
    let (report, stored) =
        reshard_in_steps(&jobs, &S3Objects::new(client.clone(), &bucket), new.keys.prefix(), &[&old, &new], &before).await;
    assert_eq!(report["max_score"], json!({"from": MAX_SCORE, "to": 4_194_303}), "{report}");
    assert!(stored > 0, "the drain stores the new generation's journal while the board moves");
    let records = S3Objects::new(client.clone(), &bucket).list(&generations_of(new.keys.prefix(), "game")).await.unwrap();
    assert_eq!(records, [generation_name(new.keys.prefix(), "game", 1)], "the switch recorded once the journal was whole");
    new.set_now(at(600));
    assert_eq!(tops(&new).await, before, "every score, rank and time reached as before");
    // The same number is another place at the new scale: refused, not read there.
    let (status, stale) = new.get(&format!("/v1/boards/game/top?period=all&limit=2&cursor={cursor}")).await;
    assert_eq!((status, stale["error"]["code"].as_str()), (StatusCode::BAD_REQUEST, Some("malformed")), "{stale}");
    assert!(stale["error"]["message"].as_str().unwrap().contains("max_score changed"), "{stale}");
    // A walk begun after the move reads the board's order.
    let (_, first) = new.get("/v1/boards/game/top?period=all&limit=2").await;
    let (status, second) =
        new.get(&format!("/v1/boards/game/top?period=all&limit=2&cursor={}", first["next_cursor"].as_str().unwrap())).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!([ids(&first["entries"]), ids(&second["entries"])].concat(), ids(&before[0])[..4], "{second}");
    let mut conn = new.redis.clone();
    let records: (Option<String>, Option<i64>) =
        redis::pipe().get(new.keys.board_layout("game")).get(new.keys.board_scale("game")).query_async(&mut conn).await.unwrap();
    assert_eq!(records, (Some("1:1".to_owned()), Some(4_194_303)), "the next generation, at the new scale");
    let left: Vec<String> = new.written_keys().await.into_iter().filter(|key| key.contains("{game}")).collect();
    assert!(left.iter().all(|key| key.ends_with(":layout") || key.ends_with(":scale")), "the old keys are freed: {left:?}");
    let (status, retry) = submit(&new, at(0), "s1", "u1", 500).await;
    assert_eq!((status, retry["duplicate"].as_bool()), (StatusCode::OK, Some(true)), "{retry}");
    assert_eq!(jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap()["moved"], 0, "done: nothing more to move");
    // A verify replays every moved line at the new scale, to the second: what the move wrote.
    let verify = jobs.run(json!({"verify": {"board": "game"}}), far()).await.expect("a verify");
    assert_eq!(verify["mismatches"], 0, "{verify}");

    // One second after u0, in the same 256-second step: at the default it would tie with u0
    // and lead it (Redis orders a tie by member, u9 > u0); now it ranks after.
    assert_eq!(submit(&new, at(1), "s9", "u9", 500).await.0, StatusCode::OK);
    let after = tops(&new).await;
    assert_eq!(ids(&after[0]), ["u2", "u4", "u0", "u9", "u1", "u5", "u3", "u8"], "{}", after[0]);

    // Redis lost, the layout record with it: S3's newest generation is the board's.
    jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    new.lose_written_keys().await;
    let restorer = Restorer::new(new.config.clone(), new.keys.clone(), new.store.clone(), S3Objects::new(client.clone(), &bucket));
    let restored = restorer.restore(Some("game"), far()).await.expect("the restore runs");
    assert_eq!(restored.status, Status::Complete, "{restored:?}");
    new.store.forget_layout(&new.keys, "game");
    assert_eq!(tops(&new).await, after, "restored at the new scale");
}

/// A `max_score` below a score the board holds cannot hold it: the move is refused before it
/// fences or writes anything, and the board goes on under its old configuration.
#[tokio::test]
async fn a_max_score_below_a_held_score_is_refused_before_anything_moves() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let old = spawn_journaled(game("")).await;
    let now = Utc::now();
    assert_eq!(submit(&old, now, "a", "amy", 5000).await.0, StatusCode::OK);
    assert_eq!(submit(&old, now, "b", "bob", 10).await.0, StatusCode::OK);
    let state = old.keyspace().await;
    let new = spawn_journaled_on(game("max_score = 1000"), old.keys.clone()).await;
    let refused = new.journal_jobs(&client, &bucket, Arc::default()).run(json!({"reshard": {"board": "game"}}), far()).await;
    let message = format!("{:?}", refused.expect_err("refused"));
    assert!(message.contains("5000") && message.contains("max_score 1000"), "{message}");
    assert_eq!(old.keyspace().await, state, "nothing written");
    assert_eq!(submit(&old, now, "c", "cat", 7).await.0, StatusCode::OK, "the board goes on as it was");
}

/// A lower `max_score` than a score the history once held but no entry keeps now (a "latest"
/// board whose player since submitted less): the board moves; its lines' old scores are written
/// at the new maximum, overwritten by the lines after them as they were.
#[tokio::test]
async fn a_score_only_the_history_held_above_the_new_max_does_not_stop_the_move() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let latest = |max: &str| board("latest", "\"day\", \"all\"", max);
    let old = spawn_journaled(latest("")).await;
    let now = Utc::now();
    for (id, user, score) in [("a", "amy", 5000), ("b", "bob", 20), ("c", "amy", 10)] {
        assert_eq!(submit(&old, now, id, user, score).await.0, StatusCode::OK);
    }
    let new = spawn_journaled_on(latest("max_score = 1000"), old.keys.clone()).await;
    new.set_now(now);
    let report = moved(&new.journal_jobs(&client, &bucket, Arc::default())).await;
    assert_eq!(report["status"], "complete", "{report}");
    let (_, top) = new.get("/v1/boards/game/top?period=all").await;
    let scores: Vec<(&str, i64)> =
        top["entries"].as_array().unwrap().iter().map(|e| (e["user_id"].as_str().unwrap(), e["score"].as_i64().unwrap())).collect();
    assert_eq!(scores, [("bob", 20), ("amy", 10)], "{top}");
}

/// A board with no scale record whose current periods hold nothing but an earlier period does
/// (yesterday's set, on a day board): its scores are at the default, and a function configured
/// with another `max_score` writes today's at the default too rather than record its own over
/// them; the move then re-encodes both days.
#[tokio::test]
async fn yesterdays_scores_keep_a_board_at_the_default_until_it_is_moved() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let day_only = |max: &str| board("best", "\"day\"", max);
    let old = spawn_journaled(day_only("")).await;
    let yesterday = Utc::now() - Duration::days(1);
    assert_eq!(submit(&old, yesterday, "a", "amy", 300).await.0, StatusCode::OK);
    let new = spawn_journaled_on(day_only("max_score = 4194303"), old.keys.clone()).await;
    let today = Utc::now();
    assert_eq!(submit(&new, today, "b", "bob", 5).await.0, StatusCode::OK);
    let mut conn = new.redis.clone();
    let scale: Option<i64> = redis::cmd("GET").arg(new.keys.board_scale("game")).query_async(&mut conn).await.unwrap();
    assert_eq!(scale, Some(MAX_SCORE), "the default recorded, as the scores held");
    let report = moved(&new.journal_jobs(&client, &bucket, Arc::default())).await;
    assert_eq!((&report["status"], &report["max_score"]["to"]), (&json!("complete"), &json!(4_194_303)), "{report}");
    for (day, score) in [(yesterday, 300), (today, 5)] {
        let (status, top) = new.get(&format!("/v1/boards/game/top?period=day&at={}", day.date_naive())).await;
        assert_eq!((status, &top["entries"][0]["score"]), (StatusCode::OK, &json!(score)), "{top}");
    }
    assert_eq!(submit(&new, today, "c", "cat", 4_000_000).await.0, StatusCode::OK, "the new scale's range");
}

/// A board that notifies is refused by name (its undelivered rank moves are not carried), before
/// anything is fenced.
#[tokio::test]
async fn a_board_that_notifies_is_refused_by_name() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let notifying = |max: &str| board("best", "\"day\", \"all\"", &format!("{max}\nnotify = {{ top = 3 }}"));
    let old = spawn_journaled(notifying("")).await;
    assert_eq!(submit(&old, Utc::now(), "a", "amy", 30).await.0, StatusCode::OK);
    let state = old.keyspace().await;
    let new = spawn_journaled_on(notifying("max_score = 4194303"), old.keys.clone()).await;
    let refused = new.journal_jobs(&client, &bucket, Arc::default()).run(json!({"reshard": {"board": "game"}}), far()).await;
    assert!(format!("{:?}", refused.expect_err("refused")).contains("notifications"));
    assert_eq!(old.keyspace().await, state, "nothing written");
}

/// Redis lost in the middle of a move, its new generation's journal partly in S3 already: the
/// restore brings the board back as it was before the move (the generation S3 records a switch
/// to), not the part moved so far (issue 58, found by a review: the newest generation holding
/// objects was taken).
#[tokio::test]
async fn a_loss_in_the_middle_of_a_move_restores_the_board_from_before_it() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let old = spawn_journaled(game("")).await;
    let now = Utc::now();
    for i in 0..30 {
        assert_eq!(submit(&old, now, &format!("s{i}"), &format!("u{i}"), 10 * i + 1).await.0, StatusCode::OK);
    }
    let before = tops(&old).await;
    let new = spawn_journaled_on(game("max_score = 4194303"), old.keys.clone()).await;
    let jobs = new.journal_jobs(&client, &bucket, Arc::default());
    // Two runs moved (one an invocation), the drain storing them between.
    for _ in 0..2 {
        let report = jobs.run(json!({"reshard": {"board": "game"}}), Utc::now() - Duration::seconds(1)).await.unwrap();
        assert_eq!(report["status"], "in_progress", "{report}");
        jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    }
    assert!(!journal_objects(&S3Objects::new(client.clone(), &bucket), new.keys.prefix(), "game:g1").await.unwrap().is_empty());
    old.lose_written_keys().await;
    let restorer = Restorer::new(old.config.clone(), old.keys.clone(), old.store.clone(), S3Objects::new(client.clone(), &bucket));
    let restored = restorer.restore(Some("game"), far()).await.expect("the restore runs");
    assert_eq!(restored.status, Status::Complete, "{restored:?}");
    assert!(restored.boards.iter().all(|board| board.board == "game"), "{restored:?}");
    old.store.forget_layout(&old.keys, "game");
    old.set_now(now);
    assert_eq!(tops(&old).await, before, "the board as it was before the move");
}

/// A journal that begins with a line from before effects were recorded (2026-11-26) cannot be
/// moved: refused by name before anything is fenced, every key as it was (a move applies lines
/// by their effects, and stopped at that line with the board fenced).
#[tokio::test]
async fn a_journal_older_than_recorded_effects_is_refused_before_anything_is_fenced() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let old = spawn_journaled(game("")).await;
    let entry = json!({"kind": "score", "at": "2026-11-25T10:00:00.000Z", "event_id": "legacy", "user_id": "amy", "score": 5});
    let mut conn = old.redis.clone();
    let _: String = redis::cmd("XADD")
        .arg(old.keys.board("game").journal())
        .arg("*")
        .arg("e")
        .arg(entry.to_string())
        .arg("o")
        .arg("k1")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(submit(&old, Utc::now(), "a", "bob", 40).await.0, StatusCode::OK);
    let state = old.keyspace().await;
    let new = spawn_journaled_on(game("max_score = 4194303"), old.keys.clone()).await;
    let refused = new.journal_jobs(&client, &bucket, Arc::default()).run(json!({"reshard": {"board": "game"}}), far()).await;
    assert!(format!("{:?}", refused.expect_err("refused")).contains("before 2026-11-26"));
    assert_eq!(old.keyspace().await, state, "nothing written, the board not fenced");
    assert_eq!(submit(&old, Utc::now(), "b", "cat", 7).await.0, StatusCode::OK, "the board goes on as it was");
}

/// A move refused after it fenced the board (a `max_score` below a held score) lifts its own
/// `moving` fence only: a loss's fence, set by a write in between, stays until a restore.
#[tokio::test]
async fn a_refused_move_lifts_its_own_fence_and_never_a_losss() {
    let app = spawn_journaled(game("")).await;
    assert_eq!(submit(&app, Utc::now(), "a", "amy", 100).await.0, StatusCode::OK);
    let keys = app.keys.board("game");
    let mut conn = app.store.write_connection().await.unwrap();
    let fence = |conn: &mut standings::redis::store::Connection| {
        let guard = keys.guard();
        let mut conn = conn.clone();
        async move { redis::cmd("HGET").arg(guard).arg("fence").query_async::<Option<String>>(&mut conn).await.unwrap() }
    };
    let _: () = redis::cmd("HSET").arg(keys.guard()).arg("fence").arg("1").query_async(&mut conn).await.unwrap();
    assert!(!standings::redis::restore::lift_fence(&mut conn, &keys, "moving").await.unwrap());
    assert_eq!(fence(&mut conn).await.as_deref(), Some("1"), "a loss's fence stays");
    let _: () = redis::cmd("HSET").arg(keys.guard()).arg("fence").arg("moving").query_async(&mut conn).await.unwrap();
    assert!(standings::redis::restore::lift_fence(&mut conn, &keys, "moving").await.unwrap());
    assert_eq!(fence(&mut conn).await, None, "the move's own fence is lifted");
}

/// A board moved to another generation of its layout (a `max_score` move) that then takes a
/// `league`: its players are placed, read and closed in that generation's slot, where its scores
/// and the write scripts' placements are (the league services read the first generation's keys:
/// a player placed answered no cohort, and the week never closed).
#[tokio::test]
async fn a_league_added_after_a_max_score_move_is_read_and_closed_where_the_board_is() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let weekly = |extra: &str| board("best", "\"week\", \"all\"", extra);
    let old = spawn_journaled(weekly("")).await;
    let now = Utc::now();
    assert_eq!(submit(&old, now, "a", "amy", 50).await.0, StatusCode::OK);
    let new = spawn_journaled_on(weekly("max_score = 1000"), old.keys.clone()).await;
    new.set_now(now);
    assert_eq!(moved(&new.journal_jobs(&client, &bucket, Arc::default())).await["status"], "complete");
    let league = "league = { period = \"week\", cohort_size = 3, tiers = [\"bronze\", \"silver\"], promote = 1, demote = 1 }";
    let leagued = weekly(&format!("max_score = 1000\n{league}"));
    let app = spawn_journaled_on(leagued.clone(), old.keys.clone()).await;
    for (id, user, score) in [("b", "bob", 20), ("c", "amy", 60)] {
        let (status, body) = submit(&app, now, id, user, score).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, mine) = app.get("/v1/boards/game/users/bob/league").await;
    let entries: Vec<(&str, i64)> =
        mine["entries"].as_array().unwrap().iter().map(|e| (e["user_id"].as_str().unwrap(), e["score"].as_i64().unwrap())).collect();
    assert_eq!((status, mine["cohort"].as_str(), entries), (StatusCode::OK, Some("0:1"), vec![("amy", 60), ("bob", 20)]), "{mine}");
    let (_, listing) = app.get("/v1/boards/game/leagues?tier=bronze").await;
    assert_eq!(listing["tiers"][0]["cohorts"], json!([{"cohort": "0:1", "size": 2}]), "{listing}");

    // Past the week and its grace: the archive function's scheduled run closes it.
    app.set_now(now + Duration::days(8));
    let archiver = standings_tests::ArchiveHarness::with_config(leagued).await;
    let scheduled: Value = serde_json::to_value(standings_tests::scheduled_event(app.now())).unwrap();
    let (runner, closer) = (archiver.archiver(archiver.table.clone()), app.closer());
    let run = archive::run(&runner, &closer, scheduled, Utc::now() + Duration::minutes(5)).await.unwrap();
    let closed = serde_json::to_value(run.leagues).unwrap();
    assert_eq!(closed.as_array().map(|c| c.len()), Some(1), "{closed}");
    assert_eq!((closed[0]["status"].as_str(), closed[0]["cohorts_closed"].as_u64()), (Some("complete"), Some(1)), "{closed}");
    let (_, history) = app.get("/v1/boards/game/users/amy/league/history").await;
    let mut result = history["results"][0].clone();
    result.as_object_mut().unwrap().remove("period_id");
    let expected =
        json!({"cohort": "0:1", "cohort_size": 2, "next_tier": "bronze", "rank": 1, "score": 60, "tier": "bronze", "zone": "stay"});
    assert_eq!(result, expected, "{history}");
}
