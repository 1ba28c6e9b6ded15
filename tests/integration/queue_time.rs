//! A queue message that names no time of its own happened when SQS took it (its
//! `SentTimestamp`), not when its batch ran (docs/queue.md#when-a-message-happened): its
//! period, its day and its place among equal scores. Past the event window it counts now.

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use standings_tests::queue::{drain, new_queue, record, sqs, sqs_event};
use standings_tests::{at, day, spawn_ingest};

fn sent(message_id: &str, body: Value, sent_at: DateTime<Utc>) -> Value {
    let mut record = record(message_id, &body.to_string(), 1);
    record["attributes"]["SentTimestamp"] = json!(sent_at.timestamp_millis().to_string());
    record
}

#[tokio::test]
async fn untimed_messages_happen_when_sqs_took_them_not_when_the_batch_ran() {
    let app = spawn_ingest().await;
    let client = sqs().await;
    let dlq_url = new_queue(&client, "dlq").await;
    let queue = app.queue(queue::DeadLetters::new(client.clone(), dlq_url.clone()));
    // Sent a few seconds before midnight in Shanghai (the boards' zone), processed after it.
    let before_midnight = at("2026-11-22T23:59:40+08:00");
    app.set_now(at("2026-11-23T00:01:00+08:00"));
    let records = vec![
        sent("c1", json!({"event_id": "c1", "user_id": "ann", "action": "comment", "target": "a1"}), before_midnight),
        sent("g1", json!({"kind": "sign_in", "event_id": "g1", "user_id": "ann"}), before_midnight),
        // Equal scores: zed's message reached SQS later than amy's, though it comes first.
        sent(
            "s1",
            json!({"kind": "score", "board": "lap-times", "event_id": "s1", "user_id": "zed", "score": 61000}),
            before_midnight + Duration::seconds(5),
        ),
        sent("s2", json!({"kind": "score", "board": "lap-times", "event_id": "s2", "user_id": "amy", "score": 61000}), before_midnight),
        // Sent 20 minutes before the batch ran: past the window, it counts now, not refused.
        sent("c2", json!({"event_id": "c2", "user_id": "bob", "action": "comment", "target": "a1"}), at("2026-11-22T23:41:00+08:00")),
    ];
    let response = queue.handle(sqs_event(records)).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    assert!(drain(&client, &dlq_url).await.is_empty(), "nothing dead-lettered");

    assert_eq!(app.points("activity", day("2026-11-22"), "ann").await, Some(3), "the comment lands on the day it was sent");
    assert_eq!(app.points("activity", day("2026-11-23"), "ann").await, None);
    let (status, calendar) = app.get("/v1/users/ann/sign-ins?month=2026-11").await;
    assert_eq!(status, 200, "{calendar}");
    assert_eq!(calendar["days"], json!([22]), "the sign-in counts for the day it was sent: {calendar}");

    let (_, top) = app.get("/v1/boards/lap-times/top?period=day").await;
    let order: Vec<&str> = top["entries"].as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap()).collect();
    assert_eq!(order, ["amy", "zed"], "equal scores: who reached SQS first ranks first: {top}");

    assert_eq!(app.points("activity", day("2026-11-23"), "bob").await, Some(3), "a message past the window counts now");
}
