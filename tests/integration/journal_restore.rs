//! Restore (docs/journal.md#restore): after every key of a deployment is gone (its FLUSHALL:
//! each test owns a key prefix, so this deletes every key of the prefix; one test flushes a
//! redis-server of its own for real), the `journal`
//! function's restore replays the journal from S3 (moto_server, through the real SDK) and
//! brings back every key a write made, byte for byte (`DUMP`), with its expiry; then a retry of
//! an event applied before the loss is a duplicate, caps and bans hold. Resumable across
//! deadlines; a board that lost nothing is left as it is.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use chrono::{Duration, Utc};
use journal::{RestoreReport, Restorer, S3Objects, Status};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::journal::{call, drain_to_new_bucket, new_bucket, s3, store_overlapping_copy};
use standings_tests::{ADMIN, TestApp, WRITER, spawn_journaled};

fn far() -> chrono::DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

/// Writes of every kind the journal records, on the real clock (TTLs are compared after the
/// restore, and a key's TTL counts from the clock that wrote it).
async fn workload(app: &TestApp) {
    let tick = || app.set_now(Utc::now());
    let mut events = Vec::new();
    for i in 0..6 {
        events.push(json!({"event_id": format!("learn-{i}"), "user_id": "ann", "action": "learning"}));
    }
    for (i, user) in ["bob", "cid", "ann", "dan"].iter().enumerate() {
        events.push(json!({"event_id": format!("view-{i}"), "user_id": user, "action": "page_view", "target": format!("p{i}")}));
        events.push(json!({"event_id": format!("praise-{i}"), "user_id": user, "action": "praise", "target": "p9"}));
        events.push(json!({"event_id": format!("qa-{i}"), "user_id": user, "action": "qa"}));
        events.push(json!({"event_id": format!("invite-{i}"), "user_id": user, "action": "invite", "target": format!("friend-{i}")}));
        // The weekly league: placements in cohorts (dan's ban below takes him out of his).
        events.push(json!({"event_id": format!("lesson-{i}"), "user_id": user, "action": "lesson"}));
    }
    events.push(json!({"event_id": "unpraise-1", "user_id": "cid", "action": "praise", "target": "p9", "active": false}));
    for event in events {
        tick();
        let (status, reply) = app.event(event).await;
        assert_eq!(status, StatusCode::OK, "{reply}");
    }
    for (i, (user, score)) in [("ann", 40), ("bob", 40), ("ann", 55), ("cid", 10)].into_iter().enumerate() {
        tick();
        let body = json!({"event_id": format!("game-{i}"), "user_id": user, "score": score});
        assert_eq!(app.post("/v1/boards/high-scores/scores", &body).await.0, StatusCode::OK);
        assert_eq!(app.post("/v1/boards/lap-times/scores", &body).await.0, StatusCode::OK);
    }
    for user in ["ann", "bob"] {
        tick();
        assert_eq!(app.post("/v1/sign-ins", &json!({"event_id": format!("sign-{user}"), "user_id": user})).await.0, StatusCode::OK);
    }
    tick();
    let correction = json!({"delta": 7, "reason": "missed lesson", "correction_id": "fix-1"});
    assert_eq!(
        app.call(Method::POST, "/v1/admin/boards/points/users/bob/corrections", correction.to_string(), ADMIN).await.0,
        StatusCode::OK
    );
    let removal = json!({"remove": true, "reason": "cheated"});
    assert_eq!(
        app.call(Method::POST, "/v1/admin/boards/high-scores/users/cid/corrections", removal.to_string(), ADMIN).await.0,
        StatusCode::OK
    );
    for (user, nickname) in [("ann", "Ann"), ("bob", "Bob"), ("ann", "Ann B.")] {
        tick();
        let profile = json!({"nickname": nickname, "title": "learner"});
        assert_eq!(app.call(Method::PUT, &format!("/v1/users/{user}/profile"), profile.to_string(), WRITER).await.0, StatusCode::OK);
    }
    tick();
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let void = json!({"void_id": "void-1", "from": Utc::now() - Duration::hours(1), "to": Utc::now(), "reason": "vote ring"});
    let (status, voided) =
        call(&app.void_router(&client, Some(&bucket), 30), Method::POST, "/v1/admin/boards/points/users/bob/void", &void, ADMIN).await;
    assert_eq!(status, StatusCode::OK, "{voided}");
    assert!(voided["periods"].as_array().unwrap().iter().any(|period| period["delta"].as_i64() < Some(0)), "{voided}");
    tick();
    assert_eq!(app.call(Method::POST, "/v1/admin/users/dan/ban", "{}", ADMIN).await.0, StatusCode::OK);
    assert_eq!(app.call(Method::DELETE, "/v1/admin/users/eve/ban", "", ADMIN).await.0, StatusCode::OK);
}

