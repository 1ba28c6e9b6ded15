//! A warm function's periodic whole read of the catalog, made beside its requests: the request
//! that finds it due answers from the change log as any other, and a later one starts from what
//! the whole read found (the truth as of its version) and brings it forward through the log. At
//! 10,000 boards the whole read takes ~150 ms, which no request waits for; a cold function, with
//! nothing to serve meanwhile, still reads it whole before its first answer.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::held::{Held, held_of};
use crate::redis::keys::Keys;
use crate::redis::scripts::catalog::live;
use crate::redis::store::Store;

/// What a whole read found, as of the version it read.
pub(super) struct Found {
    /// When the read began (the catalog it found is at least that fresh).
    pub(super) began: Instant,
    pub(super) version: Option<u64>,
    pub(super) held: Arc<Held>,
}

#[derive(Default)]
struct Slot {
    /// When the read in flight began.
    since: Option<Instant>,
    found: Option<Found>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// The whole read in flight or done, shared with the task making it.
#[derive(Default, Clone)]
pub(super) struct WholeRead(Arc<Mutex<Slot>>);

impl WholeRead {
    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.0.lock().expect("whole read poisoned")
    }

    /// The catalog a whole read found since this was last asked, if any.
    pub(super) fn take(&self) -> Option<Found> {
        self.slot().found.take()
    }

    /// Starts a whole read beside the caller's request, unless one is in flight (one that has
    /// not answered within `every` is given up: a function frozen mid-read, its connection gone).
    pub(super) fn start(&self, store: &Store, keys: &Keys, every: Duration, before: Arc<Held>) {
        let mut slot = self.slot();
        if slot.since.is_some_and(|since| since.elapsed() < every) {
            return;
        }
        let began = Instant::now();
        slot.since = Some(began);
        let (whole, store, keys) = (self.clone(), store.clone(), keys.clone());
        slot.task = Some(tokio::spawn(async move {
            let read = async { live(&mut store.connection().await?, &keys).await }.await;
            // Off the runtime's threads: what changed is parsed (10,000 definitions are ~100 ms of
            // CPU), the rest hashed and shared with what the function holds.
            let found = match read {
                Ok(live) if live.version.is_some() => {
                    match tokio::task::spawn_blocking(move || (live.version, held_of(live, Some(&before)))).await {
                        Ok((version, held)) => Some(Found { began, version, held: Arc::new(held) }),
                        Err(error) => {
                            tracing::warn!(error = %error, "the catalog's whole read stopped: tried again later");
                            None
                        }
                    }
                }
                // No version: never written, or lost (this function keeps what it serves; a
                // request finds the loss through the version it asks).
                Ok(_) => None,
                Err(error) => {
                    tracing::warn!(error = %error, "the catalog's whole read failed: tried again later");
                    None
                }
            };
            let mut slot = whole.slot();
            if slot.since == Some(began) {
                slot.since = None;
                slot.found = found.or(slot.found.take());
            }
        }));
    }

    /// Waits for the whole read in flight, if any (tests and the bench: what a later request starts from).
    pub(super) async fn settled(&self) {
        let task = self.slot().task.take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}
