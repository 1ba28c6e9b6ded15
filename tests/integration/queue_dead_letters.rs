//! Dead-lettering that cannot fail silently (docs/queue.md#retries-and-the-dead-letter-queue):
//! a body near SQS's size limit still goes to the dead-letter queue with a reason cut to fit
//! (SQS counts the attributes with the body), and a dead-letter queue that does not answer
//! costs no more than the invocation's deadline: what could not be sent in time is handed back.

use serde_json::{Value, json};
use standings_tests::queue::{new_queue, record, sqs, sqs_event};
use standings_tests::spawn_ingest;

#[tokio::test]
async fn a_body_near_the_size_limit_is_dead_lettered_with_a_reason_that_fits() {
    let app = spawn_ingest().await;
    let client = sqs().await;
    let url = new_queue(&client, "dlq").await;
    let queue = app.queue(queue::DeadLetters::new(client.clone(), url.clone()));
    // An unknown action, padded to a few bytes under the limit.
    let mut body = json!({"event_id": "big", "user_id": "ann", "action": "levitate", "note": ""});
    let pad = queue::MAX_MESSAGE_BYTES - body.to_string().len() - 40;
    body["note"] = json!("x".repeat(pad));
    let body = body.to_string();
    let response = queue.handle(sqs_event(vec![record("m1", &body, 1)])).await;
    assert!(response.batch_item_failures.is_empty(), "dead-lettered, not handed back");

    let out = client.receive_message().queue_url(&url).message_attribute_names("All").send().await.unwrap();
    let message = &out.messages()[0];
    assert_eq!(message.body(), Some(body.as_str()), "the original body, whole");
    let attributes = message.message_attributes().unwrap();
    let size: usize =
        attributes.iter().map(|(name, value)| name.len() + value.data_type().len() + value.string_value().unwrap_or_default().len()).sum();
    assert!(body.len() + size <= queue::MAX_MESSAGE_BYTES, "body and reason fit SQS's limit: {} + {size}", body.len());
    assert!(attributes.contains_key("error_code"), "the reason's code is kept: {attributes:?}");
}

#[tokio::test]
async fn a_dead_letter_queue_that_does_not_answer_costs_no_more_than_the_deadline() {
    let app = spawn_ingest().await;
    // A dead-letter queue that takes the connection and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = silent.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let config = standings::runtime::aws::sdk_config(3, std::time::Duration::from_secs(5)).await;
    let client =
        aws_sdk_sqs::Client::from_conf(aws_sdk_sqs::config::Builder::from(&config).endpoint_url(format!("http://{address}")).build());
    let (queue, metrics) = app.queue_with_metrics(queue::DeadLetters::new(client, format!("http://{address}/123456789012/dlq")));
    let comment = json!({"event_id": "c1", "user_id": "ann", "action": "comment", "target": "a"}).to_string();
    let records = vec![record("bad", "{not json", 1), record("ok", &comment, 1)];
    // The invocation has less time left than the margin the answer needs.
    let deadline = chrono::Utc::now() + chrono::Duration::seconds(1);
    let response = queue.handle_until(sqs_event(records), Some(deadline)).await;
    let failed: Vec<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
    assert_eq!(failed, ["bad"], "what could not be dead-lettered in time is handed back; the rest applied");
    let cut: f64 = metrics
        .lock()
        .unwrap()
        .iter()
        .filter(|line| line["Code"] == "dead_letter_deadline")
        .filter_map(|line| line.get(queue::RETRIED).and_then(Value::as_f64))
        .sum();
    assert_eq!(cut, 1.0, "counted as cut by the deadline");
}
