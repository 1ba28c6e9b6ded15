//! The `queue` function on a test app, its dead-letter queue on moto_server (SQS, through the
//! real SDK), and SQS events in the exact shape Lambda delivers them.

use aws_lambda_events::sqs::SqsEvent;
use aws_sdk_sqs::Client;
use serde_json::{Value, json};

use crate::{TestApp, clock_of, unique_prefix};

/// An SQS client for moto_server (`AWS_ENDPOINT_URL_SQS`, set by scripts/lib.sh): one attempt,
/// however long moto takes. A receive retried after a client-side timeout leaves the messages
/// the first attempt took invisible for their visibility timeout, so a read of "everything the
/// queue holds" would miss them (seen in CI: a loaded moto answering after the function's 5 s).
pub async fn sqs() -> Client {
    Client::new(&standings::runtime::aws::sdk_config(1, std::time::Duration::from_secs(300)).await)
}

/// A new, empty queue of its own; its URL.
pub async fn new_queue(client: &Client, role: &str) -> String {
    let name = format!("{role}-{}", unique_prefix().replace(':', "-"));
    let created = client.create_queue().queue_name(name).send().await.expect("moto creates the queue");
    created.queue_url().expect("a created queue has a URL").to_owned()
}

/// Every message a queue holds: (body, error_code, error_message), received and deleted.
pub async fn drain(client: &Client, url: &str) -> Vec<(String, String, String)> {
    let mut messages = Vec::new();
    loop {
        let out = client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .send()
            .await
            .expect("moto receives");
        let batch = out.messages();
        if batch.is_empty() {
            return messages;
        }
        for message in batch {
            let attribute = |name: &str| {
                message.message_attributes().and_then(|a| a.get(name)).and_then(|v| v.string_value()).unwrap_or_default().to_owned()
            };
            messages.push((message.body().unwrap_or_default().to_owned(), attribute("error_code"), attribute("error_message")));
            client
                .delete_message()
                .queue_url(url)
                .receipt_handle(message.receipt_handle().unwrap_or_default())
                .send()
                .await
                .expect("moto deletes");
        }
    }
}

/// One record as Lambda's SQS event source mapping delivers it.
pub fn record(message_id: &str, body: &str, receive_count: u32) -> Value {
    json!({
        "messageId": message_id,
        "receiptHandle": format!("handle-{message_id}"),
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": receive_count.to_string(),
            "SentTimestamp": "1795312800000",
            "SenderId": "AIDAEXAMPLE",
            "ApproximateFirstReceiveTimestamp": "1795312800001"
        },
        "messageAttributes": {},
        "md5OfBody": "0",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:standings-events",
        "awsRegion": "us-east-1"
    })
}

/// An SQS event of `records`, parsed from JSON as the runtime parses Lambda's payload.
pub fn sqs_event(records: Vec<Value>) -> SqsEvent {
    serde_json::from_value(json!({ "Records": records })).expect("the SQS event shape")
}

impl TestApp {
    /// The `queue` function on this app's key prefix, store, configuration and clock,
    /// dead-lettering to `dead_letters`.
    pub fn queue(&self, dead_letters: queue::DeadLetters) -> queue::App {
        self.queue_on(self.store.clone(), dead_letters)
    }

    /// `queue` on another store (e.g. one nothing listens on).
    pub fn queue_on(&self, store: standings::redis::store::Store, dead_letters: queue::DeadLetters) -> queue::App {
        let metrics = standings::runtime::metrics::Metrics::with_sink(queue::FUNCTION, std::sync::Arc::new(|_| ()));
        queue::App::new(self.config.clone(), self.keys.clone(), store, dead_letters, clock_of(&self.now), metrics)
    }

    /// `queue` whose metric lines (EMF, as JSON values) are collected in the answer's second half.
    pub fn queue_with_metrics(&self, dead_letters: queue::DeadLetters) -> (queue::App, std::sync::Arc<std::sync::Mutex<Vec<Value>>>) {
        let lines: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = std::sync::Arc::default();
        let sink = lines.clone();
        let metrics = standings::runtime::metrics::Metrics::with_sink(
            queue::FUNCTION,
            std::sync::Arc::new(move |line: String| sink.lock().unwrap().push(serde_json::from_str(&line).expect("an EMF line"))),
        );
        let app = queue::App::new(self.config.clone(), self.keys.clone(), self.store.clone(), dead_letters, clock_of(&self.now), metrics);
        (app, lines)
    }
}

/// A queue of its own whose messages stay invisible for 5 minutes after a receive (the
/// stand-in for the event source mapping releases them itself, see `run_mapping`).
pub async fn new_source_queue(client: &Client) -> String {
    let name = format!("events-{}", unique_prefix().replace(':', "-"));
    let created = client
        .create_queue()
        .queue_name(name)
        .attributes(aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout, "300")
        .send()
        .await
        .expect("moto creates the queue");
    created.queue_url().expect("a created queue has a URL").to_owned()
}

/// Sends `bodies` to `url` with boto3 (tests/queue/produce.py), a producer nobody here wrote.
pub fn produce_with_boto3(url: &str, bodies: &[String]) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/queue/produce.py");
    let mut child =
        Command::new("python3").arg(script).arg(url).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("python3 runs");
    child.stdin.take().unwrap().write_all(serde_json::to_string(bodies).unwrap().as_bytes()).unwrap();
    let output = child.wait_with_output().expect("the producer finishes");
    assert!(output.status.success(), "the boto3 producer failed: {output:?}");
}

/// Drains `url` as Lambda's event source mapping would: batches of up to 10 with their
/// attributes, each handed to the function `app(round)`; what it answers applied is deleted,
/// what it hands back becomes visible again once every other visible message had its turn (as
/// its visibility timeout would). Returns the rounds run.
pub async fn run_mapping(client: &Client, url: &str, app: impl Fn(usize) -> queue::App) -> usize {
    let mut handed_back: Vec<String> = Vec::new();
    for round in 0..500 {
        let out = client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .send()
            .await
            .expect("moto receives");
        let messages = out.messages();
        if messages.is_empty() {
            if handed_back.is_empty() {
                return round;
            }
            for handle in handed_back.drain(..) {
                client.change_message_visibility().queue_url(url).receipt_handle(handle).visibility_timeout(0).send().await.expect("moto");
            }
            continue;
        }
        let records = messages
            .iter()
            .map(|m| {
                let count = m
                    .attributes()
                    .and_then(|a| a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(1);
                record(m.message_id().unwrap_or_default(), m.body().unwrap_or_default(), count)
            })
            .collect();
        let response = app(round).handle(sqs_event(records)).await;
        for m in messages {
            let id = m.message_id().unwrap_or_default();
            let handle = m.receipt_handle().unwrap_or_default().to_owned();
            if response.batch_item_failures.iter().any(|f| f.item_identifier == id) {
                handed_back.push(handle);
            } else {
                client.delete_message().queue_url(url).receipt_handle(handle).send().await.expect("moto deletes");
            }
        }
    }
    panic!("the queue did not drain in 500 rounds");
}
