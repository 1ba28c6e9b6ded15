//! Rule boards spread over shards (docs/scaling.md): generated events (gives, take-backs, a
//! daily cap, repeats, batches), corrections, voids and bans go to a rule board in one slot and to
//! the same board over shards in the same steps; every answer and every read of the sharded
//! one equals the one-slot board's (`rule_model.rs` holds that one to a model written from the
//! documented rules). Also: a write is one call in its user's shard, concurrent events sum
//! exactly, the journal drains, verifies and restores shard by shard, a reshard moves the
//! board, and the rules no shard can keep are refused naming the field.

use std::sync::{Arc, Mutex};

use axum::http::{Method, StatusCode};
use chrono::{Duration, Utc};
use journal::{Restorer, S3Objects, Status};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::redis::keys::slot;
use standings_tests::journal::{new_bucket, s3, spawn_journaled, spawn_journaled_on};
use standings_tests::{ADMIN, TestApp, as_either_board, at, spawn_ingest_with};

const SHARDS: u32 = 5;
pub(crate) const USERS: u8 = 12;

pub(crate) fn board(name: &str, shards: u32) -> String {
    format!(
        "[[boards]]\nname = \"{name}\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"day\", \"all\"]\ntop = 10\nstatements = true\nshards = {shards}\nrules = [\n  {{ action = \"lesson\", points = 10, scope = \"none\", daily_cap = 30 }},\n  {{ action = \"review\", points = 4, scope = \"user_target_day\", reversible = true }},\n]\n"
    )
}

fn pair() -> Config {
    Config::parse(&format!("{}{}", board("solo", 1), board("wide", SHARDS))).unwrap()
}

#[derive(Debug, Clone)]
pub(crate) enum Op {
    Event {
        id: u8,
        user: u8,
        review: bool,
        target: u8,
        active: bool,
        advance: i64,
    },
    Batch(Vec<(u8, u8, bool, u8, bool)>),
    Correct {
        user: u8,
        delta: i64,
    },
    Ban {
        user: u8,
        banned: bool,
    },
    /// The user's points from events of the last `secs` seconds taken away (the `void` function).
    Void {
        user: u8,
        secs: i64,
    },
}

pub(crate) fn event(id: u8, user: u8, review: bool, target: u8, active: bool) -> Value {
    // Only a review can be taken back.
    let (action, active) = if review { ("review", active) } else { ("lesson", true) };
    json!({"event_id": format!("e{user}-{id}"), "user_id": format!("u{user}"), "action": action, "target": format!("c{target}"), "active": active})
}

pub(crate) fn ops() -> impl Strategy<Value = Vec<Op>> {
    let item = (0u8..30, 0..USERS, any::<bool>(), 0u8..3, prop_oneof![4 => Just(true), 1 => Just(false)]);
    let op = prop_oneof![
        8 => (item.clone(), prop_oneof![3 => Just(0i64), 1 => 1i64..90, 1 => Just(86_400i64)])
            .prop_map(|((id, user, review, target, active), advance)| Op::Event { id, user, review, target, active, advance }),
        2 => prop::collection::vec(item, 1..8).prop_map(Op::Batch),
        1 => (0..USERS, -15i64..15).prop_map(|(user, delta)| Op::Correct { user, delta }),
        1 => (0..USERS, any::<bool>()).prop_map(|(user, banned)| Op::Ban { user, banned }),
        1 => (0..USERS, 1i64..7_200).prop_map(|(user, secs)| Op::Void { user, secs }),
    ];
    prop::collection::vec(op, 1..25)
}

/// An event's answer, board by board: each event feeds both boards.
pub(crate) fn both(receipt: &Value) -> Result<(Value, Value), TestCaseError> {
    let results = receipt["results"].as_array().cloned().unwrap_or_default();
    prop_assert_eq!(results.len(), 2, "{}", receipt);
    Ok((as_either_board(results[0].clone(), true), as_either_board(results[1].clone(), true)))
}