/// Every key a write made, with its `DUMP` and absolute expiry (ms): not the journal streams
/// (drained, and not a board's state), not the restore's own checkpoint.
async fn state(app: &TestApp) -> Vec<(String, Vec<u8>, i64)> {
    let kept = |key: &str| ![":journal", ":restore"].iter().any(|own| key.ends_with(own));
    app.keyspace().await.into_iter().filter(|(key, ..)| kept(key)).collect()
}

/// Every key of the app's prefix deleted: the deployment's Redis lost.
async fn lose_everything(app: &TestApp) {
    let mut conn = app.redis.clone();
    for key in app.written_keys().await {
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.unwrap();
    }
    assert!(app.written_keys().await.is_empty());
}

fn restorer(app: &TestApp, client: &aws_sdk_s3::Client, bucket: &str) -> Restorer<S3Objects> {
    Restorer::new(app.config.clone(), app.keys.clone(), app.store.clone(), S3Objects::new(client.clone(), bucket))
}

async fn drained(app: &TestApp) -> (aws_sdk_s3::Client, String) {
    drain_to_new_bucket(app, 10).await
}

/// The same keys and values; expiries within 2 s (a replay sets what is left of each TTL, to
/// the second), except rate-limit logs, whose windows restart.
fn assert_same(before: &[(String, Vec<u8>, i64)], after: &[(String, Vec<u8>, i64)]) {
    let names = |state: &[(String, Vec<u8>, i64)]| state.iter().map(|(key, ..)| key.clone()).collect::<Vec<_>>();
    assert_eq!(names(before), names(after), "the same keys");
    for ((key, dump, expiry), (_, dump_after, expiry_after)) in before.iter().zip(after) {
        assert!(dump == dump_after, "{key} differs after the restore");
        if !key.contains(":rate:") {
            assert_eq!(*expiry == -1, *expiry_after == -1, "{key}: expiry {expiry} then {expiry_after}");
            assert!((expiry - expiry_after).abs() <= 2_000, "{key}: expiry {expiry} then {expiry_after}");
        }
    }
}

