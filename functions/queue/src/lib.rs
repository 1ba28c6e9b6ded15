//! The `queue` function (docs/queue.md): an SQS event source mapping hands it batches of
//! messages whose bodies are what the HTTP write routes take. Each message is applied exactly
//! once (its `event_id`, as over HTTP), handed back for redelivery when it was refused for a
//! reason that passes (`batchItemFailures`), or sent to the dead-letter queue with its reason
//! when it can never apply; the rest of the batch applies either way.

mod consume;
mod dead_letter;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use chrono::{DateTime, Utc};
use standings::Clock;
use standings::domain::config::Config;
use standings::redis::keys::Keys;
use standings::redis::store::Store;
use standings::runtime::metrics::{Metrics, Unit};
use standings::services::catalog::Catalog;
use standings::services::ingestion::Ingestor;
use standings::services::scores::Scores;
use standings::services::sign_ins::SignIns;

pub use consume::{Delivery, TAKE_BACK_WAITS, Verdict, consume, parse, scored_boards};
pub use dead_letter::{DEAD_LETTER_QUEUE_ENV, DeadLetters, MAX_MESSAGE_BYTES, sqs_client};

/// The `Function` dimension of this function's metrics.
pub const FUNCTION: &str = "queue";
/// Messages sent to the dead-letter queue (dimension `Code`: why).
pub const DEAD_LETTERED: &str = "MessagesDeadLettered";
/// Messages handed back for redelivery (dimension `Code`: why).
pub const RETRIED: &str = "MessagesRetried";
/// The function's timeout (infra/template.yaml `QueueFunction`): an invocation's deadline when
/// the runtime sends none (the local run).
pub const TIMEOUT: chrono::Duration = chrono::Duration::seconds(30);
/// How long before the invocation's deadline the last dead-letter send must end: the answer
/// still has to reach Lambda.
const DEADLINE_MARGIN: chrono::Duration = chrono::Duration::seconds(2);
/// Batches of which every message was handed back (a partial batch response is no function
/// error, so `Errors` does not see them).
pub const BATCHES_FAILED: &str = "BatchesFailed";

/// What a batch needs from the boards as of now (`Catalog`): built once per catalog version.
pub struct Services {
    pub ingestor: Ingestor,
    pub scores: Scores,
    pub sign_ins: SignIns,
}

/// Everything an invocation needs, built once per container.
pub struct App {
    pub catalog: Catalog<Services>,
    pub dead_letters: DeadLetters,
    pub store: Store,
    pub clock: Clock,
    pub metrics: Metrics,
}

