//! A runtime board's end and its journal (docs/runtime-boards.md): deleted, its writes refused at
//! once, its season archived rank for rank, its keys freed, its name never reused; a queue
//! message applied to it; a restore after every key was lost brings definitions and boards back.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use chrono::{Duration, Utc};
use serde_json::{Value, json};
use standings::archive::job::Archiver;
use standings::archive::table::SeasonTable;
use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings::services::catalog::boards_now;
use standings::services::runtime_boards::{RuntimeBoards, limit_from_env};
use standings_tests::journal::{drain_to_new_bucket, spawn_journaled};
use standings_tests::queue::{drain, new_queue, record, sqs, sqs_event};
use standings_tests::{ADMIN, ArchiveHarness, TestApp, spawn_ingest};

fn spring_cup() -> Value {
    json!({"kind": "scores", "timezone": "UTC", "periods": ["season", "all"], "top": 10, "keep": "best", "archive": true})
}

async fn submit(app: &TestApp, id: &str, user: &str, score: i64) -> (StatusCode, Value) {
    app.post("/v1/boards/spring-cup/scores", &json!({"event_id": id, "user_id": user, "score": score})).await
}

async fn keys_of(app: &TestApp, board: &str) -> Vec<String> {
    let tag = format!("{{{board}}}");
    app.written_keys().await.into_iter().filter(|key| key.contains(&tag)).collect()
}

/// The archive function's every-minute run of deleted boards' ends, on the catalog as it is now.
fn ends_job(harness: &ArchiveHarness, app: &TestApp, config: Config) -> (RuntimeBoards, Archiver<SeasonTable>) {
    let archiver = Archiver::new(
        Arc::new(config),
        app.keys.clone(),
        app.store.clone(),
        harness.table.clone(),
        harness.table.clone(),
        app.clock(),
        ArchiveHarness::settings(),
    );
    (RuntimeBoards::new(app.config.clone(), app.keys.clone(), app.store.clone(), limit_from_env()), archiver)
}

