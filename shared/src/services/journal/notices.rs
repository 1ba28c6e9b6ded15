//! Rank-change notifications' half of the drain (docs/notifications.md): each board's notices,
//! oldest first, named as crossings (`domain::notify`), held back by the board's quiet time or
//! sent to the event bus, and only then trimmed, together with the held windows that replace
//! them. A run that stops after sending and before trimming sends the same events, with the
//! same ids, on its next run: at least once, in order per board.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::archive::bus::{Bus, BusError, Unsent};
use crate::domain::config::Board;
use crate::domain::notify::{self, Detail};
use crate::redis::keys::BoardKeys;
use crate::redis::notices;
use crate::redis::store::Connection;
use chrono::{DateTime, Utc};

use crate::redis::error::StoreError;

/// Why a board's notices were not sent: they stay in Redis for the next run.
#[derive(Debug, thiserror::Error)]
pub enum NoticeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Bus(#[from] BusError),
}

/// Entries read per step (each names a few events, at most `MAX_TOP` + 3): what is sent before
/// a trim, so what a failed step sends again.
pub const NOTICE_CHUNK: usize = 100;
/// How long a drain holds a board's notices: beyond the drain's 50 s budget, so it runs out
/// only for a drain that died.
const LOCK_LEASE_MS: u64 = 120_000;
/// Age of the oldest move not yet sent or held (the alarm's metric).
pub const NOTICE_LAG_METRIC: &str = "NotificationLagSeconds";
pub const NOTICES_SENT_METRIC: &str = "NotificationsSent";
/// Moves dropped because a board's notices were full (the bus failing for long).
pub const NOTICES_DROPPED_METRIC: &str = "NotificationsDropped";

/// A `Bus` behind a pointer (the drain holds whichever it was given).
pub trait AnyBus: Send + Sync {
    fn put_events<'a>(&'a self, events: &'a [Detail]) -> Pin<Box<dyn Future<Output = Result<(), Unsent>> + Send + 'a>>;
}

impl<B: Bus> AnyBus for B {
    fn put_events<'a>(&'a self, events: &'a [Detail]) -> Pin<Box<dyn Future<Output = Result<(), Unsent>> + Send + 'a>> {
        Box::pin(self.put(events))
    }
}

#[derive(Clone)]
pub struct Notifier {
    bus: Arc<dyn AnyBus>,
    chunk: usize,
    release: bool,
    lease_ms: u64,
}

impl Notifier {
    pub fn new(bus: impl Bus + 'static) -> Self {
        Self { bus: Arc::new(bus), chunk: NOTICE_CHUNK, release: false, lease_ms: LOCK_LEASE_MS }
    }

    /// Smaller steps (tests: a stop between two of them).
    pub fn with_chunk(mut self, entries: usize) -> Self {
        self.chunk = entries.max(1);
        self
    }

    /// Another lease (tests: a drain slower than its lease).
    pub fn with_lease_ms(mut self, lease_ms: u64) -> Self {
        self.lease_ms = lease_ms.max(1);
        self
    }

    /// Sends every window a quiet time holds now, due or not (an operator turning notifications
    /// off, `{"drain": {"release_held": true}}`; tests).
    pub fn releasing_held(mut self) -> Self {
        self.release = true;
        self
    }

    /// Sends what `board`'s notices and held windows have due, until none is left or `deadline`
    /// passes. Returns the events sent, or `None` when another drain of the board is running.
    pub async fn drain_board(
        &self,
        conn: &mut Connection,
        keys: &BoardKeys,
        board: &Board,
        deadline: DateTime<Utc>,
    ) -> Result<Option<usize>, NoticeError> {
        let token = format!("{:016x}", fastrand::u64(..));
        if !notices::lock(conn, keys, &token, self.lease_ms).await? {
            return Ok(None);
        }
        let sent = self.drain_locked(conn, keys, board, &token, deadline).await;
        notices::unlock(conn, keys, &token).await?;
        sent.map(Some)
    }

