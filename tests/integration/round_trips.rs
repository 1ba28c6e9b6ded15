//! One round trip to Redis per board per event on the write path, counted by the
//! store itself (`Store::round_trips()`) once a warm-up has loaded the script.

use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::redis::scripts::CHUNK;
use standings_tests::spawn_ingest_with;

/// The default boards and one more that also scores comments: a comment feeds two boards,
/// a page view one.
fn config_with_two_comment_boards() -> Config {
    let reach = r#"
        [[boards]]
        name = "reach"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all"]
        top = 10
        rules = [{ action = "comment", points = 1, scope = "none" }]"#;
    Config::parse(&format!("{}{reach}", include_str!("../../shared/boards.toml"))).unwrap()
}

#[tokio::test]
async fn an_event_costs_one_round_trip_per_board_it_feeds() {
    let app = spawn_ingest_with(config_with_two_comment_boards()).await;
    // The first call in a fresh Redis also loads the script (NOSCRIPT, SCRIPT LOAD, retry).
    let (status, _) = app.event(json!({"event_id": "warm", "user_id": "u0", "action": "comment", "target": "t"})).await;
    assert_eq!(status, 200);

    let events = [("page_view", 1), ("comment", 2), ("page_view", 1), ("comment", 2)];
    for (i, (action, boards)) in events.into_iter().enumerate() {
        let event = json!({"event_id": format!("e{i}"), "user_id": "u1", "action": action, "target": format!("t{i}")});
        for delivery in ["first", "duplicate"] {
            let before = app.store.round_trips();
            let (status, body) = app.event(event.clone()).await;
            assert_eq!(status, 200, "{body}");
            assert_eq!(body["duplicate"], delivery == "duplicate");
            assert_eq!(body["results"].as_array().unwrap().len(), boards, "{body}");
            assert_eq!(app.store.round_trips() - before, boards as u64, "{delivery} {action}: one round trip per board");
        }
    }
}

#[tokio::test]
async fn a_batch_costs_one_round_trip_per_board_per_chunk() {
    let app = spawn_ingest_with(config_with_two_comment_boards()).await;
    app.event(json!({"event_id": "warm", "user_id": "u0", "action": "comment", "target": "t"})).await;
    let size = 2 * CHUNK + 50;
    let mut events: Vec<Value> = (0..size)
        .map(|i| json!({"event_id": format!("c{i}"), "user_id": format!("u{}", i % 20), "action": "comment", "target": format!("t{i}")}))
        .collect();
    events[size - 1] = events[0].clone();
    let before = app.store.round_trips();
    let (status, body) = app.post("/v1/events:batch", &json!({ "events": events })).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(app.store.round_trips() - before, 2 * 3, "two boards, three chunks each");
    let results = body["results"].as_array().unwrap();
    assert_eq!(results.iter().filter(|r| r["duplicate"] == true).count(), 1, "the repeated id, in the last chunk");
    assert_eq!(results[size - 1]["duplicate"], true);
    for (first, retry) in results[0]["results"].as_array().unwrap().iter().zip(results[size - 1]["results"].as_array().unwrap()) {
        assert_eq!((&retry["applied"], &retry["delta"]), (&first["applied"], &first["delta"]));
    }
}

/// The journal rides in the write's own script call: with it on, an event still costs one
/// round trip per board, and a sign-in and a score one each.
#[tokio::test]
async fn the_journal_adds_no_round_trip() {
    let app = standings_tests::spawn_journaled(config_with_two_comment_boards()).await;
    let (status, _) = app.event(json!({"event_id": "warm", "user_id": "u0", "action": "comment", "target": "t"})).await;
    assert_eq!(status, 200);
    assert_eq!(app.post("/v1/sign-ins", &json!({"event_id": "warm-s", "user_id": "u0"})).await.0, 200);
    assert_eq!(app.post("/v1/boards/high-scores/scores", &json!({"event_id": "warm-g", "user_id": "u0", "score": 1})).await.0, 200);
    let writes = [
        ("/v1/events", json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "t1"}), 2),
        ("/v1/sign-ins", json!({"event_id": "s1", "user_id": "u1"}), 1),
        ("/v1/boards/high-scores/scores", json!({"event_id": "g1", "user_id": "u1", "score": 7}), 1),
    ];
    for (path, body, boards) in writes {
        let before = app.store.round_trips();
        let (status, reply) = app.post(path, &body).await;
        assert_eq!(status, 200, "{reply}");
        assert_eq!(app.store.round_trips() - before, boards, "{path}");
    }
    assert_eq!(app.journal_len("reach").await, 2, "warm and e1, each in its own call");
}
