//! Boards spread over shards (docs/scaling.md): generated writes to a sharded board and, in
//! the same steps, to the same board in one slot; after each step every read of the sharded
//! one (pages, a user's rank and neighbours, id lists, distributions, in both rank modes)
//! equals the one-slot board's, which `score_model.rs` holds to a model written from the
//! documented rules. Ties are reached in the same second on purpose. Also: where a sharded
//! write's keys live, and the configurations refused.

use axum::http::{Method, StatusCode};
use chrono::Duration;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::redis::keys::{SLOTS, slot};
use standings_tests::{ADMIN, TestApp, as_either_board, at, spawn_ingest_with};

const SHARDS: u32 = 5;
const USERS: u8 = 14;

fn boards(keep: &str, order: &str) -> Config {
    let board = |name: &str, shards: u32| {
        format!(
            "[[boards]]\nname = \"{name}\"\nkind = \"scores\"\nkeep = \"{keep}\"\norder = \"{order}\"\ntimezone = \"UTC\"\nperiods = [\"day\", \"all\"]\ntop = 10\nstatements = true\nshards = {shards}\n"
        )
    };
    Config::parse(&format!("{}{}", board("solo", 1), board("wide", SHARDS))).unwrap()
}

#[derive(Debug, Clone)]
enum Op {
    Score { id: u8, user: u8, score: i64, advance: i64 },
    Batch(Vec<(u8, u8, i64)>),
    Correct { user: u8, set: i64 },
    Ban { user: u8, banned: bool },
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let score = prop_oneof![6 => 0i64..6, 1 => 0i64..1000];
    let op = prop_oneof![
        8 => (0u8..40, 0..USERS, score.clone(), prop_oneof![3 => Just(0i64), 1 => 1i64..90])
            .prop_map(|(id, user, score, advance)| Op::Score { id, user, score, advance }),
        2 => prop::collection::vec((0u8..40, 0..USERS, score), 1..8).prop_map(Op::Batch),
        1 => (0..USERS, 0i64..6).prop_map(|(user, set)| Op::Correct { user, set }),
        1 => (0..USERS, any::<bool>()).prop_map(|(user, banned)| Op::Ban { user, banned }),
    ];
    prop::collection::vec(op, 1..25)
}

/// The answer without what differs by design between two boards: their names.
fn answer(mut value: Value) -> Value {
    if let Some(object) = value.as_object_mut() {
        object.remove("board");
    }
    value
}

/// An answer as both boards give it: a submission's without ranks.
fn comparable(value: Value, op: &Op) -> Value {
    as_either_board(value, matches!(op, Op::Batch(_) | Op::Score { .. }))
}

async fn apply(app: &TestApp, board: &str, op: &Op, step: usize) -> (u16, Value) {
    let (status, body) = match op {
        Op::Score { id, user, score, .. } => {
            app.post(
                &format!("/v1/boards/{board}/scores"),
                &json!({"event_id": format!("e{user}-{id}"), "user_id": format!("u{user}"), "score": score}),
            )
            .await
        }
        Op::Batch(items) => {
            let scores: Vec<Value> = items
                .iter()
                .map(|(id, user, score)| json!({"event_id": format!("e{user}-{id}"), "user_id": format!("u{user}"), "score": score}))
                .collect();
            app.post(&format!("/v1/boards/{board}/scores:batch"), &json!({ "scores": scores })).await
        }
        Op::Correct { user, set } => {
            let body = json!({"correction_id": format!("c{step}"), "set": set, "period": "all", "period_id": "all", "reason": "model"});
            app.call(Method::POST, &format!("/v1/admin/boards/{board}/users/u{user}/corrections"), body.to_string(), ADMIN).await
        }
        Op::Ban { .. } => unreachable!("a ban is of every board at once"),
    };
    (status.as_u16(), body)
}