#[tokio::test]
async fn after_a_total_loss_a_restore_brings_every_key_back_byte_equal_and_exactly_once_holds() {
    let app = spawn_journaled(Config::default_boards()).await;
    workload(&app).await;
    let before = state(&app).await;
    assert!(before.len() > 40, "the workload wrote {} keys", before.len());
    let (client, bucket) = drained(&app).await;
    lose_everything(&app).await;

    let report = restorer(&app, &client, &bucket).restore(None, far()).await.expect("the restore runs");
    assert_eq!(report.status, Status::Complete, "{report:?}");
    assert!(report.boards.iter().all(|b| b.refused == 0 && b.duplicates == 0), "{report:?}");
    assert_same(&before, &state(&app).await);
    // Invoked again (a retry of the same command), it finds every key intact and writes none.
    let again = restorer(&app, &client, &bucket).restore(None, far()).await.expect("a second restore runs");
    assert_eq!(again.status, Status::Complete, "{again:?}");
    assert_same(&before, &state(&app).await);

    // Exactly once holds across the loss: a retry of an event applied before it is a duplicate.
    app.set_now(Utc::now());
    let (status, retry) = app.event(json!({"event_id": "qa-1", "user_id": "cid", "action": "qa"})).await;
    assert_eq!((status, retry["duplicate"].as_bool()), (StatusCode::OK, Some(true)), "{retry}");
    let sign_in = app.post("/v1/sign-ins", &json!({"event_id": "sign-ann", "user_id": "ann"})).await;
    assert_eq!(sign_in.1["duplicate"], true, "{sign_in:?}");
    // The day's cap (50 on learning) still counts what was given before the loss.
    let (_, capped) = app.event(json!({"event_id": "learn-6", "user_id": "ann", "action": "learning"})).await;
    assert_eq!(capped["results"][0]["reason"], "daily_cap", "{capped}");
    // The ban holds.
    let (status, _) = app.event(json!({"event_id": "qa-9", "user_id": "dan", "action": "qa"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

/// The loss itself: a redis-server of the test's own emptied by `FLUSHALL` (every key of the
/// deployment, guards, markers and the journal's undrained stream too), then restored.
#[tokio::test]
async fn after_a_literal_flushall_a_restore_brings_every_key_back_byte_equal() {
    let server = standings_tests::servers::RedisServer::start(&[]).await;
    let settings = standings::redis::settings::RedisSettings::standalone(&server.url());
    let app = standings_tests::journal::spawn_journaled_at(Config::default_boards(), &settings).await;
    workload(&app).await;
    let before = state(&app).await;
    let (client, bucket) = drained(&app).await;
    let mut conn = app.redis.clone();
    let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    let keys: u64 = redis::cmd("DBSIZE").query_async(&mut conn).await.unwrap();
    assert_eq!(keys, 0);
    let report = restorer(&app, &client, &bucket).restore(None, far()).await.expect("the restore runs");
    assert_eq!(report.status, Status::Complete, "{report:?}");
    assert_same(&before, &state(&app).await);
}

#[tokio::test]
async fn a_restore_stopped_by_its_deadline_resumes_where_it_stood_and_ends_byte_equal() {
    let app = spawn_journaled(Config::default_boards()).await;
    workload(&app).await;
    let before = state(&app).await;
    let (client, bucket) = drained(&app).await;
    lose_everything(&app).await;

    // A deadline already passed: each invocation replays one line, then stops.
    // Its progress in bytes of the journal (what `standings restore` shows), against the
    // bucket's own listing of the board's objects.
    let listed = client.list_objects_v2().bucket(&bucket).send().await.unwrap();
    let sizes: Vec<u64> =
        listed.contents().iter().filter(|o| o.key().unwrap().contains("/board=points/")).map(|o| o.size().unwrap() as u64).collect();
    let journal_bytes: u64 = sizes.iter().sum();
    assert!(sizes.len() > 1 && journal_bytes > 0, "{sizes:?}");
    let restorer = restorer(&app, &client, &bucket);
    let (mut invocations, mut read_bytes, mut left_bytes) = (0, 0, journal_bytes);
    let last: RestoreReport = loop {
        invocations += 1;
        let report = restorer.restore(Some("points"), Utc::now() - Duration::seconds(1)).await.expect("the restore runs");
        assert!(report.boards.iter().all(|b| b.refused == 0 && b.duplicates == 0), "resumed at the right line: {report:?}");
        let board = &report.boards[0];
        assert_eq!(board.journal_bytes, journal_bytes, "{report:?}");
        assert!(board.left_bytes <= left_bytes, "what is left never grows: {report:?}");
        assert!(board.read_bytes > 0, "each invocation reads its object again: {report:?}");
        (read_bytes, left_bytes) = (read_bytes + board.read_bytes, board.left_bytes);
        if report.status == Status::Complete {
            break report;
        }
        assert!(left_bytes > 0, "{report:?}");
        assert!(invocations < 1_000, "no progress");
    };
    assert_eq!(left_bytes, 0);
    assert!(read_bytes >= journal_bytes, "every object was read: {read_bytes} of {journal_bytes}");
    assert!(invocations > 5, "{invocations} invocations");
    assert_eq!(last.boards[0].board, "points");
    let points = |state: &[(String, Vec<u8>, i64)]| state.iter().filter(|(key, ..)| key.contains("{points}")).cloned().collect::<Vec<_>>();
    assert_same(&points(&before), &points(&state(&app).await));
}

#[tokio::test]
async fn a_restore_of_a_board_that_lost_nothing_writes_nothing_and_unknown_boards_are_refused() {
    let app = spawn_journaled(Config::default_boards()).await;
    app.set_now(Utc::now());
    assert_eq!(app.event(json!({"event_id": "q1", "user_id": "ann", "action": "qa"})).await.0, StatusCode::OK);
    let (client, bucket) = drained(&app).await;
    // One more write, still in the stream: the restore reads it too.
    assert_eq!(app.event(json!({"event_id": "q2", "user_id": "bob", "action": "qa"})).await.0, StatusCode::OK);
    let restorer = restorer(&app, &client, &bucket);
    let before = state(&app).await;
    let report = restorer.restore(Some("points"), far()).await.expect("a restore runs");
    assert_eq!((report.status, report.boards[0].replayed), (Status::Complete, 2), "{report:?}");
    assert_same(&before, &state(&app).await);
    assert_eq!(restorer.restore(Some("nope"), far()).await.unwrap_err().code(), "unknown_board");

    // Through the function's own entry point, as `{"restore": …}` (`overwrite` of earlier
    // runbooks is accepted and changes nothing).
    let jobs = app.journal_jobs(&client, &bucket, Arc::default());
    let answer: Value = jobs.run(json!({"restore": {"board": "points", "overwrite": true}}), far()).await.expect("a restore");
    assert_eq!(answer["status"], "complete");
    assert_eq!(answer["boards"][0]["board"], "points");
    assert_same(&before, &state(&app).await);
}

/// A league's state as values (no expiries): tiers, a closed week's results, the next week's
/// placements, cohorts and counts.
async fn league_state(app: &TestApp, closed: &str, next: &str) -> Vec<Value> {
    let keys = app.keys.board("lg");
    let mut conn = app.redis.clone();
    let mut state = Vec::new();
    for hash in [keys.league_tiers(), keys.league_results(closed), keys.league_members(next), keys.league_counts(next)] {
        let fields: std::collections::BTreeMap<String, String> = redis::cmd("HGETALL").arg(&hash).query_async(&mut conn).await.unwrap();
        state.push(json!(fields));
    }
    let cohorts: Vec<String> = redis::cmd("ZRANGE").arg(keys.league_cohorts(next)).arg(0).arg(-1).query_async(&mut conn).await.unwrap();
    state.push(json!(cohorts));
    state
}

#[tokio::test]
async fn a_restore_brings_back_cohorts_closes_results_and_tiers() {
    let config = Config::parse(
        r#"
        [[boards]]
        name = "lg"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["week"]
        top = 10
        rules = [{ action = "play", points = 1, max_points = 100, scope = "none" }]
        league = { period = "week", cohort_size = 2, tiers = ["bronze", "silver"], promote = 1, demote = 1 }
        "#,
    )
    .unwrap();
    let app = spawn_journaled(config).await;
    let play = |id: &str, user: &str, points: u32| json!({"event_id": id, "user_id": user, "action": "play", "points": points});
    let monday = standings_tests::at("2026-11-16T08:00:00Z");
    for (i, (user, points)) in [("ann", 5), ("bob", 9), ("cid", 3), ("dan", 4), ("eve", 1)].into_iter().enumerate() {
        app.set_now(monday + Duration::seconds(i as i64));
        assert_eq!(app.event(play(&format!("w1-{i}"), user, points)).await.0, StatusCode::OK);
    }
    // The next week: bob writes before the close (he waits), the close, then ann writes.
    app.set_now(standings_tests::at("2026-11-23T00:10:00Z"));
    assert_eq!(app.event(play("w2-bob", "bob", 1)).await.0, StatusCode::OK);
    app.set_now(standings_tests::at("2026-11-23T01:00:00Z"));
    let reports = app.closer().close_due(Utc::now() + Duration::minutes(5)).await.unwrap();
    assert_eq!((reports[0].cohorts_closed, reports[0].players_placed_after), (3, 1), "{reports:?}");
    assert_eq!(app.event(play("w2-ann", "ann", 1)).await.0, StatusCode::OK);
    let before = league_state(&app, "2026-W47", "2026-W48").await;
    assert_eq!(before[0], json!({"bob": "1", "dan": "1"}), "bob and dan promoted; the bottom tier is not stored");

    let (client, bucket) = drained(&app).await;
    lose_everything(&app).await;
    let report = restorer(&app, &client, &bucket).restore(Some("lg"), far()).await.expect("the restore runs");
    assert_eq!(report.status, Status::Complete, "{report:?}");
    assert!(report.boards.iter().all(|b| b.refused == 0), "{report:?}");
    assert_eq!(league_state(&app, "2026-W47", "2026-W48").await, before);
}

/// A store rolled back drains its stream again from where its copy stood, so a board's objects
/// may overlap: one holding lines after the next object's first (here two of its lines also
/// stored apart, as a drain before the rollback had stored them). A restore resumed past that
/// next object's first line skipped the first object whole and lost its later lines (found by
/// the simulation); a resumed restore reads every object again, its lines up to the checkpoint
/// skipped, and applies exactly what one that never stopped would.
#[tokio::test]
async fn a_restore_resumed_over_overlapping_objects_applies_every_line_once() {
    let app = spawn_journaled(Config::default_boards()).await;
    app.set_now(Utc::now());
    for i in 0..6 {
        let event = json!({"event_id": format!("learn-{i}"), "user_id": format!("u{i}"), "action": "learning"});
        assert_eq!(app.event(event).await.0, StatusCode::OK);
    }
    let points = |state: Vec<(String, Vec<u8>, i64)>| state.into_iter().filter(|(key, ..)| key.contains("{points}")).collect::<Vec<_>>();
    let before = points(state(&app).await);
    let (client, bucket) = drain_to_new_bucket(&app, 100).await;
    store_overlapping_copy(&client, &bucket, "points", 6).await;
    lose_everything(&app).await;

    // A deadline already passed: each invocation applies one line, then stops.
    let restorer = restorer(&app, &client, &bucket);
    for invocation in 0.. {
        assert!(invocation < 50, "no progress");
        let report = restorer.restore(Some("points"), Utc::now() - Duration::seconds(1)).await.expect("the restore runs");
        assert!(report.boards.iter().all(|b| b.refused == 0 && b.duplicates == 0), "{report:?}");
        if report.status == Status::Complete {
            break;
        }
    }
    assert_same(&before, &points(state(&app).await));
}
