//! The online moves' tests (`online_reshard`, `score_rescale_online`): a `game` score board
//! summing scores, written while it moves, against a model of each user's sum.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use serde_json::{Value, json};
use standings::domain::config::Config;

use crate::TestApp;

/// A deadline no test reaches.
pub fn far() -> chrono::DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

/// `game` on `shards`, with `extra` lines (a `max_score`).
pub fn game(shards: u32, extra: &str) -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"sum\"\ntimezone = \"UTC\"\nperiods = [\"day\", \"all\"]\ntop = 10\nshards = {shards}\n{extra}\n"
    ))
    .unwrap()
}

/// A score sent to `game` through `app`, at the wall clock's now.
pub async fn submit(app: &TestApp, id: &str, user: &str, score: i64) -> (StatusCode, Value) {
    app.set_now(Utc::now());
    app.post("/v1/boards/game/scores", &json!({"event_id": id, "user_id": user, "score": score})).await
}

/// What the board holds: each user's sum, from its top.
pub async fn sums(app: &TestApp) -> BTreeMap<String, i64> {
    let (status, top) = app.get("/v1/boards/game/top?period=all&limit=100").await;
    assert_eq!(status, StatusCode::OK, "{top}");
    top["entries"].as_array().unwrap().iter().map(|e| (e["user_id"].as_str().unwrap().to_owned(), e["score"].as_i64().unwrap())).collect()
}

/// A write's outcome: taken (counted in `model`), or refused with one of `codes` (nothing
/// counted); anything else fails the test.
pub fn settle(model: &mut BTreeMap<String, i64>, (user, score): (&str, i64), (status, reply): (StatusCode, Value), codes: &[&str]) -> bool {
    match status {
        StatusCode::OK => {
            *model.entry(user.to_owned()).or_default() += score;
            true
        }
        StatusCode::SERVICE_UNAVAILABLE if codes.iter().any(|code| reply["error"]["code"] == *code) => false,
        other => panic!("a write during the move: {other} {reply}"),
    }
}
