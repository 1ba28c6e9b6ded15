//! Concurrent event load for fault tests. Every event is sent until it is acknowledged: a
//! 503 is retried with the same event id, as a client must. What each delivery got is kept,
//! so a test can assert exact figures once the fault is over.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::join_all;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::TestApp;

/// Points of the `comment` rule on `activity` (every workload event is a fresh comment).
pub const COMMENT_POINTS: i64 = 3;

/// How long one event may keep failing before the load gives up (outlasts any failover).
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);

/// One event's delivery.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub event: Value,
    /// 503s answered before the acknowledgement.
    pub errors: u32,
    /// The acknowledgement said the event had been applied already (by an errored attempt).
    pub duplicate: bool,
    pub acknowledged_at: Instant,
}

impl Delivery {
    pub fn event_id(&self) -> &str {
        self.event["event_id"].as_str().unwrap()
    }

    pub fn user_id(&self) -> &str {
        self.event["user_id"].as_str().unwrap()
    }
}

/// `tasks` × `per_task` comments, each on a target of its own, spread over `users` users.
pub fn comments(tasks: usize, per_task: usize, users: usize) -> Vec<Vec<Value>> {
    (0..tasks)
        .map(|task| {
            (0..per_task)
                .map(|i| {
                    json!({
                        "event_id": format!("t{task}-e{i}"),
                        "user_id": format!("u{}", (task * per_task + i) % users),
                        "action": "comment",
                        "target": format!("t{task}-a{i}"),
                    })
                })
                .collect()
        })
        .collect()
}

/// Points per user if every delivery in `deliveries` counted exactly once.
pub fn expected_points<'a>(deliveries: impl IntoIterator<Item = &'a Delivery>) -> HashMap<String, i64> {
    let mut points = HashMap::new();
    for delivery in deliveries {
        *points.entry(delivery.user_id().to_owned()).or_default() += COMMENT_POINTS;
    }
    points
}

/// A load in progress: one task per event list, each sending its events in order.
pub struct Load {
    acknowledged: Arc<AtomicUsize>,
    tasks: Vec<JoinHandle<Vec<Delivery>>>,
}

impl Load {
    pub fn start(app: Arc<TestApp>, workload: Vec<Vec<Value>>) -> Self {
        let acknowledged = Arc::new(AtomicUsize::new(0));
        let tasks = workload
            .into_iter()
            .map(|events| {
                let (app, acknowledged) = (app.clone(), acknowledged.clone());
                tokio::spawn(async move {
                    let mut deliveries = Vec::with_capacity(events.len());
                    for event in events {
                        deliveries.push(deliver(&app, event).await);
                        acknowledged.fetch_add(1, Ordering::SeqCst);
                    }
                    deliveries
                })
            })
            .collect();
        Self { acknowledged, tasks }
    }

    fn acknowledged(&self) -> usize {
        self.acknowledged.load(Ordering::SeqCst)
    }

    /// Polls until at least `count` events are acknowledged.
    pub async fn wait_for_acknowledged(&self, count: usize) {
        crate::servers::eventually(&format!("{count} acknowledged events"), GIVE_UP_AFTER, || async {
            (self.acknowledged() >= count).then_some(())
        })
        .await;
    }

    /// Waits for every event to be acknowledged.
    pub async fn finish(self) -> Vec<Delivery> {
        join_all(self.tasks).await.into_iter().flat_map(Result::unwrap).collect()
    }
}

/// Sends `event` until it is acknowledged; only 503 (store unavailable) is retried.
pub async fn deliver(app: &TestApp, event: Value) -> Delivery {
    let started = Instant::now();
    let mut errors = 0;
    loop {
        let (status, body) = app.event(event.clone()).await;
        match status.as_u16() {
            200 => {
                let duplicate = body["duplicate"].as_bool().unwrap();
                return Delivery { event, errors, duplicate, acknowledged_at: Instant::now() };
            }
            503 => {
                errors += 1;
                assert!(started.elapsed() < GIVE_UP_AFTER, "event {event} still refused after {GIVE_UP_AFTER:?}: {body}");
                // Back off a little, as a client would; the next attempt is the synchronisation.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            other => panic!("event {event}: unexpected {other} {body}"),
        }
    }
}