/// Every read of both boards, compared.
async fn same_reads(app: &TestApp) -> Result<(), TestCaseError> {
    let mut paths = Vec::new();
    for period in ["day", "all"] {
        for mode in ["unique", "competition"] {
            for (offset, limit) in [(0, 10), (3, 4), (12, 5)] {
                paths.push(format!("top?period={period}&rank_mode={mode}&offset={offset}&limit={limit}"));
            }
            for user in (0..USERS).step_by(3) {
                paths.push(format!("users/u{user}?period={period}&rank_mode={mode}&around=2"));
            }
            paths.push(format!("users/u4?period={period}&rank_mode={mode}&around=0"));
        }
        paths.push(format!("distribution?period={period}&buckets=4"));
    }
    paths.push("users/u2/statement?period=all".to_owned());
    for path in paths {
        let (solo_status, solo) = app.get(&format!("/v1/boards/solo/{path}")).await;
        let (wide_status, wide) = app.get(&format!("/v1/boards/wide/{path}")).await;
        prop_assert_eq!(solo_status, wide_status, "{}", path);
        prop_assert_eq!(answer(solo), answer(wide), "{}", path);
    }
    let ids: Vec<String> = (0..USERS + 2).rev().map(|u| format!("u{u}")).collect();
    for mode in ["unique", "competition"] {
        let body = json!({"user_ids": ids, "period": "all", "rank_mode": mode}).to_string();
        let (_, solo) = app.call_query(Method::POST, "/v1/boards/solo/ranks", body.clone()).await;
        let (_, wide) = app.call_query(Method::POST, "/v1/boards/wide/ranks", body).await;
        prop_assert_eq!(answer(solo), answer(wide), "ranks {}", mode);
    }
    Ok(())
}

#[test]
fn a_sharded_board_reads_exactly_as_one_sorted_set() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut runner = TestRunner::new(RunnerConfig { cases: 10, failure_persistence: None, ..RunnerConfig::default() });
    let pairs = prop::sample::select(vec![
        ("best", "desc"),
        ("best", "asc"),
        ("latest", "desc"),
        ("latest", "asc"),
        ("sum", "desc"),
        ("sum", "asc"),
    ]);
    runner
        .run(&(pairs, ops()), |((keep, order), ops)| {
            runtime.block_on(async {
                let app = spawn_ingest_with(boards(keep, order)).await;
                app.set_now(at("2026-11-22T08:00:00Z"));
                for (step, op) in ops.iter().enumerate() {
                    if let Op::Score { advance, .. } = op {
                        app.set_now(app.now() + Duration::seconds(*advance));
                    }
                    if let Op::Ban { user, banned } = op {
                        let method = if *banned { Method::POST } else { Method::DELETE };
                        let (status, body) = app.call(method, &format!("/v1/admin/users/u{user}/ban"), "{}".to_owned(), ADMIN).await;
                        prop_assert_eq!(status.as_u16(), 200, "{}", body);
                        same_reads(&app).await?;
                        continue;
                    }
                    let (solo_status, solo) = apply(&app, "solo", op, step).await;
                    let (wide_status, wide) = apply(&app, "wide", op, step).await;
                    prop_assert_eq!(solo_status, wide_status, "{:?}: {} / {}", op, solo, wide);
                    prop_assert!(solo_status < 500 && solo_status != 400, "{:?}: {}", op, solo);
                    prop_assert_eq!(comparable(solo, op), comparable(wide, op), "{:?}", op);
                    same_reads(&app).await?;
                }
                Ok(())
            })
        })
        .unwrap();
}