pub(crate) async fn same_reads(app: &TestApp) -> Result<(), TestCaseError> {
    let mut paths = Vec::new();
    for period in ["day", "all"] {
        for mode in ["unique", "competition"] {
            for (offset, limit) in [(0, 10), (3, 4)] {
                paths.push(format!("top?period={period}&rank_mode={mode}&offset={offset}&limit={limit}"));
            }
            for user in (0..USERS).step_by(3) {
                paths.push(format!("users/u{user}?period={period}&rank_mode={mode}&around=2"));
            }
        }
        paths.push(format!("distribution?period={period}&buckets=4"));
        paths.push(format!("users/u2/statement?period={period}"));
    }
    for path in paths {
        let (solo_status, solo) = app.get(&format!("/v1/boards/solo/{path}")).await;
        let (wide_status, wide) = app.get(&format!("/v1/boards/wide/{path}")).await;
        prop_assert_eq!(solo_status, wide_status, "{}", path);
        prop_assert_eq!(as_either_board(solo, false), as_either_board(wide, false), "{}", path);
    }
    let ids: Vec<String> = (0..USERS + 2).rev().map(|u| format!("u{u}")).collect();
    let body = json!({"user_ids": ids, "period": "all", "rank_mode": "competition"}).to_string();
    let (_, solo) = app.call_query(Method::POST, "/v1/boards/solo/ranks", body.clone()).await;
    let (_, wide) = app.call_query(Method::POST, "/v1/boards/wide/ranks", body).await;
    prop_assert_eq!(as_either_board(solo, false), as_either_board(wide, false));
    Ok(())
}

/// A batch's body.
pub(crate) fn batch(items: &[(u8, u8, bool, u8, bool)]) -> Value {
    let events: Vec<Value> = items.iter().map(|&(id, user, review, target, active)| event(id, user, review, target, active)).collect();
    json!({ "events": events })
}

/// `op`, a correction or a void (ids from `index`), sent to board `name`: its answer.
pub(crate) async fn admin_write(app: &TestApp, voids: &axum::Router, op: &Op, index: usize, name: &str) -> (StatusCode, Value) {
    match op {
        Op::Correct { user, delta } => {
            let body =
                json!({"correction_id": format!("c{index}"), "delta": delta, "period": "all", "period_id": "all", "reason": "model"});
            app.call(Method::POST, &format!("/v1/admin/boards/{name}/users/u{user}/corrections"), body.to_string(), ADMIN).await
        }
        Op::Void { user, secs } => {
            let (from, to) = (app.now() - Duration::seconds(*secs), app.now() + Duration::seconds(1));
            let body = json!({"void_id": format!("v{index}"), "from": from, "to": to, "reason": "model"});
            standings_tests::journal::call(voids, Method::POST, &format!("/v1/admin/boards/{name}/users/u{user}/void"), &body, ADMIN).await
        }
        other => panic!("{other:?} is no admin write"),
    }
}

pub(crate) async fn step(app: &TestApp, voids: &axum::Router, op: &Op, index: usize) -> Result<(), TestCaseError> {
    match op {
        Op::Event { id, user, review, target, active, advance } => {
            app.set_now(app.now() + Duration::seconds(*advance));
            let (status, body) = app.event(event(*id, *user, *review, *target, *active)).await;
            prop_assert!(status.as_u16() < 500 && status != StatusCode::BAD_REQUEST, "{:?}: {}", op, body);
            if status == StatusCode::OK {
                let (solo, wide) = both(&body)?;
                prop_assert_eq!(solo, wide, "{:?}", op);
            }
        }
        Op::Batch(items) => {
            let (status, body) = app.post("/v1/events:batch", &batch(items)).await;
            prop_assert_eq!(status, StatusCode::OK, "{}", body);
            for result in body["results"].as_array().unwrap() {
                if result["error"].is_null() {
                    let (solo, wide) = both(result)?;
                    prop_assert_eq!(solo, wide, "{}", result);
                }
            }
        }
        Op::Correct { .. } | Op::Void { .. } => {
            let mut answers = Vec::new();
            for name in ["solo", "wide"] {
                let (status, answer) = admin_write(app, voids, op, index, name).await;
                prop_assert!(status.as_u16() < 500 && status != StatusCode::BAD_REQUEST, "{:?}: {}", op, answer);
                answers.push((status, as_either_board(answer, false)));
            }
            prop_assert_eq!(&answers[0], &answers[1], "{:?}", op);
        }
        Op::Ban { user, banned } => {
            let method = if *banned { Method::POST } else { Method::DELETE };
            let (status, body) = app.call(method, &format!("/v1/admin/users/u{user}/ban"), "{}".to_owned(), ADMIN).await;
            prop_assert_eq!(status.as_u16(), 200, "{}", body);
        }
    }
    same_reads(app).await
}

