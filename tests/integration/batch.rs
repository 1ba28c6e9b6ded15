//! `POST /v1/events:batch`: one result per event, in order, pipelined.

use serde_json::{Value, json};
use standings_tests::{day, spawn_ingest};

#[tokio::test]
async fn a_batch_answers_each_event_in_order() {
    let app = spawn_ingest().await;
    app.event(json!({"event_id": "old", "user_id": "u9", "action": "comment", "target": "a"})).await;
    let events = json!({"events": [
        {"event_id": "1", "user_id": "u1", "action": "comment", "target": "a"},
        {"event_id": "2", "user_id": "u2", "action": "invite", "target": "friend"},
        {"event_id": "1", "user_id": "u1", "action": "comment", "target": "a"},
        {"event_id": "old", "user_id": "u9", "action": "comment", "target": "b"},
        {"event_id": "3", "user_id": "u1", "action": "learning"},
    ]});
    let (status, body) = app.post("/v1/events:batch", &events).await;
    assert_eq!(status, 200, "{body}");
    let results = body["results"].as_array().unwrap();
    let ids: Vec<&str> = results.iter().map(|r| r["event_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["1", "2", "1", "old", "3"]);
    let duplicates: Vec<&Value> = results.iter().take(3).map(|r| &r["duplicate"]).collect();
    assert_eq!(results[0]["results"], results[2]["results"]);
    assert_eq!(duplicates.iter().filter(|d| ***d == json!(false)).count(), 3 - 1, "the repeated id applies once");
    assert_eq!(results[1]["results"][0]["board"], "invites");
    assert_eq!((results[3]["status"].as_u64(), results[3]["error"]["code"].as_str()), (Some(409), Some("idempotency_conflict")));
    assert_eq!(results[4]["results"][0]["board"], "points");
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(3));
}

#[tokio::test]
async fn a_full_batch_of_500_is_applied() {
    let app = spawn_ingest().await;
    let events: Vec<_> = (0..500)
        .map(|i| json!({"event_id": format!("e{i}"), "user_id": format!("u{}", i % 100), "action": "page_view", "target": format!("/p/{i}")}))
        .collect();
    let (status, body) = app.post("/v1/events:batch", &json!({ "events": events })).await;
    assert_eq!(status, 200);
    assert_eq!(body["results"].as_array().unwrap().len(), 500);
    for u in 0..100 {
        assert_eq!(app.points("activity", day("2026-11-22"), &format!("u{u}")).await, Some(5));
    }
}
