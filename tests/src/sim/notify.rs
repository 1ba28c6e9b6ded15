//! Rank-change notifications in the simulation: the arcade notifies its top `TOP` of each day
//! to an EventBridge bus on moto (a rule to a queue of its own); each write the model applies
//! adds the crossings `crossings` predicts, each drain's events are taken off that list, and a
//! drain whose bus took everything leaves it empty: no event twice (by id), none the model does
//! not predict, none missing. A fault: a drain whose bus refuses some entries of its calls.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};

use journal::{Bus, BusError, EventBridgeBus, Notifier, S3Objects, Unsent};
use standings::domain::notify::Detail;

use super::crossings::{Crossing, expected};
use super::model::Model;
use super::world::{World, far};
use crate::notify::Subscribed;

/// The arcade's `notify = { top }`.
pub const TOP: usize = 3;
/// The events' `detail-type` (docs/notifications.md).
const DETAIL_TYPE: &str = "Standings Rank Changed";

pub(super) struct Notified {
    pub(super) sub: Subscribed,
    /// Crossings the model predicts and no drain has delivered yet.
    pending: Vec<Crossing>,
    /// Every event id delivered.
    ids: HashSet<String>,
}

impl Notified {
    pub(super) async fn new() -> Self {
        Self { sub: crate::notify::subscribed().await, pending: Vec::new(), ids: HashSet::new() }
    }
}

/// A bus that refuses a share of the entries of each call (EventBridge's `FailedEntryCount`)
/// and passes the others on.
struct Refusing {
    inner: EventBridgeBus,
    rng: Mutex<fastrand::Rng>,
}

impl Bus for Refusing {
    async fn put(&self, events: &[Detail]) -> Result<(), Unsent> {
        let refused: Vec<usize> = {
            let mut rng = self.rng.lock().expect("not poisoned");
            (0..events.len()).filter(|_| rng.u8(..3) == 0).collect()
        };
        let taken: Vec<Detail> = (0..events.len()).filter(|i| !refused.contains(i)).map(|i| events[i].clone()).collect();
        self.inner.put(&taken).await.map_err(|unsent| Unsent::from(0, events.len(), unsent.error))?;
        match refused.len() {
            0 => Ok(()),
            n => Err(Unsent { events: refused, error: BusError(format!("{n} of {} entries refused (ThrottlingException)", events.len())) }),
        }
    }
}

impl World {
    pub(super) fn notifier(&self) -> Notifier {
        Notifier::new(self.notified.sub.bus.clone())
    }

    /// The crossings of a write of `mover` the model applied after `before`, on every arcade
    /// day it changed.
    pub(super) fn expect_moves(&mut self, before: &Model, mover: &str, banned: bool) {
        let (was, now) = (before.arcade_standings(), self.model.arcade_standings());
        let periods: BTreeSet<&String> = was.keys().chain(now.keys()).collect();
        for period in periods {
            let (b, a) = (was.get(period).cloned().unwrap_or_default(), now.get(period).cloned().unwrap_or_default());
            if b != a {
                let id = period.trim_start_matches("day:");
                self.notified.pending.extend(expected(id, TOP, &b, &a, mover, banned));
            }
        }
        // The zones of the mover's cohort on every league day (docs/notifications.md).
        let model = &self.model;
        for day in model.ladder.days().chain(before.ladder.days()).collect::<BTreeSet<i64>>() {
            let (b, a) = (before.arcade_day(day), model.arcade_day(day));
            let id = super::model::day_of(day * 86_400);
            let zones = model.ladder.zone_crossings(&before.ladder, day, &id, mover, (&b, &a), before.banned(), model.banned());
            self.notified.pending.extend(zones);
        }
    }

    /// Fault: one drain whose bus refuses some entries of each call (`pick` seeds which).
    pub(super) async fn refusing_drain(&mut self, pick: u64) -> Result<(), String> {
        let bus = Refusing { inner: self.notified.sub.bus.clone(), rng: Mutex::new(fastrand::Rng::with_seed(pick)) };
        let objects = S3Objects::new(self.s3.clone(), &self.bucket);
        // Its report names the refusals; what reached the bus is checked below.
        self.app.drainer(objects, Arc::default()).with_notifier(Notifier::new(bus)).drain(far()).await;
        self.check_notices(false).await
    }

    /// Takes the events delivered since the last check off the model's list; with `complete`
    /// (a drain whose bus took everything), nothing may be left on it.
    pub(super) async fn check_notices(&mut self, complete: bool) -> Result<(), String> {
        for detail in self.notified.sub.events(DETAIL_TYPE).await {
            let text = |field: &str| detail[field].as_str().unwrap_or_default().to_owned();
            if !self.notified.ids.insert(text("id")) {
                return Err(format!("a notification delivered twice: {detail}"));
            }
            let got = (text("period_id"), text("user_id"), text("crossing"), detail["by"].as_str().map(str::to_owned));
            let matches = |c: &Crossing| (&c.period_id, &c.user, c.kind, &c.by) == (&got.0, &got.1, &got.2[..], &got.3);
            if let Some(at) = self.notified.pending.iter().position(matches) {
                self.notified.pending.remove(at);
            } else {
                return Err(format!("a notification the model does not predict: {detail}; predicted {:?}", self.notified.pending));
            }
        }
        if complete && !self.notified.pending.is_empty() {
            return Err(format!("notifications the model predicts were not delivered: {:?}", self.notified.pending));
        }
        Ok(())
    }
}
