//! `POST /v1/boards/{board}/scores:batch`: up to 500 submissions in one request, applied in
//! order with one script call per chunk of 100, each answered as a single submission would be;
//! an invalid one refuses the batch and writes nothing. Submissions are counted in the
//! `ScoreSubmissions` metric like events in `Events`.

use std::collections::HashMap;

use axum::http::Method;
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::{ADMIN, TestApp, at, spawn_ingest_with};

fn game() -> Config {
    Config::parse(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"best\"\ntimezone = \"UTC\"\nperiods = [\"day\", \"all\"]\ntop = 10\n",
    )
    .unwrap()
}

async fn batch(app: &TestApp, scores: Vec<Value>) -> (u16, Value) {
    let (status, body) = app.post("/v1/boards/game/scores:batch", &json!({ "scores": scores })).await;
    (status.as_u16(), body)
}

fn metric(app: &TestApp, outcome: &str, code: Option<&str>) -> f64 {
    app.metrics
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"] == "ScoreSubmissions" && l["Outcome"] == outcome)
        .filter(|l| code.is_none_or(|c| l["Code"] == c))
        .map(|l| l["ScoreSubmissions"].as_f64().unwrap())
        .sum()
}

#[tokio::test]
async fn a_batch_of_250_applies_in_order_in_three_script_calls_with_one_answer_each() {
    let app = spawn_ingest_with(game()).await;
    app.set_now(at("2026-11-22T10:00:00Z"));
    // The store's policy probe happens on the first write; count only the batch's calls.
    let (status, _) = app.post("/v1/boards/game/scores", &json!({"event_id": "warm", "user_id": "w", "score": 1})).await;
    assert_eq!(status, 200);
    let mut scores: Vec<Value> =
        (0..248).map(|i| json!({"event_id": format!("s{i}"), "user_id": format!("u{}", i % 40), "score": (i * 37) % 1000})).collect();
    scores.push(json!({"event_id": "s0", "user_id": "u0", "score": 0}));
    scores.push(json!({"event_id": "s1", "user_id": "u1", "score": 999}));
    let before = app.store.round_trips();
    let (status, reply) = batch(&app, scores.clone()).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(app.store.round_trips() - before, 3, "one script call per chunk of 100");

    let results = reply["results"].as_array().unwrap();
    assert_eq!(results.len(), 250);
    assert_eq!(results[248]["duplicate"], true, "the same id again in one batch is a duplicate: {}", results[248]);
    assert_eq!((results[249]["status"].as_u64(), results[249]["error"]["code"].as_str()), (Some(409), Some("idempotency_conflict")));
    // The model: each user's best of the distinct submissions.
    let mut best: HashMap<String, i64> = HashMap::new();
    for i in 0..248 {
        let entry = best.entry(format!("u{}", i % 40)).or_insert(0);
        *entry = (*entry).max((i * 37) % 1000);
    }
    let (_, top) = app.get("/v1/boards/game/top?period=all&limit=100").await;
    let stored: HashMap<String, i64> = top["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["user_id"] != "w")
        .map(|e| (e["user_id"].as_str().unwrap().to_owned(), e["score"].as_i64().unwrap()))
        .collect();
    assert_eq!(stored, best);

    // A retry of the whole batch is all duplicates (the conflict stays a conflict) and writes nothing.
    let keyspace = app.keyspace().await;
    let (_, again) = batch(&app, scores).await;
    let again = again["results"].as_array().unwrap();
    assert!(again[..249].iter().all(|r| r["duplicate"] == true));
    assert_eq!(again[249]["status"], 409);
    assert_eq!(app.keyspace().await, keyspace);
    assert_eq!(metric(&app, "applied", None) + metric(&app, "refused", Some("not_better")), 249.0, "warm + 248 first deliveries");
    assert_eq!(metric(&app, "duplicate", None), 250.0);
    assert_eq!(metric(&app, "refused", Some("idempotency_conflict")), 2.0);
}

#[tokio::test]
async fn each_item_gets_its_own_refusal_and_the_rest_apply() {
    let app = spawn_ingest_with(game()).await;
    app.set_now(at("2026-11-22T10:00:00Z"));
    let (status, _) = app.call(Method::POST, "/v1/admin/users/mallory/ban", "{}", ADMIN).await;
    assert_eq!(status, 200);
    let (status, reply) = batch(
        &app,
        vec![
            json!({"event_id": "a", "user_id": "ann", "score": 5}),
            json!({"event_id": "m", "user_id": "mallory", "score": 9}),
            json!({"event_id": "late", "user_id": "bob", "score": 7, "occurred_at": "2026-11-22T09:00:00Z"}),
            json!({"event_id": "b", "user_id": "bob", "score": 6}),
        ],
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let codes: Vec<Option<&str>> = reply["results"].as_array().unwrap().iter().map(|r| r["error"]["code"].as_str()).collect();
    assert_eq!(codes, [None, Some("user_banned"), Some("too_late"), None], "{reply}");
    assert_eq!(reply["results"][1]["status"], 422);
    let (_, top) = app.get("/v1/boards/game/top?period=day").await;
    let users: Vec<&str> = top["entries"].as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap()).collect();
    assert_eq!(users, ["bob", "ann"]);
}

#[tokio::test]
async fn an_invalid_item_an_unknown_board_or_too_many_refuse_the_whole_batch_and_write_nothing() {
    let app = spawn_ingest_with(game()).await;
    let before = app.keyspace().await;
    let ok = json!({"event_id": "a", "user_id": "ann", "score": 5});
    let (status, reply) = batch(&app, vec![ok.clone(), json!({"event_id": "b", "user_id": "bob", "score": -1})]).await;
    assert_eq!((status, reply["error"]["code"].as_str()), (422, Some("out_of_range")), "{reply}");
    assert!(reply["error"]["message"].as_str().unwrap().starts_with("scores[1]"), "{reply}");
    let (status, reply) = batch(&app, vec![ok.clone(), json!({"event_id": "b c", "user_id": "bob", "score": 1})]).await;
    assert_eq!((status, reply["error"]["code"].as_str()), (400, Some("invalid_id")), "{reply}");
    let (status, _) = batch(&app, vec![ok.clone(); 501]).await;
    assert_eq!(status, 413);
    let (status, reply) = app.post("/v1/boards/nope/scores:batch", &json!({"scores": [ok.clone()]})).await;
    assert_eq!((status.as_u16(), reply["error"]["code"].as_str()), (404, Some("unknown_board")));
    let (status, _) = app.post("/v1/boards/game/scores:batch", &json!({"scores": [ok], "extra": 1})).await;
    assert_eq!(status, 400);
    let (status, _) =
        app.call(Method::POST, "/v1/boards/game/scores:batch", json!({"scores": []}).to_string(), standings_tests::Caller::Anonymous).await;
    assert_eq!(status, 401);
    assert_eq!(app.keyspace().await, before);
}