#[tokio::test]
async fn a_sharded_writes_keys_are_all_in_its_users_shard() {
    let app = spawn_ingest_with(boards("best", "desc")).await;
    app.set_now(at("2026-11-22T08:00:00Z"));
    for user in 0..40 {
        let (status, body) = app
            .post("/v1/boards/wide/scores", &json!({"event_id": format!("e{user}"), "user_id": format!("u{user}"), "score": user}))
            .await;
        assert_eq!(status, 200, "{body}");
        // One script call, in the user's shard: it knows no rank on the whole board.
        assert!(body["periods"].as_array().unwrap().iter().all(|p| p["rank"].is_null()), "{body}");
    }
    // Once the layout and the policy are probed (every 30 s a container), a write is one round
    // trip: its script call in its user's shard.
    let before = app.store.round_trips();
    let (status, _) = app.post("/v1/boards/wide/scores", &json!({"event_id": "one-trip", "user_id": "u77", "score": 5})).await;
    assert_eq!((status, app.store.round_trips() - before), (StatusCode::OK, 1));
    // A user's neighbourhood is two rounds whatever the rank mode (the user's composite, then one
    // call a shard): competition ranks come with the second (each shard's count above its
    // farthest neighbour's points), not in a third.
    let mut trips = Vec::new();
    // The first read probes the board's layout (then cached).
    assert_eq!(app.get("/v1/boards/wide/users/u5?around=2").await.0, StatusCode::OK);
    for mode in ["unique", "competition"] {
        let before = app.store.round_trips();
        let (status, body) = app.get(&format!("/v1/boards/wide/users/u5?around=2&rank_mode={mode}")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        trips.push(app.store.round_trips() - before);
    }
    // The same requests: the user's composite, then one pipeline a node holding shards (a call
    // a shard in it; standalone, one node), then the profiles (a request a profile shard's slot
    // on a cluster: `sharded_nodes.rs` counts the shards' part there); a third round was as
    // many more.
    assert_eq!(trips[0], trips[1], "round trips of around-me, unique then competition");
    if !app.store.is_cluster() {
        assert_eq!(trips[1], 3);
    }
    let (status, body) = app
        .call(
            Method::POST,
            "/v1/admin/boards/wide/users/u3/corrections",
            json!({"correction_id": "c1", "set": 2, "period": "all", "period_id": "all", "reason": "r"}).to_string(),
            ADMIN,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let shard_tags: Vec<String> = app.keys.layout("wide", SHARDS).all().iter().map(|keys| keys.guard()).collect();
    let mut written_by_shard = vec![0; SHARDS as usize];
    for key in app.written_keys().await.into_iter().filter(|key| key.contains("{wide") && !key.ends_with(":layout")) {
        assert!(!key.contains("{wide}"), "no key of the sharded board stays in the board's one slot: {key}");
        let shard = shard_tags.iter().position(|guard| slot(guard) == slot(&key)).unwrap_or_else(|| panic!("{key} is in no shard's slot"));
        written_by_shard[shard] += 1;
        // A key naming a user (a statement, a rate log) is in that user's shard.
        if let Some(user) = key.split(':').find(|part| part.starts_with('u') && part[1..].parse::<u32>().is_ok()) {
            assert_eq!(shard, app.keys.layout("wide", SHARDS).shard_of(user), "{key}");
        }
        if app.store.is_cluster() {
            let server: u16 = redis::cmd("CLUSTER").arg("KEYSLOT").arg(&key).query_async(&mut app.redis.clone()).await.unwrap();
            assert_eq!(u32::from(server), slot(&key), "{key}");
        }
    }
    // The layout record is the one key in the board's own slot: read once per container per
    // 30 s (docs/scaling.md#changing-shards), by no write.
    assert!(app.written_keys().await.contains(&app.keys.board_layout("wide")));
    // Every shard took writes, each in its own slot, the slots an equal range apart.
    assert!(written_by_shard.iter().all(|n| *n > 0), "{written_by_shard:?}");
    for (k, guard) in shard_tags.iter().enumerate() {
        let k = k as u32;
        assert!((k * SLOTS / SHARDS..(k + 1) * SLOTS / SHARDS).contains(&slot(guard)), "{guard}");
    }
}

#[test]
fn boards_that_cannot_be_sharded_are_refused_naming_the_field() {
    let score = "name = \"g\"\nkind = \"scores\"\nkeep = \"best\"\ntimezone = \"UTC\"\ntop = 10\n";
    for (extra, why) in [
        ("periods = [\"all\"]\nshards = 0\n", "within 1..=64"),
        ("periods = [\"all\"]\nshards = 65\n", "within 1..=64"),
        (
            "periods = [\"week\"]\nshards = 4\nleague = { period = \"week\", cohort_size = 4, tiers = [\"bronze\", \"silver\"], promote = 1, demote = 1 }\n",
            "league",
        ),
        ("periods = [\"all\"]\nshards = 4\nnotify = { top = 10 }\n", "notify"),
    ] {
        let error = Config::parse(&format!("[[boards]]\n{score}{extra}")).unwrap_err().to_string();
        assert!(error.contains("boards[0].shards") && error.contains(why), "{extra}: {error}");
    }
    let hot = "[[boards]]\nname = \"h\"\nkind = \"decaying\"\ntimezone = \"UTC\"\ntop = 10\nshards = 2\ndecay = { mode = \"window\", window_hours = 24, weights = \"linear\", linear_step = 0.04, synthesized_ttl_secs = 300 }\n";
    let error = Config::parse(hot).unwrap_err().to_string();
    assert!(error.contains("shards"), "{error}");
}

/// Concurrent submissions to a sharded `sum` board from many clients at once: every one lands
/// once, in its user's shard, and the board sums exactly; a batch is one script call per shard
/// it touches.
#[tokio::test]
async fn concurrent_writes_to_a_sharded_board_sum_exactly_and_a_batch_is_a_call_per_shard() {
    let app = spawn_ingest_with(boards("sum", "desc")).await;
    app.set_now(at("2026-11-22T08:00:00Z"));
    let app = std::sync::Arc::new(app);
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move {
                let body = json!({"event_id": format!("c{i}"), "user_id": format!("u{}", i % 20), "score": 1 + i % 3});
                // Each sent twice at once: the second is a duplicate, never a second sum.
                let (first, second) = tokio::join!(app.post("/v1/boards/wide/scores", &body), app.post("/v1/boards/wide/scores", &body));
                assert_eq!((first.0, second.0), (StatusCode::OK, StatusCode::OK));
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let (_, top) = app.get("/v1/boards/wide/top?period=all&limit=50").await;
    let expected = |user: usize| (0..200).filter(|i| i % 20 == user).map(|i| 1 + i % 3).sum::<usize>() as i64;
    assert_eq!(top["total"], 20);
    for entry in top["entries"].as_array().unwrap() {
        let user: usize = entry["user_id"].as_str().unwrap()[1..].parse().unwrap();
        assert_eq!(entry["score"].as_i64(), Some(expected(user)), "{entry}");
    }
    let total: i64 = top["entries"].as_array().unwrap().iter().map(|e| e["score"].as_i64().unwrap()).sum();
    assert_eq!(total, (0..200).map(|i| 1 + i % 3).sum::<i64>());

    // A batch of users spread over every shard: one call per shard touched. Another test's
    // `SCRIPT FLUSH` on the shared Redis costs a call a reload: the fewest of three batches.
    let shards_touched =
        (0..40).map(|i| app.keys.layout("wide", SHARDS).shard_of(&format!("u{i}"))).collect::<std::collections::HashSet<_>>().len() as u64;
    let mut calls = Vec::new();
    for batch in 0..3 {
        let scores: Vec<Value> =
            (0..40).map(|i| json!({"event_id": format!("b{batch}-{i}"), "user_id": format!("u{i}"), "score": 1})).collect();
        let before = app.store.round_trips();
        let (status, body) = app.post("/v1/boards/wide/scores:batch", &json!({ "scores": scores })).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        calls.push(app.store.round_trips() - before);
        if calls.last() == Some(&shards_touched) {
            break;
        }
    }
    assert_eq!(calls.iter().min(), Some(&shards_touched), "{calls:?}");
}

/// Deep pages of a sharded board: each shard is read from where the page starts in it (its
/// offset found by counts, not by reading every entry before it), so any offset a board of one
/// slot serves is served, and the pages equal that board's, ties across shards included.
#[tokio::test]
async fn deep_pages_of_a_sharded_board_equal_the_one_slot_boards() {
    let app = spawn_ingest_with(boards("best", "desc")).await;
    app.set_now(at("2026-11-22T08:00:00Z"));
    // 12,200 members over 40 scores: thousands of ties, reached in the same second.
    for chunk in (0..12_200u32).collect::<Vec<_>>().chunks(500) {
        let scores: Vec<Value> =
            chunk.iter().map(|i| json!({"event_id": format!("d{i}"), "user_id": format!("m{i:05}"), "score": i * 7 % 40})).collect();
        for board in ["solo", "wide"] {
            let (status, body) = app.post(&format!("/v1/boards/{board}/scores:batch"), &json!({ "scores": scores })).await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
        app.set_now(app.now() + Duration::seconds(1));
    }
    for (offset, limit) in [(0, 50), (999, 3), (1_000, 1_000), (4_321, 17), (10_001, 100), (12_150, 100), (12_200, 5)] {
        for mode in ["unique", "competition"] {
            let path = format!("top?period=all&rank_mode={mode}&offset={offset}&limit={limit}");
            let (solo_status, solo) = app.get(&format!("/v1/boards/solo/{path}")).await;
            let (wide_status, wide) = app.get(&format!("/v1/boards/wide/{path}")).await;
            assert_eq!((solo_status, wide_status), (StatusCode::OK, StatusCode::OK), "{path}: {wide}");
            assert_eq!(answer(solo), answer(wide), "{path}");
        }
    }
}
