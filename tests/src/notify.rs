//! Rank-change notifications on a test app (docs/notifications.md): an EventBridge bus on
//! moto_server with a rule to an SQS queue, both through the real SDK; the `journal` function's
//! drain sending to it; the events read back from the queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_eventbridge::types::Target;
use journal::{Bus, BusError, DrainReport, EventBridgeBus, Notifier, ObjectError, Objects, Put, Unsent};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::domain::notify::{CrossingKind, Detail};
use standings::redis::keys::Keys;
use standings::redis::store::Store;
use standings::runtime::metrics::Metrics;

use crate::{TestApp, redis_settings, spawn_app, unique_prefix};

/// An app whose writes record rank moves on boards that notify.
pub async fn spawn_notified(config: Config) -> TestApp {
    let settings = redis_settings();
    let keys = Keys::new(&unique_prefix()).unwrap().with_notices(true);
    spawn_app(config, keys, Store::connect(&settings).unwrap(), Store::connect(&settings).unwrap(), None).await
}

/// An EventBridge client for moto_server with one attempt, however long moto takes. The
/// functions' client (3 attempts of 10 s) sends a `PutEvents` again when a loaded moto answers
/// after 10 s, and moto had delivered the first: the events arrive twice, which these tests, that
/// count deliveries exactly, would read as the drain's duplicates (seen in CI's cluster pass:
/// a page announced twice, `CreateEventBus` answered "already exists").
pub async fn events_client() -> aws_sdk_eventbridge::Client {
    aws_sdk_eventbridge::Client::new(&standings::runtime::aws::sdk_config(1, std::time::Duration::from_secs(300)).await)
}

/// A bus of its own with the example rule (source `standings`, detail-type `Standings Rank
/// Changed`) to a queue of its own.
pub struct Subscribed {
    pub bus: EventBridgeBus,
    pub sqs: aws_sdk_sqs::Client,
    pub queue: String,
}

pub async fn subscribed() -> Subscribed {
    subscribed_to(standings::domain::notify::DETAIL_TYPE).await
}

/// A bus of its own with a rule for `detail_type` (source `standings`) to a queue of its own.
pub async fn subscribed_to(detail_type: &str) -> Subscribed {
    let events = events_client().await;
    let name = format!("bus-{}", unique_prefix().replace([':', '_'], "-"));
    events.create_event_bus().name(&name).send().await.expect("moto creates the bus");
    let sqs = crate::queue::sqs().await;
    let queue = crate::queue::new_queue(&sqs, "notices").await;
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(&queue)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("moto answers");
    let arn = attributes.attributes().and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn)).expect("an ARN").clone();
    let pattern = json!({"source": [standings::domain::notify::SOURCE], "detail-type": [detail_type]});
    // A rule name of its own too: moto_server keeps rules by name, so concurrent tests sharing
    // one would deliver each other's events (duplicates, strangers' crossings).
    let rule = format!("rule-{name}");
    events.put_rule().name(&rule).event_bus_name(&name).event_pattern(pattern.to_string()).send().await.expect("moto puts the rule");
    let target = Target::builder().id("queue").arn(arn).build().expect("a target");
    events.put_targets().rule(&rule).event_bus_name(&name).targets(target).send().await.expect("moto adds the target");
    Subscribed { bus: EventBridgeBus::new(events, name), sqs, queue }
}

impl Subscribed {
    /// Every event the rule delivered since the last call, in the order received, after checking
    /// the envelope.
    pub async fn received(&self) -> Vec<Detail> {
        self.events(standings::domain::notify::DETAIL_TYPE)
            .await
            .into_iter()
            .map(|detail| serde_json::from_value(detail).expect("a detail of schema version 1"))
            .collect()
    }

    /// The details of every event the rule delivered since the last call, in the order
    /// received, each checked to be of `detail_type`.
    pub async fn events(&self, detail_type: &str) -> Vec<Value> {
        crate::queue::drain(&self.sqs, &self.queue)
            .await
            .into_iter()
            .map(|(body, _, _)| {
                let event: Value = serde_json::from_str(&body).expect("an EventBridge event");
                assert_eq!(event["source"], standings::domain::notify::SOURCE);
                assert_eq!(event["detail-type"], detail_type);
                event["detail"].clone()
            })
            .collect()
    }
}