#[tokio::test]
async fn a_deleted_board_refuses_writes_at_once_then_is_archived_rank_for_rank_and_freed() {
    let harness = ArchiveHarness::new().await;
    let app = harness.app().await;
    assert_eq!(app.define("spring-cup", &spring_cup()).await.0, StatusCode::CREATED);
    for (id, user, score) in [("s1", "ann", 40), ("s2", "bo", 70), ("s3", "cy", 55), ("s4", "ann", 90)] {
        assert_eq!(submit(&app, id, user, score).await.0, StatusCode::OK);
    }
    let season = Period::containing(PeriodKind::Season, app.now(), chrono_tz::UTC);
    let live = app.ranking("spring-cup", &season).await;
    assert_eq!(live, vec!["ann", "bo", "cy"]);

    let (status, ended) = app.call(Method::DELETE, "/v1/admin/boards/spring-cup?reason=season%20over", "", ADMIN).await;
    assert_eq!(
        (status, ended["state"].as_str(), ended["ended"]["reason"].as_str()),
        (StatusCode::ACCEPTED, Some("ending"), Some("season over"))
    );
    let (again, same) = app.call(Method::DELETE, "/v1/admin/boards/spring-cup?reason=season%20over", "", ADMIN).await;
    assert_eq!((again, &same), (StatusCode::ACCEPTED, &ended), "deleting again is the same answer");

    let before = app.keyspace().await;
    let (status, body) = submit(&app, "s5", "dee", 99).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("board_ended")), "{body}");
    let correction = json!({"reason": "late fix", "set": 5});
    let (status, body) = app.call(Method::POST, "/v1/admin/boards/spring-cup/users/bo/corrections", correction.to_string(), ADMIN).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("board_ended")), "{body}");
    assert_eq!(app.keyspace().await, before, "a refused write writes nothing");
    let (status, top) = app.get("/v1/boards/spring-cup/top?period=season").await;
    assert_eq!((status, top["entries"].as_array().map(Vec::len)), (StatusCode::OK, Some(3)), "reads go on until the end is done");

    // The archive function's every-minute run ends it.
    let (boards, archiver) = ends_job(&harness, &app, boards_now(&app.config, &app.keys, &app.store).await.unwrap());
    let reports = archive::end_boards(&boards, &archiver, app.now(), Utc::now() + Duration::minutes(5)).await.unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!((reports[0].status, reports[0].season.as_deref()), ("done", Some(season.id.as_str())), "{reports:?}");
    let archived = harness.table.ranks("spring-cup", &season.id, 1, 1000).await.unwrap();
    let ranked: Vec<(&str, u64)> = archived.iter().map(|entry| (entry.user_id.as_str(), entry.rank)).collect();
    assert_eq!(ranked, vec![("ann", 1), ("bo", 2), ("cy", 3)]);

    assert_eq!(keys_of(&app, "spring-cup").await, vec![app.keys.board("spring-cup").guard()], "only the guard that refuses stays");
    let (status, _) = app.call(Method::GET, "/v1/admin/boards/spring-cup", "", ADMIN).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = app.define("spring-cup", &spring_cup()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("board_exists")), "a name is never reused: {body}");
    assert_eq!(submit(&app, "s6", "dee", 99).await.0, StatusCode::CONFLICT, "a warm instance's stale catalog still meets the guard");
    let again = archive::end_boards(&boards, &archiver, app.now(), Utc::now() + Duration::minutes(5)).await.unwrap();
    assert!(again.is_empty(), "nothing left to end: {again:?}");
    // A queued score for it is dead-lettered as ended, not as unknown (which an operator would
    // redrive): the queue's function reads its tombstone by name.
    let client = sqs().await;
    let dlq = new_queue(&client, "dlq").await;
    let queue = app.queue(queue::DeadLetters::new(client.clone(), dlq.clone()));
    let message = json!({"kind": "score", "board": "spring-cup", "event_id": "q9", "user_id": "dee", "score": 1}).to_string();
    let response = queue.handle(sqs_event(vec![record("m9", &message, 1)])).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let dead: Vec<String> = drain(&client, &dlq).await.into_iter().map(|(_, code, _)| code).collect();
    assert_eq!(dead, ["board_ended"]);

    // Its archived season is still read by its name; it is no board to list any more.
    // (The `seasons` function has not read its catalog yet in this test: it reads it now.)
    let (status, archived) = app.get(&format!("/v1/boards/spring-cup/seasons/{}/top", season.id)).await;
    let users: Vec<&str> =
        archived["entries"].as_array().map(|e| e.iter().filter_map(|e| e["user_id"].as_str()).collect()).unwrap_or_default();
    assert_eq!((status, users), (StatusCode::OK, vec!["ann", "bo", "cy"]), "{archived}");
    let (_, listed) = app.get("/v1/boards").await;
    assert!(listed["boards"].as_array().unwrap().iter().all(|b| b["name"] != "spring-cup"), "{listed}");
}

/// A deleted one-rule board's archived season still counts the action in each row
/// (`<action>_count`): its tombstone keeps its rules, which a read of its history uses.
#[tokio::test]
async fn a_deleted_one_rule_boards_archived_season_still_counts_its_action() {
    let harness = ArchiveHarness::new().await;
    let app = harness.app().await;
    let board = json!({"kind": "cumulative", "timezone": "UTC", "periods": ["season"], "top": 10, "archive": true,
        "rules": [{"action": "referral_made", "points": 50, "scope": "none"}]});
    assert_eq!(app.define("referrals", &board).await.0, StatusCode::CREATED);
    for (id, user) in [("r1", "ann"), ("r2", "ann"), ("r3", "bo")] {
        let (status, body) = app.event(json!({"event_id": id, "user_id": user, "action": "referral_made"})).await;
        assert!(status.is_success(), "{body}");
    }
    let season = Period::containing(PeriodKind::Season, app.now(), chrono_tz::UTC);
    assert_eq!(app.call(Method::DELETE, "/v1/admin/boards/referrals?reason=over", "", ADMIN).await.0, StatusCode::ACCEPTED);
    let (boards, archiver) = ends_job(&harness, &app, boards_now(&app.config, &app.keys, &app.store).await.unwrap());
    let reports = archive::end_boards(&boards, &archiver, app.now(), Utc::now() + Duration::minutes(5)).await.unwrap();
    assert_eq!(reports.iter().map(|r| r.status).collect::<Vec<_>>(), ["done"], "{reports:?}");
    let (status, archived) = app.get(&format!("/v1/boards/referrals/seasons/{}/top", season.id)).await;
    let rows: Vec<(&str, i64)> = archived["entries"]
        .as_array()
        .map(|e| e.iter().map(|e| (e["user_id"].as_str().unwrap_or("?"), e["referral_made_count"].as_i64().unwrap_or(-1))).collect())
        .unwrap_or_default();
    assert_eq!((status, rows), (StatusCode::OK, vec![("ann", 2), ("bo", 1)]), "{archived}");
}