#[test]
fn a_sharded_rule_board_answers_and_reads_exactly_as_one_in_one_slot() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut runner = TestRunner::new(RunnerConfig { cases: 12, failure_persistence: None, ..RunnerConfig::default() });
    runner
        .run(&ops(), |ops| {
            runtime.block_on(async {
                let app = spawn_journaled(pair()).await;
                app.set_now(at("2026-11-22T08:00:00Z"));
                let client = s3().await;
                let voids = app.void_router(&client, Some(&new_bucket(&client).await), 30);
                for (index, op) in ops.iter().enumerate() {
                    step(&app, &voids, op, index).await?;
                }
                Ok(())
            })
        })
        .unwrap();
}

/// Every key an event writes on the sharded board is in its user's shard's slot (none in the
/// board's own slot), and, once the layout is probed, an event is one call a board.
#[tokio::test]
async fn a_sharded_rule_boards_writes_are_one_call_in_the_users_shard() {
    let app = spawn_ingest_with(Config::parse(&board("wide", SHARDS)).unwrap()).await;
    app.set_now(at("2026-11-22T08:00:00Z"));
    for user in 0..30 {
        for (i, review) in [(0, false), (1, true)] {
            let (status, body) = app.event(event(i, user, review, 0, true)).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            assert!(body["results"][0]["periods"].as_array().unwrap().iter().all(|p| p["rank"].is_null()), "{body}");
        }
    }
    let before = app.store.round_trips();
    let (status, _) = app.event(event(9, 77, false, 0, true)).await;
    assert_eq!((status, app.store.round_trips() - before), (StatusCode::OK, 1));
    let tags: Vec<String> = app.keys.layout("wide", SHARDS).all().iter().map(|keys| keys.guard()).collect();
    let mut by_shard = vec![0; SHARDS as usize];
    for key in app.written_keys().await.into_iter().filter(|key| key.contains("{wide") && !key.ends_with(":layout")) {
        assert!(!key.contains("{wide}"), "no key of the sharded board stays in the board's one slot: {key}");
        let shard = tags.iter().position(|guard| slot(guard) == slot(&key)).unwrap_or_else(|| panic!("{key} is in no shard's slot"));
        by_shard[shard] += 1;
        // Ledgers, caps and statements name their user: in that user's shard.
        if let Some(user) = key.split(':').find(|part| part.starts_with('u') && part[1..].parse::<u32>().is_ok()) {
            assert_eq!(shard, app.keys.layout("wide", SHARDS).shard_of(user), "{key}");
        }
    }
    assert!(by_shard.iter().all(|n| *n > 0), "{by_shard:?}");
}