/// A bus that takes `left` events and then refuses the rest: a drain stopped mid-delivery.
pub struct FailingAfter<B> {
    pub inner: B,
    pub left: AtomicUsize,
}

impl<B: Bus> Bus for FailingAfter<B> {
    async fn put(&self, events: &[Detail]) -> Result<(), Unsent> {
        let take = self.left.load(Ordering::SeqCst).min(events.len());
        self.left.fetch_sub(take, Ordering::SeqCst);
        self.inner.put(&events[..take]).await?;
        if take < events.len() { Err(Unsent::from(take, events.len(), BusError("stopped mid-delivery".to_owned()))) } else { Ok(()) }
    }
}

/// A bus that takes `left` events, says so on `reached`, then never answers: a drain killed
/// mid-delivery (the Lambda's deadline, a crash) when its future is dropped there.
pub struct HangingAfter<B> {
    pub inner: B,
    pub left: usize,
    pub reached: Arc<tokio::sync::Notify>,
}

impl<B: Bus> Bus for HangingAfter<B> {
    async fn put(&self, events: &[Detail]) -> Result<(), Unsent> {
        let take = self.left.min(events.len());
        self.inner.put(&events[..take]).await?;
        self.reached.notify_one();
        std::future::pending().await
    }
}

/// No journal bucket: these apps journal nothing, so the drain never stores an object.
struct NoBucket;

impl Objects for NoBucket {
    async fn put_new(&self, _: &str, _: Vec<u8>) -> Result<Put, ObjectError> {
        Err(ObjectError("no journal here".to_owned()))
    }
    async fn get(&self, _: &str) -> Result<Vec<u8>, ObjectError> {
        Err(ObjectError("no journal here".to_owned()))
    }
    async fn list(&self, _: &str) -> Result<Vec<String>, ObjectError> {
        Ok(Vec::new())
    }
}

impl TestApp {
    /// One scheduled drain of this app's notices to `notifier`'s bus.
    pub async fn notify(&self, notifier: Notifier) -> DrainReport {
        let drainer = journal::Drainer::new(
            self.config.clone(),
            self.keys.clone(),
            self.store.clone(),
            NoBucket,
            Metrics::with_sink("journal", Arc::new(|_| {})),
        )
        .with_notifier(notifier);
        drainer.drain(chrono::Utc::now() + chrono::Duration::minutes(1)).await
    }

    /// `notify`, failing the test with the drain's own error when a board's drain failed: a
    /// test that expects every crossing delivered says why one was not.
    pub async fn notify_all(&self, notifier: Notifier) -> DrainReport {
        let report = self.notify(notifier).await;
        let failed: Vec<_> = report.boards.iter().filter_map(|b| b.error.as_ref().map(|e| (b.board.clone(), e.clone()))).collect();
        assert!(failed.is_empty(), "a notification drain failed: {failed:?}");
        report
    }

    /// Moves waiting in a board's notices.
    pub async fn notices_len(&self, board: &str) -> usize {
        standings::redis::notices::len(&mut self.redis.clone(), &self.keys.board(board)).await.expect("XLEN")
    }
}

/// (user, crossing, rank before, rank after, by) of each event, for assertions.
pub type Seen = (String, CrossingKind, Option<u32>, Option<u32>, Option<String>);

pub fn seen(details: &[Detail]) -> Vec<Seen> {
    details.iter().map(|d| (d.user_id.clone(), d.crossing, d.rank_before, d.rank_after, d.by.clone())).collect()
}

pub fn s(user: &str, crossing: CrossingKind, before: Option<u32>, after: Option<u32>, by: Option<&str>) -> Seen {
    (user.to_owned(), crossing, before, after, by.map(str::to_owned))
}

/// A bus that tells `reached` when it holds a put, then waits for `go` before passing it on: a
/// drain slower than its lease.
pub struct Gated<B> {
    pub inner: B,
    pub reached: Arc<tokio::sync::Notify>,
    pub go: Arc<tokio::sync::Notify>,
}

impl<B: Bus> Bus for Gated<B> {
    async fn put(&self, events: &[Detail]) -> Result<(), Unsent> {
        self.reached.notify_one();
        self.go.notified().await;
        self.inner.put(events).await
    }
}
