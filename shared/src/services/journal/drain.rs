//! The drain (docs/journal.md): each board's journal, oldest entry first, in chunks of one UTC
//! date, stored as one S3 object per chunk and only then trimmed from Redis.
//!
//! A chunk's object is named by its first entry's stream id, which does not change until that
//! entry is trimmed, and objects are never replaced: a drain that stops after storing a chunk
//! but before trimming it (a crash, the deadline) finds the object on its next run, trims what
//! that object holds and goes on, so every entry reaches S3 exactly once whatever stops where.

use std::sync::Arc;

use crate::domain::config::Config;
use crate::domain::journal::stream_order;
use crate::redis::error::StoreError;
use crate::redis::journal;
use crate::redis::keys::{CATALOG_JOURNAL, Keys, is_profile_journal, journal_board, journal_shards, profile_journals};
use crate::redis::restore::rollback::{self, Found};
use crate::redis::restore::{self, Birth, older};
use crate::redis::store::Store;
use crate::runtime::metrics::{Metrics, Unit};
use crate::services::catalog::boards_now;
use crate::services::profiles;
use chrono::{DateTime, Utc};
use futures::future::join_all;

use crate::archive::objects::{Objects, Put, lines_body};

use super::marks::Marks;
use super::notices::{NOTICE_LAG_METRIC, NOTICES_DROPPED_METRIC, NOTICES_SENT_METRIC, Notifier};
use super::{stored, windows};

pub use super::drain_report::{BoardDrain, DrainError, DrainReport};
pub use super::stored::CHUNK_ENTRIES;

/// Age of the oldest entry not yet in S3, after a drain (the alarm's metric).
pub const LAG_METRIC: &str = "JournalLagSeconds";
pub const DRAINED_METRIC: &str = "JournalEntriesDrained";
/// Why a board that needs the drain's record to be drained waited for a run that reads it.
const UNREAD: &str = "the drain's record is unreadable: not drained this run";
const MOVES_UNREAD: &str = "the boards' last moves are unreadable: not drained this run";
/// Boards that lost their data in Redis and refuse writes until restored (`BoardsLostAlarm`).
pub const LOST_METRIC: &str = "BoardsLost";

pub struct Drainer<O> {
    config: Arc<Config>,
    keys: Keys,
    store: Store,
    objects: O,
    metrics: Metrics,
    chunk: usize,
    notifier: Option<Notifier>,
    packed_after_ms: i64,
}

/// Seconds of each drain run the move of profiles to their shards may take (docs/journal.md#profiles).
const PROFILE_MOVE_SECS: i64 = 10;

