//! A FIFO queue as the `queue` function's source and as its dead-letter queue (docs/queue.md#fifo):
//! a group's messages apply in their order and a group stops at its first message handed back,
//! which is reported with every later message of its group, unapplied; a FIFO dead-letter queue
//! takes what never applies, with its group.

use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::{Value, json};
use standings_tests::queue::{drain, record, sqs, sqs_event};
use standings_tests::{day, spawn_ingest, unique_prefix};

fn in_group(message_id: &str, body: Value, group: &str) -> Value {
    let mut record = record(message_id, &body.to_string(), 1);
    record["attributes"]["MessageGroupId"] = json!(group);
    record["attributes"]["MessageDeduplicationId"] = json!(message_id);
    record["eventSourceARN"] = json!("arn:aws:sqs:us-east-1:123456789012:standings-events.fifo");
    record
}

fn failures(response: &aws_lambda_events::sqs::SqsBatchResponse) -> Vec<&str> {
    response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect()
}

async fn fifo_dead_letters() -> (aws_sdk_sqs::Client, String) {
    let client = sqs().await;
    let name = format!("dlq-{}.fifo", unique_prefix().replace([':', '_'], "-"));
    let created = client
        .create_queue()
        .queue_name(name)
        .attributes(QueueAttributeName::FifoQueue, "true")
        .send()
        .await
        .expect("moto creates a FIFO queue");
    (client, created.queue_url().unwrap().to_owned())
}

#[tokio::test]
async fn a_fifo_group_stops_at_its_first_message_handed_back_and_reports_every_later_one() {
    let app = spawn_ingest().await;
    let (client, url) = fifo_dead_letters().await;
    let queue = app.queue(queue::DeadLetters::new(client.clone(), url.clone()));
    let comment = |id: &str, user: &str| json!({"event_id": id, "user_id": user, "action": "comment", "target": id});
    let records = vec![
        // A take-back ahead of its give waits (handed back): the rest of group A must wait too.
        in_group("a1", json!({"event_id": "t1", "user_id": "ann", "action": "praise", "target": "x", "active": false}), "A"),
        in_group("b1", comment("b1", "bob"), "B"),
        in_group("a2", comment("a2", "ann"), "A"),
        in_group("b2", comment("b2", "bob"), "B"),
        in_group("b3", json!({"event_id": "z", "user_id": "bob", "action": "levitate"}), "B"),
        in_group("a3", comment("a3", "ann"), "A"),
    ];
    let response = queue.handle(sqs_event(records)).await;
    assert_eq!(failures(&response), ["a1", "a2", "a3"], "group A stops at a1; B goes on");
    assert_eq!(app.points("activity", day("2026-11-22"), "ann").await, None, "nothing of group A after a1 applied");
    assert_eq!(app.points("activity", day("2026-11-22"), "bob").await, Some(6));

    // b3 never applies: to the FIFO dead-letter queue, with its reason.
    let dead = drain(&client, &url).await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].1, "unknown_action");
}

/// A batch of which every message is handed back is no function error (the partial batch
/// response succeeds), so `Errors` never sees it: the function counts it in `BatchesFailed`,
/// which `QueueBatchesFailedAlarm` watches; a batch where anything applied is not counted.
#[tokio::test]
async fn a_batch_whose_every_message_is_handed_back_is_counted_as_failed() {
    let app = spawn_ingest().await;
    let (client, url) = fifo_dead_letters().await;
    let (queue, metrics) = app.queue_with_metrics(queue::DeadLetters::new(client, url));
    let take_back = |id: &str| json!({"event_id": id, "user_id": "ann", "action": "praise", "target": id, "active": false});
    let failed = |metrics: &std::sync::Mutex<Vec<Value>>| -> f64 {
        metrics.lock().unwrap().iter().filter_map(|line| line.get(queue::BATCHES_FAILED).and_then(Value::as_f64)).sum()
    };
    let waiting = vec![record("w1", &take_back("t1").to_string(), 1), record("w2", &take_back("t2").to_string(), 1)];
    assert_eq!(failures(&queue.handle(sqs_event(waiting)).await), ["w1", "w2"]);
    assert_eq!(failed(&metrics), 1.0);
    let mixed = vec![
        record("w3", &take_back("t3").to_string(), 1),
        record("c1", &json!({"event_id": "c1", "user_id": "ann", "action": "comment", "target": "a"}).to_string(), 1),
    ];
    assert_eq!(failures(&queue.handle(sqs_event(mixed)).await), ["w3"]);
    assert_eq!(failed(&metrics), 1.0, "a batch where something applied is not a failed batch");
}
