//! Score boards can be moderated without a ban: on the corrections route an admin removes an
//! entry (`remove: true`), sets the kept score (`set`), or adds to a `sum` (`delta`), audited
//! and exactly once per `correction_id`, on the real `correct_score.lua`.

use axum::http::Method;
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::domain::scores::MAX_SCORE;
use standings_tests::{ADMIN, TestApp, at, spawn_ingest_with};

fn game(keep: &str, order: &str) -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"{keep}\"\norder = \"{order}\"\ntimezone = \"UTC\"\nperiods = [\"day\", \"all\"]\ntop = 10\nstatements = true\n"
    ))
    .unwrap()
}

async fn submit(app: &TestApp, event_id: &str, user: &str, score: i64) {
    let (status, body) = app.post("/v1/boards/game/scores", &json!({"event_id": event_id, "user_id": user, "score": score})).await;
    assert_eq!(status, 200, "{body}");
}

async fn correct(app: &TestApp, user: &str, body: Value) -> (u16, Value) {
    let (status, reply) = app.call(Method::POST, &format!("/v1/admin/boards/game/users/{user}/corrections"), body.to_string(), ADMIN).await;
    (status.as_u16(), reply)
}

/// (user, score) of a period's top list.
async fn top(app: &TestApp, period: &str) -> Vec<(String, i64)> {
    let (status, body) = app.get(&format!("/v1/boards/game/top?period={period}")).await;
    assert_eq!(status, 200, "{body}");
    body["entries"].as_array().unwrap().iter().map(|e| (e["user_id"].as_str().unwrap().to_owned(), e["score"].as_i64().unwrap())).collect()
}

#[tokio::test]
async fn a_cheaters_maximum_is_removed_from_every_live_period_without_a_ban_exactly_once() {
    let app = spawn_ingest_with(game("best", "desc")).await;
    app.set_now(at("2026-11-22T10:00:00Z"));
    submit(&app, "s1", "ann", 900).await;
    submit(&app, "s2", "cheater", MAX_SCORE).await;
    assert_eq!(top(&app, "all").await[0], ("cheater".to_owned(), MAX_SCORE));

    let body = json!({"correction_id": "c1", "reason": "impossible score", "remove": true});
    let (status, receipt) = correct(&app, "cheater", body.clone()).await;
    assert_eq!(status, 200, "{receipt}");
    assert_eq!((&receipt["removed"], &receipt["duplicate"]), (&json!(true), &json!(false)), "{receipt}");
    let periods = receipt["periods"].as_array().unwrap();
    assert_eq!(periods.len(), 2, "every live period: {receipt}");
    assert!(periods.iter().all(|p| p["score"].is_null() && p["rank"].is_null() && p["delta"] == -MAX_SCORE), "{receipt}");
    for period in ["day", "all"] {
        assert_eq!(top(&app, period).await, [("ann".to_owned(), 900)], "{period}");
    }
    let (status, standing) = app.get("/v1/boards/game/users/cheater?period=all").await;
    assert_eq!((status.as_u16(), &standing["rank"]), (200, &Value::Null), "{standing}");

    // Exactly once: the retry changes nothing, another payload under the id is a 409.
    let before = app.keyspace().await;
    let (status, retry) = correct(&app, "cheater", body).await;
    assert_eq!((status, &retry["duplicate"]), (200, &json!(true)), "{retry}");
    let (status, _) = correct(&app, "cheater", json!({"correction_id": "c1", "reason": "other", "remove": true})).await;
    assert_eq!(status, 409);
    assert_eq!(app.keyspace().await, before);

    // Not a ban: the player's next honest score counts.
    submit(&app, "s3", "cheater", 100).await;
    assert_eq!(top(&app, "day").await, [("ann".to_owned(), 900), ("cheater".to_owned(), 100)]);
    let (_, audit) = app.call(Method::GET, "/v1/admin/audit?board=game&limit=1", "", ADMIN).await;
    assert_eq!((&audit["entries"][0]["removed"], &audit["entries"][0]["correction_id"]), (&json!(true), &json!("c1")), "{audit}");
}

#[tokio::test]
async fn set_replaces_the_kept_score_of_the_period_named_only() {
    let app = spawn_ingest_with(game("best", "asc")).await;
    app.set_now(at("2026-11-22T10:00:00Z"));
    submit(&app, "s1", "ann", 5_000).await;
    submit(&app, "s2", "bob", 10).await;
    let body = json!({"correction_id": "c1", "reason": "timing glitch", "set": 7_000, "period": "day", "period_id": "2026-11-22"});
    let (status, receipt) = correct(&app, "bob", body).await;
    assert_eq!(status, 200, "{receipt}");
    assert_eq!(receipt["periods"], json!([{"period": "day", "period_id": "2026-11-22", "score": 7_000, "delta": 6_990, "rank": 2}]));
    assert_eq!(top(&app, "day").await, [("ann".to_owned(), 5_000), ("bob".to_owned(), 7_000)], "lower is better");
    assert_eq!(top(&app, "all").await, [("bob".to_owned(), 10), ("ann".to_owned(), 5_000)], "all-time untouched");
}