impl<O: Objects> Drainer<O> {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, objects: O, metrics: Metrics) -> Self {
        let packed_after_ms = crate::domain::guard::PACKED_AFTER_MS;
        Self { config, keys, store, objects, metrics, chunk: CHUNK_ENTRIES, notifier: None, packed_after_ms }
    }

    /// Writes record packed effects `ms` after this drain's first trim (tests: 0, at once).
    pub fn with_packed_after_ms(mut self, ms: i64) -> Self {
        self.packed_after_ms = ms;
        self
    }

    /// Also sends each board's rank-change notifications (`STANDINGS_EVENT_BUS`).
    pub fn with_notifier(mut self, notifier: Notifier) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// Smaller chunks (tests: several objects from a few entries).
    pub fn with_chunk(mut self, entries: usize) -> Self {
        self.chunk = entries.max(1);
        self
    }

    pub fn objects(&self) -> &O {
        &self.objects
    }

    /// Drains every board until its journal is empty or `deadline` passes. A board that fails
    /// keeps its entries for the next run; the others drain regardless.
    pub async fn drain(&self, deadline: DateTime<Utc>) -> DrainReport {
        self.drain_releasing(deadline, false).await
    }

    /// `drain`, also sending every crossing a quiet time holds when `release`.
    pub async fn drain_releasing(&self, deadline: DateTime<Utc>, release: bool) -> DrainReport {
        // Profiles of the layout before shards move to their shards (journaled there) first,
        // until none is left (docs/journal.md#profiles).
        // A bounded share of the run, so a long move never holds the boards' drain back; the
        // move goes on from where it stood at the next run.
        let budget = deadline.min(Utc::now() + chrono::Duration::seconds(PROFILE_MOVE_SECS));
        if let Err(error) = profiles::move_legacy(&self.store, &self.keys, Utc::now(), budget).await {
            tracing::warn!(error = %error, "profiles of the layout before shards not moved yet");
        }
        // Each board's shards as configured and, while it is being resharded, as its data is
        // (docs/scaling.md#changing-shards): no stream is left undrained.
        // The runtime boards' definitions (docs/runtime-boards.md) are a journal of their own.
        let mut journals: Vec<String> = vec![CATALOG_JOURNAL.to_owned()];
        let config = match boards_now(&self.config, &self.keys, &self.store).await {
            Ok(config) => Arc::new(config),
            Err(error) => {
                tracing::error!(error = %error, "runtime boards unknown: only the declared boards are drained");
                self.config.clone()
            }
        };
        // A store older than a board's last switch (docs/scaling.md#changing-shards): the layout
        // it records is fenced, and the board counted lost below, until a restore decides the
        // writes the older store took before the fence again where the board switched to (stored
        // in S3 as that layout's history, nothing would tell them apart).
        let names: Vec<&str> = config.boards().iter().map(|board| board.name.as_str()).collect();
        // Unread (S3 or Redis failing): no board is drained this run (the catalog and the
        // profiles are, never moved), as when the drain's record is unread below, since any
        // board may hold such writes.
        let held_back = super::switches::fence_older_run(&self.store, &self.objects, &self.keys, &names).await;
        // Each board's record of older writes still to decide, read once a run (its shards share
        // it); a board whose read failed reads it again with its journals.
        let mut older_writes = std::collections::HashMap::new();
        for board in config.boards() {
            // The layout the data is in and the one a move takes it to.
            let drained = match self.store.write_connection().await {
                Ok(mut conn) => {
                    if let Ok(older) = older::read(&mut conn, &self.keys, &board.name).await {
                        older_writes.insert(board.name.clone(), older);
                    }
                    super::generations::drained(&self.store, &mut conn, &self.keys, board, &self.objects).await.ok()
                }
                Err(_) => None,
            };
            let drained = drained.unwrap_or_else(|| self.keys.layout(&board.name, board.shards).journals());
            for name in drained {
                if !journals.contains(&name) {
                    journals.push(name);
                }
            }
        }
        journals.extend(profile_journals());
        // What the journal knows and a Redis rolled back to a snapshot does not: without it (S3
        // unreadable) the run drains the profiles only (a board, its guard lost or not, may have
        // been rolled back), and records nothing.
        let marks = match Marks::load(&self.objects, self.keys.prefix()).await {
            Ok(marks) => Some(marks),
            Err(error) => {
                tracing::warn!(error = %error, "the drain's record unreadable: no board is drained this run (the profiles only)");
                None
            }
        };
        let names = journals.iter().map(String::as_str);
        let marks_read = marks.as_ref();
        let (held_back, older_writes) = (&held_back, &older_writes);
        let boards = join_all(names.map(|name| async move {
            let mut drained = BoardDrain {
                board: name.to_owned(),
                entries: 0,
                objects: 0,
                lag_seconds: 0.0,
                notifications: 0,
                notification_lag_seconds: 0.0,
                notifications_dropped: 0,
                lost: false,
                error: None,
                through: None,
                rolled_back: None,
                held: None,
                window_decided: false,
            };
            // The two streams drain side by side: a failing (or long) journal does not hold
            // notifications back, nor a failing bus the journal.
            let journal = async {
                let board = || !is_profile_journal(name) && name != CATALOG_JOURNAL;
                match held_back {
                    Some(older) if older.held_back.iter().any(|held| held == name) => drained.lost = true,
                    Some(older) if board() && older.unread.iter().any(|unread| unread == journal_board(name)) => {
                        drained.error = Some(MOVES_UNREAD.to_owned());
                    }
                    None if board() => drained.error = Some(MOVES_UNREAD.to_owned()),
                    _ => {
                        let older = older_writes.get(journal_board(name));
                        return self.drain_board(name, deadline, (marks_read, older), &mut drained).await;
                    }
                }
                Ok(())
            };
            let (journal, notices) = futures::join!(journal, self.notify_board(name, deadline, release));
            if let Err(error) = journal {
                tracing::error!(board = name, error = %error, "journal drain failed; the entries stay in Redis");
                drained.error = Some(error.to_string());
            }
            // The lag is measured whatever happened: a drain that keeps failing is what the alarm is for.
            let (sent, lag, dropped) = notices;
            drained.notification_lag_seconds = lag;
            drained.notifications_dropped = dropped;
            match sent {
                Ok(sent) => drained.notifications = sent,
                Err(error) => {
                    tracing::error!(board = name, error = %error, "notification drain failed; the moves stay in Redis");
                    drained.error.get_or_insert_with(|| error.to_string());
                }
            }
            // Measured whatever happened: a drain that keeps failing is what the lag alarm is for.
            match self.lag_seconds(name).await {
                Ok(lag) => drained.lag_seconds = lag,
                Err(error) => tracing::error!(board = name, error = %error, "journal lag unknown"),
            }
            drained
        }))
        .await;
        if let Some(mut marks) = marks {
            let mut moved = boards
                .iter()
                .flat_map(|b| [b.through.as_deref(), b.held.as_deref()].into_iter().flatten().map(move |id| (&b.board, id)))
                .fold(false, |moved, (board, id)| marks.raise(board, id) || moved);
            // Found older than its journal, or looked at and found not (restored since); boards
            // not looked at (lost, failed) keep what the record says.
            for board in boards.iter().filter(|b| b.rolled_back.is_some() || b.window_decided || (b.error.is_none() && !b.lost)) {
                moved |= marks.set_rolled_back(&board.board, board.rolled_back.as_deref());
            }
            if moved && let Err(error) = marks.save(&self.objects, self.keys.prefix()).await {
                tracing::warn!(error = %error, "the drain's record not stored: the next run stores it");
            }
        }
        let entries = boards.iter().map(|b| b.entries).sum();
        let lag_seconds = boards.iter().map(|b| b.lag_seconds).fold(0.0, f64::max);
        let notifications = boards.iter().map(|b| b.notifications).sum();
        let notification_lag_seconds = boards.iter().map(|b| b.notification_lag_seconds).fold(0.0, f64::max);
        let dropped: u64 = boards.iter().map(|b| b.notifications_dropped).sum();
        self.metrics.put(LAG_METRIC, Unit::Seconds, lag_seconds, &[]);
        self.metrics.put(DRAINED_METRIC, Unit::Count, entries as f64, &[]);
        self.metrics.put(LOST_METRIC, Unit::Count, boards.iter().filter(|b| b.lost).count() as f64, &[]);
        if self.notifier.is_some() {
            self.metrics.put(NOTICE_LAG_METRIC, Unit::Seconds, notification_lag_seconds, &[]);
            self.metrics.put(NOTICES_SENT_METRIC, Unit::Count, notifications as f64, &[]);
            self.metrics.put(NOTICES_DROPPED_METRIC, Unit::Count, dropped as f64, &[]);
        }
        DrainReport { complete: Utc::now() < deadline, boards, entries, lag_seconds, notifications, notification_lag_seconds }
    }

    /// Sends a board's notifications; the events sent, the age of the oldest move not sent
    /// (recorded, or held past its window's end) and the moves the full stream dropped.
    async fn notify_board(&self, name: &str, deadline: DateTime<Utc>, release: bool) -> (Result<usize, DrainError>, f64, u64) {
        // A board that notifies has one shard: its journal is named after it (and its generation).
        let board = self.config.boards().iter().find(|b| b.name == journal_board(name) && journal_shards(name) == 1);
        let (Some(notifier), Some(board)) = (&self.notifier, board) else {
            return (Ok(0), 0.0, 0);
        };
        let keys = self.keys.board(name);
        let mut conn = match self.store.write_connection().await {
            Ok(conn) => conn,
            Err(error) => return (Err(error.into()), 0.0, 0),
        };
        let notifier = if release { notifier.clone().releasing_held() } else { notifier.clone() };
        let sent = notifier.drain_board(&mut conn, &keys, board, deadline).await.map(|sent| sent.unwrap_or(0)).map_err(DrainError::from);
        let lag = match super::notices::lag(&mut conn, &keys).await {
            Ok(lag) => lag,
            Err(error) => {
                tracing::error!(board = name, error = %error, "notification lag unknown");
                0.0
            }
        };
        let dropped = match crate::redis::notices::dropped(&mut conn, &keys).await {
            Ok(dropped) => dropped,
            Err(error) => {
                tracing::error!(board = name, error = %error, "notification drops unknown");
                0
            }
        };
        if dropped > 0 {
            tracing::warn!(board = name, dropped, "the board's notices were full: its oldest rank moves were dropped unsent");
        }
        (sent, lag, dropped)
    }

    async fn drain_board(
        &self,
        board: &str,
        deadline: DateTime<Utc>,
        (marks, older_writes): (Option<&Marks>, Option<&Option<older::OlderWrites>>),
        drained: &mut BoardDrain,
    ) -> Result<(), DrainError> {
        let keys = self.keys.board(board);
        let mut conn = self.store.write_connection().await?;
        let guarded = !is_profile_journal(board);
        let born = guarded && restore::born(&mut conn, &keys).await?;
        let mut decided = None;
        // Writes a rolled-back store took before its fence wait in the stream to be decided
        // again (docs/journal.md#rollbacks): stored as they are, a later restore would apply
        // what they decided against the snapshot. Left until the restore has decided them, as
        // is a board found rolled back whose guard was lost since (its stream holds them too).
        if guarded && rollback::redecide(&mut conn, &keys).await?.is_some() {
            tracing::error!(board, "writes taken before a rollback's fence wait for the restore to decide them again");
            drained.lost = true;
            return Ok(());
        }
        if let Some(point) = marks.and_then(|marks| marks.rolled_back(board)).filter(|_| guarded && !born) {
            // Unless a restore decided its window whole before the guard went: history then (as a
            // restore takes it), stored, the rollback forgotten (found by the simulation).
            let objects = (&self.objects, self.keys.prefix());
            // (Boxed, as the cold paths below the journal function are: its future's depth.)
            decided = match marks.and_then(|marks| marks.get(board)) {
                Some(stored) => Box::pin(super::marks::window_decided(&mut conn, &keys, objects, board, stored)).await?,
                None => None,
            };
            if decided.is_none() {
                return self.rolled_back(&mut conn, board, point.to_owned(), marks, drained).await;
            }
        }
        // A Redis older than the journal (docs/journal.md#rollbacks): fenced, and not drained
        // until restored (its entries since the snapshot were decided on the older state).
        if born {
            // Without the record a rollback could go unseen and its writes since be stored as if
            // nothing was lost: the board waits for a run that reads it.
            let Some(marks) = marks else {
                // Still counted lost when a write found it so (a partial loss, a fence).
                drained.lost = restore::found_lost(&mut conn, &keys).await?;
                drained.error = Some(UNREAD.to_owned());
                return Ok(());
            };
            let found = match marks.get(board) {
                Some(stored) => rollback::check(&mut conn, &keys, stored).await?,
                None => rollback::point(&mut conn, &keys).await?.map_or(Found::Current(None), Found::Behind),
            };
            match found {
                Found::Behind(point) => return self.rolled_back(&mut conn, board, point, Some(marks), drained).await,
                Found::Current(held) => drained.held = held,
            }
        }
        if guarded && !born {
            // Journaled writes wait for this (docs/journal.md#fence): a board whose journal holds
            // nothing yet (no object, no entry) is new; one whose journal holds objects lost its history in Redis,
            // and stays refused until a restore completes.
            // Entries in its stream are history too: a guard lost before its first drain.
            if super::births::judge(&self.config, &self.store, &self.keys, board, &self.objects).await? == Birth::History {
                tracing::error!(board, "the board's data was lost: its writes are refused until it is restored from the journal");
                drained.lost = true;
            }
        }
        // Acknowledged writes an older store took wait to be decided again (docs/journal.md#rollbacks).
        let older = match older_writes {
            Some(read) => read.clone(),
            None if guarded && board != CATALOG_JOURNAL => older::read(&mut conn, &self.keys, journal_board(board)).await?,
            None => None,
        };
        if guarded
            && board != CATALOG_JOURNAL
            && let Some(older) = older
        {
            tracing::error!(board, "writes an older store took before its fence wait for a restore to decide them again");
            drained.lost = true;
            // Those journals themselves are never stored as history (whichever list named them).
            if older.layout.journals().iter().any(|journal| journal == board) {
                return Ok(());
            }
        }
        if !is_profile_journal(board) && restore::found_lost(&mut conn, &keys).await? {
            tracing::error!(
                board,
                "a write found the board's data partly lost: its writes are refused until it is restored from the journal"
            );
            drained.lost = true;
        }
        // A board whose guard is gone may have been found rolled back before (the record alone
        // says so now): its stream then holds the writes to decide again, not history to store.
        if guarded && !born && marks.is_none() {
            drained.error = Some(UNREAD.to_owned());
            return Ok(());
        }
        while Utc::now() < deadline {
            let lines = journal::oldest(&mut conn, &keys, board, self.chunk).await?;
            let Some((name, chunk)) = stored::chunk(self.keys.prefix(), board, &lines) else { break };
            let first = &chunk[0];
            let last = match self.objects.put_new(&name, lines_body(chunk)).await? {
                Put::Created => {
                    drained.objects += 1;
                    chunk.last().expect("a chunk has its first line").id.clone()
                }
                // Stored by an earlier run that stopped before trimming, or by a racing one: it
                // must begin with this very entry (a stream rebuilt after a loss on a clock
                // behind the old one could reuse an old object's name).
                Put::Exists => {
                    let stored = self.objects.get(&name).await?;
                    let stored_last = match stored::ids(&stored) {
                        Some((stored_first, stored_last)) if stored_first == first.id => stored_last,
                        _ => return Err(DrainError::Unreadable(name)),
                    };
                    // Stored by a run that stopped before trimming, its entries are all still in
                    // the stream; one whose last entry the stream lacks and the guard never
                    // drained was stored before a rollback this run had no record to see.
                    if born
                        && !journal::holds(&mut conn, &keys, &stored_last).await?
                        && let Found::Behind(point) = rollback::check(&mut conn, &keys, &stored_last).await?
                    {
                        return self.rolled_back(&mut conn, board, point, marks, drained).await;
                    }
                    stored_last
                }
            };
            match journal::trim_through(&mut conn, &keys, &last, guarded, self.packed_after_ms).await? {
                Some(trimmed) => {
                    drained.entries += trimmed;
                    drained.through = Some(last);
                }
                // A restore of the board reads the tail from the stream (trim_journal.lua). (A
                // move holds the lock on its new layout within an invocation only: the drain
                // stores its journal between two.)
                None => break,
            }
        }
        // The rollback is forgotten once its window's decisions are stored (the stream holds
        // nothing up to them): an error or the deadline before, and the next run judges again.
        if let Some(need) = decided {
            let oldest = journal::oldest(&mut conn, &keys, board, 1).await?.first().map(|line| line.id.clone());
            drained.window_decided = oldest.is_none_or(|oldest| stream_order(&oldest) > stream_order(&need));
        }
        Ok(())
    }

    /// A board found older than its journal: counted lost until restored, and not drained; the
    /// writes its store took after the record, fenced now, kept in S3 until the restore decides
    /// them again (`windows`: its stream is their only copy).
    async fn rolled_back(
        &self,
        conn: &mut crate::redis::store::Connection,
        board: &str,
        point: String,
        marks: Option<&Marks>,
        drained: &mut BoardDrain,
    ) -> Result<(), DrainError> {
        tracing::error!(board, "the board's Redis is older than its journal: its writes are refused until it is restored");
        drained.rolled_back = Some(point);
        drained.lost = true;
        if let Some(after) = marks.and_then(|marks| marks.get(board)) {
            windows::keep(conn, &self.keys.board(board), &self.objects, self.keys.prefix(), board, after).await?;
        }
        Ok(())
    }

    /// Seconds since the oldest entry of the board's journal still in Redis was written.
    async fn lag_seconds(&self, board: &str) -> Result<f64, StoreError> {
        let mut conn = self.store.connection().await?;
        let oldest = journal::oldest_ms(&mut conn, &self.keys.board(board)).await?;
        Ok(oldest.map_or(0.0, |ms| ((Utc::now().timestamp_millis() - ms).max(0) as f64) / 1000.0))
    }
}
