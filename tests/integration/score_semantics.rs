//! Score board semantics at their edges, decided (docs/boards.md#score-boards): `latest` is the
//! last applied; an all-time `sum` at its maximum refuses only the period that would overflow;
//! a user not on an ascending board reads as no score, not 0; a client whose clock runs into
//! the next period does not beat a tie it did not win.

use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::domain::scores::MAX_SCORE;
use standings_tests::{TestApp, at, spawn_ingest_with};

fn game(keep: &str, order: &str, periods: &str) -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"{keep}\"\norder = \"{order}\"\ntimezone = \"UTC\"\nperiods = [{periods}]\ntop = 10\n"
    ))
    .unwrap()
}

async fn submit(app: &TestApp, body: Value) -> (u16, Value) {
    let (status, reply) = app.post("/v1/boards/game/scores", &body).await;
    (status.as_u16(), reply)
}

#[tokio::test]
async fn an_early_clock_in_the_next_period_does_not_beat_a_tie_reached_before_its_claimed_time() {
    let app = spawn_ingest_with(game("best", "desc", "\"day\"")).await;
    // Ann's client runs 40 s fast: at 23:59:50 it says 00:00:30, which lands on the 23rd.
    app.set_now(at("2026-11-22T23:59:50Z"));
    let (status, early) =
        submit(&app, json!({"event_id": "a", "user_id": "ann", "score": 100, "occurred_at": "2026-11-23T00:00:30Z"})).await;
    assert_eq!((status, &early["periods"][0]["period_id"]), (200, &json!("2026-11-23")), "{early}");
    // Bob reaches the same score at 00:00:10 on the 23rd, before the time Ann's client claimed.
    app.set_now(at("2026-11-23T00:00:10Z"));
    let (status, _) = submit(&app, json!({"event_id": "b", "user_id": "bob", "score": 100})).await;
    assert_eq!(status, 200);
    let (_, top) = app.get("/v1/boards/game/top?period=day").await;
    let order: Vec<&str> = top["entries"].as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap()).collect();
    assert_eq!(order, ["bob", "ann"], "{top}");
}

#[tokio::test]
async fn a_sum_at_its_maximum_refuses_only_the_period_that_would_overflow() {
    let app = spawn_ingest_with(game("sum", "desc", "\"day\", \"all\"")).await;
    app.set_now(at("2026-11-21T10:00:00Z"));
    submit(&app, json!({"event_id": "s1", "user_id": "ann", "score": MAX_SCORE - 5})).await;
    app.set_now(at("2026-11-22T10:00:00Z"));
    let (status, reply) = submit(&app, json!({"event_id": "s2", "user_id": "ann", "score": 10})).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["periods"],
        json!([{"period": "day", "period_id": "2026-11-22", "score": 10, "rank": 1, "changed": true},
               {"period": "all", "period_id": "all", "score": MAX_SCORE - 5, "rank": 1, "changed": false, "reason": "out_of_range"}])
    );
    // Only when every period would overflow is the submission refused as a whole.
    let (status, reply) = submit(&app, json!({"event_id": "s3", "user_id": "ann", "score": MAX_SCORE})).await;
    assert_eq!((status, reply["error"]["code"].as_str()), (422, Some("out_of_range")), "{reply}");
}

#[tokio::test]
async fn a_user_not_on_an_ascending_board_has_no_score_not_the_best_one() {
    let app = spawn_ingest_with(game("best", "asc", "\"all\"")).await;
    submit(&app, json!({"event_id": "s1", "user_id": "ann", "score": 61_250})).await;
    let (status, nobody) = app.get("/v1/boards/game/users/nobody?period=all").await;
    assert_eq!(status, 200, "{nobody}");
    assert_eq!((&nobody["rank"], &nobody["score"]), (&Value::Null, &Value::Null), "{nobody}");
    let (status, listed) = app
        .call_query(axum::http::Method::POST, "/v1/boards/game/ranks", json!({"user_ids": ["ann", "nobody"], "period": "all"}).to_string())
        .await;
    assert_eq!(status, 200, "{listed}");
    let nobody = listed["entries"].as_array().unwrap().iter().find(|e| e["user_id"] == "nobody").expect("listed as missing");
    assert_eq!(nobody["score"], Value::Null, "{listed}");
    let (status, statement) = app.get("/v1/boards/game/users/nobody/statement?period=all").await;
    assert_eq!(status, 200, "{statement}");
    assert_eq!(
        (&statement["score"], &statement["lines"], &statement["unexplained"]),
        (&Value::Null, &json!([]), &Value::Null),
        "{statement}"
    );
    let (_, ann) = app.get("/v1/boards/game/users/ann/statement?period=all").await;
    assert_eq!(ann["score"], 61_250, "{ann}");
}

#[tokio::test]
async fn latest_keeps_the_last_applied_submission_whatever_its_occurred_at() {
    let app = spawn_ingest_with(game("latest", "desc", "\"day\"")).await;
    app.set_now(at("2026-11-22T10:00:00Z"));
    submit(&app, json!({"event_id": "new", "user_id": "ann", "score": 7, "occurred_at": "2026-11-22T09:59:00Z"})).await;
    // A delivery that arrives later with an earlier time still becomes the latest: arrival order
    // decides (a client clock never decides), as documented.
    let (status, reply) =
        submit(&app, json!({"event_id": "old", "user_id": "ann", "score": 3, "occurred_at": "2026-11-22T09:50:00Z"})).await;
    assert_eq!((status, &reply["periods"][0]["score"]), (200, &json!(3)), "{reply}");
}

/// Amy reaches 100 first, Zed 100 seconds later, within one 256-second step of an all-time
/// board; the board's top as user ids.
async fn all_time_tie(extra: &str) -> Vec<String> {
    let config = Config::parse(&format!(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"best\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\n{extra}"
    ))
    .unwrap();
    let app = spawn_ingest_with(config).await;
    // 2026-11-22T09:55:12Z is 2020-01-01 plus a whole number of 256-second steps.
    app.set_now(at("2026-11-22T09:55:12Z"));
    submit(&app, json!({"event_id": "a", "user_id": "amy", "score": 100})).await;
    app.set_now(at("2026-11-22T09:56:52Z"));
    submit(&app, json!({"event_id": "z", "user_id": "zed", "score": 100})).await;
    let (_, top) = app.get("/v1/boards/game/top?period=all").await;
    top["entries"].as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn all_time_ties_within_256_seconds_are_exact_once_a_board_declares_a_smaller_max_score() {
    assert_eq!(all_time_tie("").await, ["zed", "amy"], "the default: one 256-s step, ordered by user id (documented)");
    assert_eq!(all_time_tie("max_score = 4194303").await, ["amy", "zed"], "22 bits of score leave every second to time");
    // The declared maximum is the board's range.
    let config = Config::parse(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"best\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nmax_score = 1000\n",
    )
    .unwrap();
    let app = spawn_ingest_with(config).await;
    let (status, reply) = submit(&app, json!({"event_id": "x", "user_id": "amy", "score": 1001})).await;
    assert_eq!((status, reply["error"]["code"].as_str()), (422, Some("out_of_range")), "{reply}");
    assert!(reply["error"]["message"].as_str().unwrap().contains("0..=1000"), "{reply}");
}
