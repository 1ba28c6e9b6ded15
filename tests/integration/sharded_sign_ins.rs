//! Sign-ins on a board spread over shards (docs/scaling.md): the same steps on a board of 5
//! shards and of one give the same answers, boards, calendars and statements; each user's keys
//! are in that user's shard; a queue batch is one call per shard it touches.

use axum::http::StatusCode;
use serde_json::json;
use standings::domain::config::Config;
use standings::redis::keys::slot;
use standings_tests::{at, spawn_ingest_with};

const SHARDS: u32 = 5;

fn signing(shards: u32) -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"daily\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"month\", \"all\"]\ntop = 10\nstatements = true\nshards = {shards}\nrules = [{{ action = \"a\", points = 1, scope = \"none\" }}]\nsign_in = {{ points = 2, streak_bonuses = [[3, 5]] }}\n"
    ))
    .unwrap()
}

/// Sign-ins on a board of 5 shards and of one, in the same steps (days with gaps, late
/// sign-ins for yesterday, repeats): the same answers, boards, calendars and statements; each
/// sign-in's keys in its user's shard.
#[tokio::test]
async fn sign_ins_on_a_sharded_board_answer_and_read_as_on_one_slot() {
    let (solo, wide) = (spawn_ingest_with(signing(1)).await, spawn_ingest_with(signing(SHARDS)).await);
    let mut steps = Vec::new();
    for day in 1..=6u32 {
        for user in 0..14u32 {
            if (user + day) % 4 != 0 {
                steps.push((day, 9, json!({"event_id": format!("s{day}-{user}"), "user_id": format!("u{user}")})));
            }
        }
        // Late, for yesterday, and a repeat.
        steps.push((day, 10, json!({"event_id": format!("late{day}"), "user_id": "u3", "date": format!("2026-11-{:02}", day.max(2) - 1)})));
        steps.push((day, 11, json!({"event_id": format!("s{day}-1"), "user_id": "u1"})));
    }
    for (day, hour, body) in steps {
        for app in [&solo, &wide] {
            app.set_now(at(&format!("2026-11-{day:02}T{hour:02}:00:00Z")));
        }
        let (a, b) = (solo.post("/v1/sign-ins", &body).await, wide.post("/v1/sign-ins", &body).await);
        assert_eq!(a, b, "{body}");
    }
    for path in [
        "/v1/boards/daily/top?period=all&limit=20",
        "/v1/boards/daily/top?period=month&rank_mode=competition",
        "/v1/boards/daily/users/u3?period=all&around=3",
        "/v1/boards/daily/users/u3/statement?period=all",
        "/v1/users/u3/sign-ins?month=2026-11",
        "/v1/users/u5/sign-ins?month=2026-11",
    ] {
        let (a, b) = (solo.get(path).await, wide.get(path).await);
        assert_eq!(a.0, StatusCode::OK, "{path}: {}", a.1);
        assert_eq!(a, b, "{path}");
    }
    let tags: Vec<String> = wide.keys.layout("daily", SHARDS).all().iter().map(|keys| keys.guard()).collect();
    let mut bitmaps = 0;
    for key in wide.written_keys().await.into_iter().filter(|key| key.contains("{daily") && !key.ends_with(":layout")) {
        assert!(tags.iter().any(|guard| slot(guard) == slot(&key)), "{key} is in a shard's slot");
        // A user's day bitmaps and statements: in that user's shard.
        if let Some(user) = key.split(':').find(|part| part.starts_with('u') && part[1..].parse::<u32>().is_ok()) {
            assert_eq!(slot(&key), slot(&tags[wide.keys.layout("daily", SHARDS).shard_of(user)]), "{key}");
            bitmaps += usize::from(key.contains(":signin:"));
        }
    }
    assert!(bitmaps >= 14, "every user's bitmap checked: {bitmaps}");
}

/// A queue batch of sign-ins and events on a sharded board: one script call per shard it
/// touches for the sign-ins, each applied once (a redelivery is a duplicate).
#[tokio::test]
async fn a_queue_batch_on_a_sharded_board_is_a_call_per_shard_each_applied_once() {
    use standings_tests::queue::{new_queue, record, sqs, sqs_event};
    let app = spawn_ingest_with(signing(SHARDS)).await;
    app.set_now(at("2026-11-03T09:00:00Z"));
    let client = sqs().await;
    let queue = app.queue(queue::DeadLetters::new(client.clone(), new_queue(&client, "dlq").await));
    let users: Vec<String> = (0..12).map(|u| format!("u{u}")).collect();
    let mut records: Vec<_> = users
        .iter()
        .enumerate()
        .map(|(i, user)| {
            record(&format!("m{i}"), &json!({"kind": "sign_in", "event_id": format!("s-{user}"), "user_id": user}).to_string(), 1)
        })
        .collect();
    records.push(record("again", &json!({"kind": "sign_in", "event_id": "s-u3", "user_id": "u3"}).to_string(), 2));
    // Warm: the script loaded, the layout probed, the catalog read.
    assert_eq!(app.post("/v1/sign-ins", &json!({"event_id": "warm", "user_id": "warm"})).await.0, StatusCode::OK);
    queue.catalog.current().await.unwrap();
    let before = app.store.round_trips();
    let response = queue.handle(sqs_event(records)).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    let shards =
        users.iter().map(|user| app.keys.layout("daily", SHARDS).shard_of(user)).collect::<std::collections::HashSet<_>>().len() as u64;
    assert_eq!(app.store.round_trips() - before, shards, "one call per shard touched");
    let (_, top) = app.get("/v1/boards/daily/top?period=all&limit=50").await;
    assert_eq!(top["total"], 13, "{top}");
    assert!(top["entries"].as_array().unwrap().iter().all(|e| e["score"] == 2), "each signed in once: {top}");
}
