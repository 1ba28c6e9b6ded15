//! The dead-letter queue this function writes to itself (`STANDINGS_DEAD_LETTER_QUEUE_URL`): a
//! message that can never apply goes there with its reason as message attributes, so an
//! operator sees why without the logs (docs/queue.md#runbook-messages-in-the-dead-letter-queue).

use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::MessageAttributeValue;

use crate::consume::Delivery;

pub const DEAD_LETTER_QUEUE_ENV: &str = "STANDINGS_DEAD_LETTER_QUEUE_URL";

/// The group of a message dead-lettered to a FIFO queue from a standard one.
const FIFO_GROUP: &str = "dead-letters";

/// SQS caps a message attribute with the message at 256 KB; a reason needs far less.
const MAX_REASON_BYTES: usize = 1024;

/// An SQS client, up to 3 attempts of 5 s each; `AWS_ENDPOINT_URL_SQS` points it at a local
/// endpoint.
pub async fn sqs_client() -> Client {
    Client::new(&standings::runtime::aws::sdk_config(3, Duration::from_secs(5)).await)
}

#[derive(Clone)]
pub struct DeadLetters {
    client: Client,
    url: String,
}

impl DeadLetters {
    pub fn new(client: Client, url: impl Into<String>) -> Self {
        Self { client, url: url.into() }
    }

    /// A client for the queue at `url`.
    pub async fn connect(url: impl Into<String>) -> Self {
        Self::new(sqs_client().await, url)
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends `delivery`'s body with `error_code` and `error_message` attributes. A FIFO
    /// dead-letter queue (`.fifo`) gets the message's group (or `dead-letters`) and its message
    /// id as the deduplication id, so a resend after a lost answer is stored once.
    pub async fn send(&self, delivery: &Delivery, code: &str, message: &str) -> Result<(), aws_sdk_sqs::Error> {
        let text = |value: &str| MessageAttributeValue::builder().data_type("String").string_value(value).build();
        let message = truncate(message, MAX_REASON_BYTES);
        let mut send = self
            .client
            .send_message()
            .queue_url(&self.url)
            .message_body(&delivery.body)
            .message_attributes("error_code", text(code)?)
            .message_attributes("error_message", text(message)?);
        if self.url.ends_with(".fifo") {
            send = send.message_group_id(delivery.group.as_deref().unwrap_or(FIFO_GROUP)).message_deduplication_id(dedup_id(&delivery.id));
        }
        send.send().await?;
        Ok(())
    }
}

/// A FIFO deduplication id (at most 128 characters of `[A-Za-z0-9!-/:-@[-`{-~]`) from a message
/// id (a UUID on SQS: kept as it is).
fn dedup_id(message_id: &str) -> String {
    let id: String = message_id.chars().filter(|c| c.is_ascii_graphic()).take(128).collect();
    if id.is_empty() { "dead-letter".to_owned() } else { id }
}

fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let end = (0..=max).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    &text[..end]
}
