//! The `queue` function (docs/queue.md): an SQS event source mapping hands it batches of
//! messages whose bodies are what the HTTP write routes take. Each message is applied exactly
//! once (its `event_id`, as over HTTP), handed back for redelivery when it was refused for a
//! reason that passes (`batchItemFailures`), or sent to the dead-letter queue with its reason
//! when it can never apply; the rest of the batch applies either way.

mod consume;
mod dead_letter;

use std::sync::Arc;

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use standings::Clock;
use standings::domain::config::Config;
use standings::redis::keys::Keys;
use standings::redis::store::Store;
use standings::runtime::metrics::{Metrics, Unit};
use standings::services::ingestion::Ingestor;
use standings::services::scores::Scores;
use standings::services::sign_ins::SignIns;

pub use consume::{Delivery, TAKE_BACK_WAITS, Verdict, consume};
pub use dead_letter::{DEAD_LETTER_QUEUE_ENV, DeadLetters, sqs_client};

/// The `Function` dimension of this function's metrics.
pub const FUNCTION: &str = "queue";
/// Messages sent to the dead-letter queue (dimension `Code`: why).
pub const DEAD_LETTERED: &str = "MessagesDeadLettered";
/// Messages handed back for redelivery (dimension `Code`: why).
pub const RETRIED: &str = "MessagesRetried";

/// Everything an invocation needs, built once per container.
pub struct App {
    pub ingestor: Ingestor,
    pub scores: Scores,
    pub sign_ins: SignIns,
    pub dead_letters: DeadLetters,
    pub store: Store,
    pub clock: Clock,
    pub metrics: Metrics,
}

impl App {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, dead_letters: DeadLetters, clock: Clock, metrics: Metrics) -> Self {
        Self {
            ingestor: Ingestor::new(config.clone(), keys.clone(), store.clone()),
            scores: Scores::new(config.clone(), keys.clone(), store.clone()),
            sign_ins: SignIns::new(config, keys, store.clone()),
            dead_letters,
            store,
            clock,
            metrics,
        }
    }

    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Arc::new(Config::from_env()?);
        let keys = standings::keys_from_env()?;
        let url = std::env::var(DEAD_LETTER_QUEUE_ENV)
            .ok()
            .filter(|url| !url.is_empty())
            .ok_or_else(|| format!("{DEAD_LETTER_QUEUE_ENV} is not set: messages that can never apply need somewhere to go"))?;
        let dead_letters = DeadLetters::connect(url).await;
        Ok(Self::new(config, keys, Store::from_env().await?, dead_letters, standings::system_clock(), Metrics::stdout(FUNCTION)))
    }

    /// One batch: every message applied, retried or dead-lettered. A message whose trip to the
    /// dead-letter queue fails is retried instead, so nothing is dropped.
    pub async fn handle(&self, event: SqsEvent) -> SqsBatchResponse {
        let deliveries: Vec<Delivery> = event.records.iter().map(delivery).collect();
        let verdicts = consume(&self.ingestor, &self.scores, &self.sign_ins, &deliveries, (self.clock)()).await;
        let mut response = SqsBatchResponse::default();
        for (delivery, verdict) in deliveries.iter().zip(verdicts) {
            match verdict {
                Verdict::Done => {}
                Verdict::Retry { code } => {
                    self.metrics.put(RETRIED, Unit::Count, 1.0, &[("Code", code)]);
                    response.add_failure(&delivery.id);
                }
                Verdict::Dead { code, message } => match self.dead_letters.send(&delivery.body, &code, &message).await {
                    Ok(()) => {
                        tracing::warn!(message_id = %delivery.id, code = %code, reason = %message, "dead-lettered");
                        self.metrics.put(DEAD_LETTERED, Unit::Count, 1.0, &[("Code", code.as_str())]);
                    }
                    Err(error) => {
                        tracing::error!(message_id = %delivery.id, code = %code, error = %error, "the dead-letter queue refused a message; it is retried");
                        self.metrics.put(RETRIED, Unit::Count, 1.0, &[("Code", "dead_letter_unavailable")]);
                        response.add_failure(&delivery.id);
                    }
                },
            }
        }
        response
    }
}

fn delivery(message: &SqsMessage) -> Delivery {
    Delivery {
        id: message.message_id.clone().unwrap_or_default(),
        body: message.body.clone().unwrap_or_default(),
        receive_count: message.attributes.get("ApproximateReceiveCount").and_then(|n| n.parse().ok()).unwrap_or(1),
    }
}
