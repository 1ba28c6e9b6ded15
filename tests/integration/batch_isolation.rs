//! One item Redis cannot apply (a key of another type) fails alone in a batch: the items before
//! it in its chunk answer as what they did, the ones after it and every later chunk apply,
//! each once (docs/api.md, batches).

use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::{at, day, spawn_ingest, spawn_ingest_with};

fn game() -> Config {
    Config::parse(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"best\"\ntimezone = \"UTC\"\nperiods = [\"day\"]\ntop = 10\nstatements = true\n",
    )
    .unwrap()
}

fn statuses(reply: &Value) -> Vec<u64> {
    reply["results"].as_array().unwrap().iter().map(|r| r["status"].as_u64().unwrap_or(200)).collect()
}

#[tokio::test]
async fn a_score_redis_cannot_apply_fails_alone_and_later_chunks_apply() {
    let app = spawn_ingest_with(game()).await;
    app.set_now(at("2026-11-22T10:00:00Z"));
    let poisoned = app.keys.board("game").statement("bad", &day("2026-11-22"));
    let _: () = redis::cmd("SET").arg(&poisoned).arg("not a hash").query_async(&mut app.redis.clone()).await.unwrap();
    // 150 submissions: two chunks; "bad" is the 50th of the first.
    let scores: Vec<Value> = (0..150)
        .map(|i| {
            let user = if i == 49 { "bad".to_owned() } else { format!("u{i}") };
            json!({"event_id": format!("s{i}"), "user_id": user, "score": 100 + i})
        })
        .collect();
    let (status, reply) = app.post("/v1/boards/game/scores:batch", &json!({ "scores": scores })).await;
    assert_eq!(status, 200, "{reply}");
    let statuses = statuses(&reply);
    let failed: Vec<usize> = statuses.iter().enumerate().filter(|(_, s)| **s != 200).map(|(i, _)| i).collect();
    assert_eq!(failed, [49], "only the item Redis cannot apply fails: {reply}");
    let (_, top) = app.get("/v1/boards/game/top?period=day&limit=200").await;
    assert_eq!(top["entries"].as_array().unwrap().len(), 149, "every other item applied, once");
}

#[tokio::test]
async fn an_event_redis_cannot_apply_fails_alone_in_its_batch() {
    let app = spawn_ingest().await;
    let poisoned = app.keys.board("activity").day_ledger("bad", "2026-11-22");
    let _: () = redis::cmd("SET").arg(&poisoned).arg("not a hash").query_async(&mut app.redis.clone()).await.unwrap();
    let events: Vec<Value> = (0..150)
        .map(|i| {
            let user = if i == 49 { "bad".to_owned() } else { format!("u{i}") };
            json!({"event_id": format!("e{i}"), "user_id": user, "action": "comment", "target": format!("t{i}")})
        })
        .collect();
    let (status, reply) = app.post("/v1/events:batch", &json!({ "events": events })).await;
    assert_eq!(status, 200, "{reply}");
    let statuses = statuses(&reply);
    let failed: Vec<usize> = statuses.iter().enumerate().filter(|(_, s)| **s != 200).map(|(i, _)| i).collect();
    assert_eq!(failed, [49], "only the event Redis cannot apply fails: {reply}");
    for i in [0, 48, 50, 99, 149] {
        assert_eq!(app.points("activity", day("2026-11-22"), &format!("u{i}")).await, Some(3), "u{i}");
    }
}