#[tokio::test]
async fn a_delta_corrects_a_sum_and_the_statement_still_adds_up() {
    let app = spawn_ingest_with(game("sum", "desc")).await;
    app.set_now(at("2026-11-22T10:00:00Z"));
    submit(&app, "s1", "ann", 30).await;
    submit(&app, "s2", "ann", 20).await;
    let (status, receipt) = correct(&app, "ann", json!({"correction_id": "c1", "reason": "double count", "delta": -20})).await;
    assert_eq!(status, 200, "{receipt}");
    assert_eq!(top(&app, "all").await, [("ann".to_owned(), 30)]);
    let (_, statement) = app.get("/v1/boards/game/users/ann/statement?period=all").await;
    assert_eq!(statement["score"], 30, "{statement}");
    assert_eq!(
        statement["lines"],
        json!([{"kind": "submissions", "submissions": 2, "points": 50},
               {"kind": "correction", "correction_id": "c1", "reason": "double count", "points": -20}])
    );
    assert_eq!(statement["unexplained"], Value::Null);
}

#[tokio::test]
async fn changes_a_board_does_not_take_are_clear_errors_that_write_nothing() {
    let app = spawn_ingest_with(game("best", "desc")).await;
    app.set_now(at("2026-11-22T10:00:00Z"));
    submit(&app, "s1", "ann", 50).await;
    let before = app.keyspace().await;
    for (body, status, code) in [
        (json!({"reason": "r", "delta": 5}), 422, "not_a_sum"),
        (json!({"reason": "r", "set": 5, "remove": true}), 400, "malformed"),
        (json!({"reason": "r"}), 400, "malformed"),
        (json!({"reason": "r", "remove": false}), 400, "malformed"),
        (json!({"reason": "r", "set": MAX_SCORE + 1}), 422, "out_of_range"),
        (json!({"reason": "r", "set": -1}), 422, "out_of_range"),
        (json!({"reason": "", "remove": true}), 400, "malformed"),
        (json!({"reason": "r", "remove": true, "period": "month", "period_id": "2026-11"}), 400, "malformed"),
    ] {
        let (got, reply) = correct(&app, "ann", body.clone()).await;
        assert_eq!((got, reply["error"]["code"].as_str()), (status, Some(code)), "{body}: {reply}");
    }
    let (got, reply) = app
        .call(Method::POST, "/v1/admin/boards/activity/users/ann/corrections", json!({"reason": "r", "set": 5}).to_string(), ADMIN)
        .await;
    assert_eq!((got.as_u16(), reply["error"]["code"].as_str()), (404, Some("unknown_board")), "not configured here: {reply}");
    assert_eq!(app.keyspace().await, before);
}

/// Around midnight a removal's live periods include a day the member never reached (the day
/// before, still open to late events) or one that has not started (the next, open to a clock
/// ahead): the removal still applies, where the member is and where they are not.
#[tokio::test]
async fn a_removal_around_midnight_applies_to_every_live_day_whether_the_member_is_there_or_not() {
    for (label, now) in [("just before midnight", "2026-11-22T23:59:40Z"), ("just after", "2026-11-23T00:05:00Z")] {
        let app = spawn_ingest_with(game("best", "desc")).await;
        app.set_now(at(now));
        submit(&app, "s1", "cheater", 500).await;
        submit(&app, "s2", "ann", 300).await;
        let (status, reply) = correct(&app, "cheater", json!({"remove": true, "reason": "cheated"})).await;
        assert_eq!(status, 200, "{label}: {reply}");
        let deltas: Vec<i64> = reply["periods"].as_array().unwrap().iter().map(|p| p["delta"].as_i64().unwrap()).collect();
        assert_eq!(deltas.len(), 3, "{label}: two days and all-time: {reply}");
        assert_eq!(deltas.iter().filter(|&&d| d == 0).count(), 1, "{label}: nothing to remove on the other day: {reply}");
        assert_eq!(top(&app, "day").await, [("ann".to_owned(), 300)], "{label}");
        assert_eq!(top(&app, "all").await, [("ann".to_owned(), 300)], "{label}");
    }
}