    /// Each step renews the lease before it sends and commits only while the lease is still
    /// this drain's: a drain slower than its lease stops at its next step, and one whose lease
    /// ran out while it sent commits nothing (the next drain sends those again, same ids).
    async fn drain_locked(
        &self,
        conn: &mut Connection,
        keys: &BoardKeys,
        board: &Board,
        token: &str,
        deadline: DateTime<Utc>,
    ) -> Result<usize, NoticeError> {
        let quiet_ms = board.notify.as_ref().map_or(0, |n| i64::from(n.quiet_secs) * 1000);
        let league = board.league.as_ref();
        let mut sent = 0;
        while Utc::now() < deadline {
            let entries = notices::oldest(conn, keys, self.chunk).await?;
            // Read whatever the quiet time is now: windows held before it was turned off go out.
            let was = notices::held(conn, keys).await?;
            if entries.is_empty() && was.is_empty() {
                break;
            }
            let mut held = was.clone();
            let mut events = Vec::new();
            for entry in &entries {
                let write_id = Some(entry.write_id.as_str()).filter(|id| !id.is_empty());
                for detail in notify::details(&board.name, &entry.id, write_id, &entry.moves, league) {
                    if quiet_ms > 0 {
                        notify::merge(&mut held, detail, entry.at_ms(), quiet_ms);
                    } else {
                        events.push(detail);
                    }
                }
            }
            let read_all = entries.len() < self.chunk;
            // Later entries are no older than the last read (or than now, when none is left): a
            // window due by then can take no more crossings.
            let horizon = match (self.release || quiet_ms == 0, read_all) {
                (true, true) => i64::MAX,
                (_, true) => notices::now_ms(conn).await?,
                (_, false) => entries.last().map_or(0, |e| e.at_ms()),
            };
            let mut due = notify::due(&mut held, horizon);
            due.append(&mut events);
            if !notices::renew(conn, keys, token, self.lease_ms).await? {
                tracing::warn!(board = %board.name, "the notification drain's lease ran out; another drain goes on");
                break;
            }
            let refused = match self.bus.put_events(&due).await {
                Ok(()) => None,
                // Nothing taken: the step stays as it is for the next run.
                Err(unsent) if unsent.events.len() >= due.len() => return Err(unsent.error.into()),
                // Some taken: what was not is held, due at once in its order, and the step is
                // committed, so the next run sends only that, and nothing the bus took again.
                Err(unsent) => {
                    let since = match entries.first() {
                        Some(entry) => entry.at_ms(),
                        None => notices::now_ms(conn).await?,
                    };
                    notify::hold_unsent(&mut held, unsent.events.iter().map(|&i| due[i].clone()), since);
                    Some(unsent)
                }
            };
            sent += due.len() - refused.as_ref().map_or(0, |unsent| unsent.events.len());
            if !notices::commit(conn, keys, token, entries.last().map(|e| e.id.as_str()), &was, &held).await? {
                tracing::warn!(board = %board.name, "the notification drain's lease ran out while it sent; nothing committed");
                if let Some(unsent) = refused {
                    return Err(unsent.error.into());
                }
                break;
            }
            if let Some(unsent) = refused {
                return Err(unsent.error.into());
            }
            if read_all {
                break;
            }
        }
        Ok(sent)
    }
}

/// Seconds since the oldest move of a board not sent: recorded and not yet read, or held past
/// its window's end.
pub(super) async fn lag(conn: &mut Connection, keys: &BoardKeys) -> Result<f64, crate::redis::error::StoreError> {
    let now = Utc::now().timestamp_millis();
    let oldest = notices::oldest_ms(conn, keys).await?;
    let overdue = notices::held(conn, keys).await?.values().flatten().map(|w| w.due_ms).min().filter(|&due| due < now);
    let since = [oldest, overdue].into_iter().flatten().min();
    Ok(since.map_or(0.0, |ms| ((now - ms).max(0) as f64) / 1000.0))
}
