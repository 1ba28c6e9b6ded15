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
/// What SQS takes of one message, body and attributes together (a queue's default
/// `MaximumMessageSize` before 2025, and the most any queue takes without the extended client).
pub const MAX_MESSAGE_BYTES: usize = 262_144;

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

    /// Sends `delivery`'s body with `error_code` and `error_message` attributes, cut to what
    /// SQS takes with the body (`MAX_MESSAGE_BYTES` counts the attributes' names, types and
    /// values too). A FIFO dead-letter queue (`.fifo`) gets the message's group (or
    /// `dead-letters`) and its message id as the deduplication id, so a resend after a lost
    /// answer is stored once. A send SQS refuses for good (a 4xx: the body, an attribute) is
    /// tried once more with the code alone; only then is it an error.
    pub async fn send(&self, delivery: &Delivery, code: &str, message: &str) -> Result<(), aws_sdk_sqs::Error> {
        let attributes = fitting_attributes(delivery.body.len(), code, message);
        match self.send_with(delivery, &attributes).await {
            Err(error) if is_permanent(&error) && attributes.len() > 1 => {
                tracing::warn!(message_id = %delivery.id, error = %error, "the dead-letter queue refused the message with its reason; sent with its code alone");
                self.send_with(delivery, &attributes[..1]).await.map_err(aws_sdk_sqs::Error::from)
            }
            result => result.map_err(aws_sdk_sqs::Error::from),
        }
    }

    async fn send_with(
        &self,
        delivery: &Delivery,
        attributes: &[(&'static str, String)],
    ) -> Result<(), aws_sdk_sqs::error::SdkError<aws_sdk_sqs::operation::send_message::SendMessageError>> {
        let mut send = self.client.send_message().queue_url(&self.url).message_body(&delivery.body);
        for (name, value) in attributes {
            let value = MessageAttributeValue::builder().data_type("String").string_value(value).build().expect("a string attribute");
            send = send.message_attributes(*name, value);
        }
        if self.url.ends_with(".fifo") {
            send = send.message_group_id(delivery.group.as_deref().unwrap_or(FIFO_GROUP)).message_deduplication_id(dedup_id(&delivery.id));
        }
        send.send().await?;
        Ok(())
    }
}

/// The reason's attributes that fit beside a body of `body_bytes`: `error_code`, then
/// `error_message` cut to what is left of `MAX_MESSAGE_BYTES` (and to `MAX_REASON_BYTES`);
/// none when even the code does not fit (the reason is then only in the log).
fn fitting_attributes(body_bytes: usize, code: &str, message: &str) -> Vec<(&'static str, String)> {
    // SQS counts each attribute's name, data type and value.
    let size = |name: &str, value: &str| name.len() + "String".len() + value.len();
    let mut left = MAX_MESSAGE_BYTES.saturating_sub(body_bytes);
    let mut attributes = Vec::new();
    if size("error_code", code) > left {
        return attributes;
    }
    left -= size("error_code", code);
    attributes.push(("error_code", code.to_owned()));
    let room = left.saturating_sub(size("error_message", "")).min(MAX_REASON_BYTES);
    if left > size("error_message", "") && !message.is_empty() {
        attributes.push(("error_message", truncate(message, room).to_owned()));
    }
    attributes
}

/// A refusal a resend cannot change: a client error (4xx) that is not throttling.
fn is_permanent<R>(error: &aws_sdk_sqs::error::SdkError<aws_sdk_sqs::operation::send_message::SendMessageError, R>) -> bool {
    use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
    match error {
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or_default();
            !code.contains("Throttl") && !matches!(code, "RequestThrottled" | "KmsThrottled" | "ServiceUnavailable" | "InternalError")
        }
        _ => false,
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