#[tokio::test]
async fn a_queued_score_for_a_runtime_board_is_applied_once() {
    let app = spawn_ingest().await.reading_runtime_boards();
    assert_eq!(app.define("spring-cup", &spring_cup()).await.0, StatusCode::CREATED);
    let client = sqs().await;
    let queue = app.queue(queue::DeadLetters::new(client.clone(), new_queue(&client, "dlq").await));
    let message = json!({"kind": "score", "board": "spring-cup", "event_id": "q1", "user_id": "ann", "score": 42}).to_string();
    let response = queue.handle(sqs_event(vec![record("m1", &message, 1), record("m2", &message, 2)])).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let (status, me) = app.get("/v1/boards/spring-cup/users/ann?period=all").await;
    assert_eq!((status, me["score"].as_i64()), (StatusCode::OK, Some(42)), "{me}");
}

#[tokio::test]
async fn a_restore_after_every_key_was_lost_brings_runtime_boards_and_their_definitions_back() {
    let (_server, app) = own_redis().await;
    let quiz = json!({"kind": "cumulative", "timezone": "UTC", "periods": ["day", "all"], "top": 10, "statements": true,
        "rules": [{"action": "quiz_passed", "points": 7, "scope": "none"}]});
    assert_eq!(app.define("quiz", &quiz).await.0, StatusCode::CREATED);
    assert_eq!(app.define("spring-cup", &spring_cup()).await.0, StatusCode::CREATED);
    for (i, user) in ["ann", "bo", "ann", "cy"].iter().enumerate() {
        assert_eq!(app.event(json!({"event_id": format!("q{i}"), "user_id": user, "action": "quiz_passed"})).await.0, StatusCode::OK);
        assert_eq!(submit(&app, &format!("s{i}"), user, 10 * i as i64 + 5).await.0, StatusCode::OK);
    }
    assert_eq!(app.event(json!({"event_id": "late", "user_id": "dee", "action": "quiz_passed"})).await.0, StatusCode::OK);
    // A board deleted before the loss (its end not run yet) must come back refusing writes.
    assert_eq!(app.call(Method::DELETE, "/v1/admin/boards/spring-cup", "", ADMIN).await.0, StatusCode::ACCEPTED);
    // Drained to S3 in objects of 3 lines (a total loss takes the streams too).
    let (client, bucket) = drain_to_new_bucket(&app, 3).await;
    let before = state(&app).await;
    let catalog = [app.keys.catalog().definitions(), app.keys.catalog().catalog_version()];
    assert!(catalog.iter().all(|key| before.iter().any(|(name, ..)| name == key)), "the catalog is in the state compared");

    // Every key of the deployment lost, the catalog's guard too.
    let mut conn = app.redis.clone();
    let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    let (status, body) = app.event(json!({"event_id": "lost", "user_id": "eve", "action": "quiz_passed"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{body}");
    let (status, body) = app.define("other", &spring_cup()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{body}");

    let jobs = app.journal_jobs(&client, &bucket, Arc::default());
    let report = jobs.restorer.restore(None, Utc::now() + Duration::minutes(5)).await.unwrap();
    assert_eq!(report.status, journal::Status::Complete, "{report:?}");
    let names: Vec<&str> = report.boards.iter().map(|b| b.board.as_str()).collect();
    assert!(names[0] == "_catalog" && names.contains(&"quiz") && names.contains(&"spring-cup"), "{names:?}");
    assert_eq!(state(&app).await, before, "every key back, byte for byte");
    assert_eq!(app.event(json!({"event_id": "late", "user_id": "dee", "action": "quiz_passed"})).await.1["duplicate"], true);
    let (status, me) = app.get("/v1/boards/quiz/users/ann?period=all").await;
    assert_eq!((status, me["score"].as_i64()), (StatusCode::OK, Some(14)), "{me}");
    let (status, body) = submit(&app, "after", "eve", 1).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("board_ended")), "{body}");
}

/// A journaled app on a redis-server of the test's own, to be emptied by a literal FLUSHALL.
async fn own_redis() -> (standings_tests::servers::RedisServer, TestApp) {
    let server = standings_tests::servers::RedisServer::start(&[]).await;
    let settings = standings::redis::settings::RedisSettings::standalone(&server.url());
    let app = standings_tests::journal::spawn_journaled_at(standings::domain::config::Config::default_boards(), &settings)
        .await
        .reading_runtime_boards();
    (server, app)
}

/// Every key with its value and expiry, but the journal streams (drained, not a board's state).
async fn state(app: &TestApp) -> Vec<(String, Vec<u8>, i64)> {
    app.keyspace().await.into_iter().filter(|(key, ..)| !key.ends_with(":journal")).collect()
}

#[tokio::test]
async fn an_event_feeding_a_deleted_board_and_a_declared_one_still_counts_on_the_declared_one() {
    let app = spawn_ingest().await;
    let shared = json!({"kind": "cumulative", "timezone": "UTC", "periods": ["all"], "top": 10,
        "rules": [{"action": "comment", "points": 1, "scope": "none"}]});
    assert_eq!(app.define("chatter", &shared).await.0, StatusCode::CREATED);
    // A warm container that read the catalog before the deletion.
    let stale = app.ingest_instance(std::time::Duration::from_secs(3600), 10);
    let comment = |id: &str| json!({"event_id": id, "user_id": "ann", "action": "comment", "target": format!("post-{id}")});
    let (status, body) =
        standings_tests::runtime::call_on(&stale, Method::POST, "/v1/events", &comment("c0"), standings_tests::WRITER).await;
    assert_eq!((status, body["results"].as_array().map(Vec::len)), (StatusCode::OK, Some(2)), "both boards: {body}");
    assert_eq!(app.call(Method::DELETE, "/v1/admin/boards/chatter", "", ADMIN).await.0, StatusCode::ACCEPTED);

    let (status, body) =
        standings_tests::runtime::call_on(&stale, Method::POST, "/v1/events", &comment("c1"), standings_tests::WRITER).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let result = |board: &str| body["results"].as_array().unwrap().iter().find(|r| r["board"] == board).cloned().unwrap();
    assert_eq!(result("activity")["applied"], true, "{body}");
    assert_eq!(
        (result("chatter")["applied"].as_bool(), result("chatter")["reason"].as_str()),
        (Some(false), Some("board_ended")),
        "{body}"
    );
    let (status, body) = app.event(comment("c2")).await;
    let boards: Vec<&str> = body["results"].as_array().unwrap().iter().filter_map(|r| r["board"].as_str()).collect();
    assert_eq!((status, boards), (StatusCode::OK, vec!["activity"]), "a fresh catalog sends nothing to an ending board");
    let all = Period::containing(PeriodKind::All, app.now(), chrono_tz::UTC);
    assert_eq!(app.points("chatter", all, "ann").await, Some(1), "only the comment before the deletion");
}

#[tokio::test]
async fn a_runtime_board_is_voided_from_its_journal_and_verified_against_it() {
    let app = spawn_journaled(standings::domain::config::Config::default_boards()).await.reading_runtime_boards();
    let quiz = json!({"kind": "cumulative", "timezone": "UTC", "periods": ["all"], "top": 10,
        "rules": [{"action": "quiz_passed", "points": 7, "scope": "none"}]});
    assert_eq!(app.define("quiz", &quiz).await.0, StatusCode::CREATED);
    // The journal's objects are dated by Redis's clock: the writes are made now.
    app.set_now(Utc::now());
    let from = app.now() - Duration::minutes(1);
    for (i, user) in ["ann", "ann", "bo"].iter().enumerate() {
        assert_eq!(app.event(json!({"event_id": format!("q{i}"), "user_id": user, "action": "quiz_passed"})).await.0, StatusCode::OK);
    }
    let (client, bucket) = drain_to_new_bucket(&app, 2).await;

    // The `void` function, built on the declared boards, finds the runtime board in its catalog.
    let void = json!({"void_id": "v1", "from": from, "to": app.now() + Duration::minutes(1), "reason": "answers leaked"});
    let router = app.void_router(&client, Some(&bucket), 30);
    let (status, receipt) =
        standings_tests::journal::call(&router, Method::POST, "/v1/admin/boards/quiz/users/ann/void", &void, ADMIN).await;
    assert_eq!((status, receipt["periods"][0]["delta"].as_i64()), (StatusCode::OK, Some(-14)), "{receipt}");
    let all = Period::containing(PeriodKind::All, app.now(), chrono_tz::UTC);
    assert_eq!(
        (app.points("quiz", all.clone(), "ann").await, app.points("quiz", all, "bo").await),
        (None, Some(7)),
        "ann leaves the board"
    );

    // The journal function's jobs are built on the boards as of each invocation.
    let config = Arc::new(boards_now(&app.config, &app.keys, &app.store).await.unwrap());
    let sink = standings::runtime::metrics::Metrics::with_sink(journal::FUNCTION, Arc::new(|_| ()));
    let jobs = journal::Jobs::new(config, app.keys.clone(), app.store.clone(), journal::S3Objects::new(client, &bucket), sink, app.clock());
    let drained = jobs.drainer.drain(Utc::now() + Duration::minutes(5)).await;
    assert!(drained.boards.iter().all(|b| b.error.is_none()) && drained.entries > 0, "the void's line: {drained:?}");
    let report = jobs.checker.verify(Some("quiz"), Utc::now() + Duration::minutes(5)).await.unwrap();
    assert_eq!(report.mismatches, 0, "{report:?}");
}

#[tokio::test]
async fn a_board_whose_end_is_done_reads_empty_and_refuses_writes_before_and_after_a_loss() {
    let (_server, app) = own_redis().await;
    let sprint = json!({"kind": "scores", "timezone": "UTC", "periods": ["all"], "top": 10, "keep": "best"});
    assert_eq!(app.define("sprint", &sprint).await.0, StatusCode::CREATED);
    assert_eq!(app.post("/v1/boards/sprint/scores", &json!({"event_id": "s1", "user_id": "ann", "score": 7})).await.0, StatusCode::OK);
    assert_eq!(app.call(Method::DELETE, "/v1/admin/boards/sprint?reason=over", "", ADMIN).await.0, StatusCode::ACCEPTED);
    let (client, bucket) = drain_to_new_bucket(&app, 100).await;
    let table = standings_tests::archive::unique_season_table().await;
    let config = Arc::new(boards_now(&app.config, &app.keys, &app.store).await.unwrap());
    let archiver = standings::archive::job::Archiver::new(
        config,
        app.keys.clone(),
        app.store.clone(),
        table.clone(),
        table,
        app.clock(),
        ArchiveHarness::settings(),
    );
    let boards = RuntimeBoards::new(app.config.clone(), app.keys.clone(), app.store.clone(), limit_from_env());
    let reports = archive::end_boards(&boards, &archiver, app.now(), Utc::now() + Duration::minutes(5)).await.unwrap();
    assert_eq!(reports.iter().map(|r| r.status).collect::<Vec<_>>(), vec!["done"], "{reports:?}");

    ended(&app, "after its end").await;

    // The end's removal from the catalog drained too: a loss after it.
    let drained = app
        .drainer(standings::archive::s3::S3Objects::new(client.clone(), &bucket), Arc::default())
        .drain(Utc::now() + Duration::minutes(5))
        .await;
    assert!(drained.boards.iter().all(|b| b.error.is_none()), "{:?}", drained.boards);
    let mut conn = app.redis.clone();
    let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    let jobs = app.journal_jobs(&client, &bucket, Arc::default());
    let report = jobs.restorer.restore(None, Utc::now() + Duration::minutes(5)).await.unwrap();
    assert_eq!(report.status, journal::Status::Complete, "{report:?}");
    ended(&app, "after a loss and a restore").await;
}

/// What a board whose end is done answers: an empty top (its keys freed), a write 409.
async fn ended(app: &TestApp, when: &str) {
    let (status, top) = app.get("/v1/boards/sprint/top?period=all").await;
    assert_eq!((status, top["entries"].as_array().map(Vec::len)), (StatusCode::OK, Some(0)), "{when}: {top}");
    let (status, body) = app.post("/v1/boards/sprint/scores", &json!({"event_id": "s2", "user_id": "bo", "score": 9})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("board_ended")), "{when}: {body}");
}