impl App {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, dead_letters: DeadLetters, clock: Clock, metrics: Metrics) -> Self {
        let (built_keys, built_store) = (keys.clone(), store.clone());
        let build = move |config: Arc<Config>| Services {
            ingestor: Ingestor::new(config.clone(), built_keys.clone(), built_store.clone()),
            scores: Scores::new(config.clone(), built_keys.clone(), built_store.clone()),
            sign_ins: SignIns::new(config, built_keys.clone(), built_store.clone()),
        };
        Self { catalog: Catalog::new(config, keys, store.clone(), build), dead_letters, store, clock, metrics }
    }

    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Arc::new(Config::from_env()?);
        let keys = standings::keys_from_env()?;
        let url = std::env::var(DEAD_LETTER_QUEUE_ENV)
            .ok()
            .filter(|url| !url.is_empty())
            .ok_or_else(|| format!("{DEAD_LETTER_QUEUE_ENV} is not set: messages that can never apply need somewhere to go"))?;
        let dead_letters = DeadLetters::connect(url).await;
        let store = Store::from_env().await?;
        standings::services::journal::births::at_start_from_env(&config, &keys, &store).await;
        Ok(Self::new(config, keys, store, dead_letters, standings::system_clock(), Metrics::stdout(FUNCTION)))
    }

    /// One batch: every message applied, retried or dead-lettered. A message whose trip to the
    /// dead-letter queue fails is retried instead, so nothing is dropped. A FIFO queue's batch
    /// is applied in rounds (`fifo_rounds`): a group stops at its first message handed back,
    /// which is reported with every later message of its group, unapplied, as AWS requires.
    pub async fn handle(&self, event: SqsEvent) -> SqsBatchResponse {
        self.handle_until(event, None).await
    }

    /// `handle` within the invocation's `deadline` (Lambda's `context.deadline`): a message
    /// whose trip to the dead-letter queue cannot finish `DEADLINE_MARGIN` before it is handed
    /// back instead, so the answer always goes out in time.
    pub async fn handle_until(&self, event: SqsEvent, deadline: Option<DateTime<Utc>>) -> SqsBatchResponse {
        let deliveries: Vec<Delivery> = event.records.iter().map(delivery).collect();
        let mut response = SqsBatchResponse::default();
        let mut stopped: HashSet<&str> = HashSet::new();
        let mut settled = vec![false; deliveries.len()];
        for round in fifo_rounds(&deliveries) {
            let round: Vec<usize> =
                round.into_iter().filter(|&i| deliveries[i].group.as_deref().is_none_or(|g| !stopped.contains(g))).collect();
            if round.is_empty() {
                continue;
            }
            let batch: Vec<Delivery> = round.iter().map(|&i| deliveries[i].clone()).collect();
            // A score for a deleted board is refused as ended (dead-lettered `board_ended`), not
            // as unknown: its tombstone is read by name.
            let messages = parse(&batch);
            let services = self.catalog.naming_all(&scored_boards(&messages)).await;
            let verdicts = match services {
                Ok(services) => consume(&services.ingestor, &services.scores, &services.sign_ins, &batch, messages, (self.clock)()).await,
                Err(error) => {
                    tracing::error!(error = %error, "the boards could not be read: the batch is handed back");
                    batch.iter().map(|_| Verdict::Retry { code: "store_unavailable" }).collect()
                }
            };
            for (&i, verdict) in round.iter().zip(verdicts) {
                settled[i] = true;
                if !self.settle(&deliveries[i], verdict, deadline).await {
                    response.add_failure(&deliveries[i].id);
                    if let Some(group) = &deliveries[i].group {
                        stopped.insert(group);
                    }
                }
            }
        }
        for (delivery, _) in deliveries.iter().zip(settled).filter(|(_, settled)| !settled) {
            self.metrics.put(RETRIED, Unit::Count, 1.0, &[("Code", "group_stopped")]);
            response.add_failure(&delivery.id);
        }
        if !deliveries.is_empty() && response.batch_item_failures.len() == deliveries.len() {
            tracing::error!(messages = deliveries.len(), "every message of the batch was handed back");
            self.metrics.put(BATCHES_FAILED, Unit::Count, 1.0, &[]);
        }
        response
    }

    /// Ends one message: `false` when it is handed back (a batch item failure).
    async fn settle(&self, delivery: &Delivery, verdict: Verdict, deadline: Option<DateTime<Utc>>) -> bool {
        match verdict {
            Verdict::Done => true,
            Verdict::Retry { code } => {
                self.metrics.put(RETRIED, Unit::Count, 1.0, &[("Code", code)]);
                false
            }
            Verdict::Dead { code, message } => {
                let left = deadline.map(|deadline| (deadline - Utc::now() - DEADLINE_MARGIN).to_std().unwrap_or_default());
                let sent = match left {
                    None => Some(self.dead_letters.send(delivery, &code, &message).await),
                    Some(left) if left.is_zero() => None,
                    Some(left) => tokio::time::timeout(left, self.dead_letters.send(delivery, &code, &message)).await.ok(),
                };
                let Some(sent) = sent else {
                    tracing::warn!(message_id = %delivery.id, code = %code, "no time left to dead-letter the message before the invocation's deadline; it is retried");
                    self.metrics.put(RETRIED, Unit::Count, 1.0, &[("Code", "dead_letter_deadline")]);
                    return false;
                };
                self.dead_lettered(delivery, &code, &message, sent)
            }
        }
    }

    fn dead_lettered(&self, delivery: &Delivery, code: &str, message: &str, sent: Result<(), aws_sdk_sqs::Error>) -> bool {
        match sent {
            Ok(()) => {
                tracing::warn!(message_id = %delivery.id, code = %code, reason = %message, "dead-lettered");
                self.metrics.put(DEAD_LETTERED, Unit::Count, 1.0, &[("Code", code)]);
                true
            }
            Err(error) => {
                tracing::error!(message_id = %delivery.id, code = %code, reason = %message, error = %error, "the dead-letter queue refused a message; it is retried");
                self.metrics.put(RETRIED, Unit::Count, 1.0, &[("Code", "dead_letter_unavailable")]);
                false
            }
        }
    }
}

/// The batch's messages in rounds applied one after the other: a standard queue's in one; a
/// FIFO queue's the n-th message of every group in round n, so a group's messages apply in
/// their order and a group can stop at a failure while the others go on.
fn fifo_rounds(deliveries: &[Delivery]) -> Vec<Vec<usize>> {
    if deliveries.iter().all(|d| d.group.is_none()) {
        return vec![(0..deliveries.len()).collect()];
    }
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    let mut seen: HashMap<Option<&str>, usize> = HashMap::new();
    for (i, delivery) in deliveries.iter().enumerate() {
        let n = seen.entry(delivery.group.as_deref()).or_default();
        if rounds.len() <= *n {
            rounds.push(Vec::new());
        }
        rounds[*n].push(i);
        *n += 1;
    }
    rounds
}

fn delivery(message: &SqsMessage) -> Delivery {
    Delivery {
        group: message.attributes.get("MessageGroupId").cloned(),
        sent_at: message.attributes.get("SentTimestamp").and_then(|ms| ms.parse().ok()).and_then(chrono::DateTime::from_timestamp_millis),
        id: message.message_id.clone().unwrap_or_default(),
        body: message.body.clone().unwrap_or_default(),
        receive_count: message.attributes.get("ApproximateReceiveCount").and_then(|n| n.parse().ok()).unwrap_or(1),
    }
}