/// 300 events from many clients at once, each sent twice at once: every one counts once, the
/// daily cap holds per user, and the board sums exactly.
#[tokio::test]
async fn concurrent_events_on_a_sharded_rule_board_sum_exactly() {
    let app = Arc::new(spawn_ingest_with(Config::parse(&board("wide", SHARDS)).unwrap()).await);
    app.set_now(at("2026-11-22T08:00:00Z"));
    let tasks: Vec<_> = (0..300u32)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move {
                // User u: 5 lessons (capped at 30 points a day) and 10 reviews of 5 targets (4 each, once).
                let (user, n) = (i % 20, i / 20);
                let body = if n < 5 {
                    json!({"event_id": format!("l{i}"), "user_id": format!("u{user}"), "action": "lesson"})
                } else {
                    json!({"event_id": format!("r{i}"), "user_id": format!("u{user}"), "action": "review", "target": format!("c{}", n % 5)})
                };
                let (first, second) = tokio::join!(app.event(body.clone()), app.event(body));
                assert_eq!((first.0, second.0), (StatusCode::OK, StatusCode::OK), "{} / {}", first.1, second.1);
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let (_, top) = app.get("/v1/boards/wide/top?period=all&limit=50").await;
    assert_eq!(top["total"], 20, "{top}");
    for entry in top["entries"].as_array().unwrap() {
        assert_eq!(entry["score"], 30 + 5 * 4, "{entry}");
    }
}

fn journaled(shards: u32) -> Config {
    Config::parse(&board("wide", shards)).unwrap()
}

fn far() -> chrono::DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

async fn reads(app: &TestApp) -> Vec<Value> {
    let mut reads = Vec::new();
    for path in
        ["top?period=all&limit=50", "top?period=day&rank_mode=competition", "users/u3?period=all&around=2", "users/u4/statement?period=all"]
    {
        let (status, body) = app.get(&format!("/v1/boards/wide/{path}")).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        reads.push(body);
    }
    reads
}

async fn write_history(app: &TestApp, from: u32, to: u32) {
    app.set_now(Utc::now());
    for i in from..to {
        // Not u5, banned after the first 40.
        let user = [0, 1, 2, 3, 4, 6, 7, 8][(i % 8) as usize];
        let (status, body) = app.event(event(i as u8, user, i % 3 == 0, (i % 4) as u8, i % 7 != 6)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

/// Each shard journals its own stream; verify replays shard by shard with no mismatch; after
/// every key is lost the restore brings every shard back byte for byte and a retry is a
/// duplicate; then a deploy of 2 shards refuses writes until the journal function's reshard
/// moves the board, after which every read is as before.
#[tokio::test]
async fn a_sharded_rule_board_journals_restores_and_reshards() {
    let app = spawn_journaled(journaled(SHARDS)).await;
    write_history(&app, 0, 40).await;
    let correction = json!({"correction_id": "c1", "delta": -3, "reason": "r", "period": "all", "period_id": "all"});
    let (status, body) = app.call(Method::POST, "/v1/admin/boards/wide/users/u2/corrections", correction.to_string(), ADMIN).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(app.call(Method::POST, "/v1/admin/users/u5/ban", "{}", ADMIN).await.0, StatusCode::OK);
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    // A void of u3's last hour: every point u3 has, read from u3's shard's journal.
    let void = json!({"void_id": "v1", "from": Utc::now() - Duration::hours(1), "to": Utc::now() + Duration::seconds(1), "reason": "ring"});
    let (status, voided) = standings_tests::journal::call(
        &app.void_router(&client, Some(&bucket), 30),
        Method::POST,
        "/v1/admin/boards/wide/users/u3/void",
        &void,
        ADMIN,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{voided}");
    assert!(
        voided["periods"].as_array().unwrap().iter().all(|p| p["delta"].as_i64() < Some(0) && p["score"].as_i64().unwrap_or(0) == 0),
        "{voided}"
    );
    let jobs = app.journal_jobs(&client, &bucket, Arc::new(Mutex::new(Vec::new())));
    let drained = jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    let names: Vec<&str> = drained["boards"].as_array().unwrap().iter().filter_map(|b| b["board"].as_str()).collect();
    for shard in app.keys.layout("wide", SHARDS).journals() {
        assert!(names.contains(&shard.as_str()), "{shard} in {names:?}");
    }
    write_history(&app, 40, 50).await;
    let verified = jobs.run(json!({"verify": {"board": "wide"}}), far()).await.expect("a verify");
    assert_eq!(verified["mismatches"], 0, "{verified}");
    // A dry-run compares rules on one layout: a candidate with other shards is refused.
    let dry = json!({"dry_run": {"board": "wide", "period": "all", "period_id": "all", "config": board("wide", 2)}});
    let refused = jobs.run(dry, far()).await.expect_err("another layout");
    assert!(format!("{refused:?}").contains("shards"), "{refused:?}");
    jobs.run(json!({"drain": {}}), far()).await.expect("a drain");

    // The catalog's keys (its record of bans among them) are the catalog's restore, not the board's
    // (a record lost while the catalog's guard survives is seeded again from the boards' guards).
    let kept = |key: &str| ![":journal", ":restore", ":layout"].iter().any(|own| key.ends_with(own)) && !key.contains("{_catalog}");
    let state = || async { app.keyspace().await.into_iter().filter(|(key, ..)| kept(key)).map(|(k, v, _)| (k, v)).collect::<Vec<_>>() };
    let (before, read_before) = (state().await, reads(&app).await);
    for key in app.written_keys().await {
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut app.redis.clone()).await.unwrap();
    }
    jobs.run(json!({"drain": {}}), far()).await.expect("a drain that sees the loss");
    let (status, body) = app.event(event(99, 1, false, 0, true)).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{body}");
    let restorer = Restorer::new(app.config.clone(), app.keys.clone(), app.store.clone(), S3Objects::new(client.clone(), &bucket));
    // Stopped after its first run: a function deployed meanwhile with 2 shards writes where the
    // data is (the restore recorded the layout first), so its writes are refused by the
    // restore's fence, and write nothing.
    let first = restorer.restore(Some("wide"), Utc::now() - Duration::seconds(1)).await.expect("the restore runs");
    assert_eq!(first.status, Status::InProgress, "{first:?}");
    let two = spawn_journaled_on(journaled(2), app.keys.clone()).await;
    two.set_now(app.now());
    let (status, body) = two.event(event(96, 1, false, 0, true)).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{body}");
    let report = restorer.restore(Some("wide"), far()).await.expect("the restore runs");
    assert_eq!((report.status, report.boards.len()), (Status::Complete, SHARDS as usize), "{report:?}");
    // (The 2-shard deploy's guards aside: its test harness marks them born.)
    let state = || async { state().await.into_iter().filter(|(key, _)| !key.contains("of2:")).collect::<Vec<_>>() };
    assert!(state().await == before, "every shard back byte for byte");
    assert_eq!(reads(&app).await, read_before);
    let (status, retry) = app.event(event(4, 4, false, 0, true)).await;
    assert_eq!((status, retry["duplicate"].as_bool()), (StatusCode::OK, Some(true)), "{retry}");

    // Two shards now: written where the data is until the board is moved, then as before.
    let (status, body) = two.event(event(98, 1, false, 0, true)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let read_before = reads(&app).await;
    let jobs = two.journal_jobs(&client, &bucket, Arc::new(Mutex::new(Vec::new())));
    let moved = jobs.run(json!({"reshard": {"board": "wide"}}), far()).await.expect("the reshard");
    assert_eq!(moved["status"], "complete", "{moved}");
    assert_eq!(reads(&two).await, read_before);
    let (status, retry) = two.event(event(4, 4, false, 0, true)).await;
    assert_eq!((status, retry["duplicate"].as_bool()), (StatusCode::OK, Some(true)), "{retry}");
    assert_eq!(two.event(event(97, 1, false, 0, true)).await.0, StatusCode::OK);
}

#[test]
fn rule_boards_that_cannot_be_sharded_are_refused_naming_the_field() {
    let base = "[[boards]]\nname = \"r\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nshards = 2\n";
    for (extra, why) in [
        ("rules = [{ action = \"invite\", points = 100, scope = \"target\" }]\n", "target"),
        ("notify = { top = 10 }\nrules = [{ action = \"a\", points = 1, scope = \"none\" }]\n", "notify"),
    ] {
        let error = Config::parse(&format!("{base}{extra}")).unwrap_err().to_string();
        assert!(error.contains("boards[0].shards") && error.contains(why), "{extra}: {error}");
    }
    assert!(Config::parse(&format!("{base}rules = [{{ action = \"a\", points = 1, scope = \"user_target\" }}]\n")).is_ok());
}

/// While a board moves from shards to one slot (configured `shards = 1`, its data still in the
/// recorded layout until the move's switch), a write lands in its user's shard and knows the
/// rank there only: it answers none, as on any sharded board, never its shard's rank for the
/// board's (docs/scaling.md#what-a-write-answers).
#[tokio::test]
async fn a_write_while_a_board_moves_to_one_slot_answers_no_shards_rank() {
    let wide = spawn_journaled(Config::parse(&board("wide", SHARDS)).unwrap()).await;
    wide.set_now(at("2026-11-22T08:00:00Z"));
    let layout = wide.keys.layout("wide", SHARDS);
    let leader = 0;
    let second = (1..USERS).find(|&u| layout.shard_of(&format!("u{u}")) != layout.shard_of(&format!("u{leader}"))).unwrap();
    for id in 0..3 {
        let (status, body) = wide.event(event(id, leader, false, 0, true)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let one = spawn_journaled_on(Config::parse(&board("wide", 1)).unwrap(), wide.keys.clone()).await;
    one.set_now(at("2026-11-22T08:00:00Z"));
    let (status, body) = one.event(event(0, second, false, 0, true)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let periods = body["results"][0]["periods"].as_array().unwrap();
    assert!(periods.iter().all(|p| p["rank"].is_null()), "first in its shard, second on the board: {body}");
    let (_, read) = one.get(&format!("/v1/boards/wide/users/u{second}?period=all")).await;
    assert_eq!((read["score"].as_i64(), read["rank"].as_i64()), (Some(10), Some(2)), "{read}");
}
