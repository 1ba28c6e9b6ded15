//! Restore (docs/journal.md#restore): a board brought back from its journal in S3 after Redis
//! lost it, by replaying every line, in the board's order of writes, at the time it was first
//! applied (`crate::services::replay`).
//!
//! Resumable: where it stands (object and line) is kept in the board's slot after every object
//! and when the deadline stops it, so the next invocation goes on from there. It refuses to
//! start on a board whose current periods hold data unless told to overwrite.

use std::sync::Arc;

use crate::Clock;
use crate::domain::config::Config;
use crate::redis::error::StoreError;
use crate::redis::journal::{self, Checkpoint};
use crate::redis::keys::{BoardKeys, Keys, PROFILES_JOURNAL};
use crate::redis::store::{Connection, Store};
use crate::services::moderation::current_periods;
use crate::services::replay::{ReplayError, Replayed, Replayer};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::archive::objects::{ObjectError, Objects, ReadError, journal_objects, read_lines};

/// Refused lines listed in a report (the count covers them all).
const LISTED_REFUSALS: usize = 20;
/// A restore's lock outlives its deadline by this much (its last checkpoint is being saved).
const LOCK_SLACK_MS: u64 = 60_000;

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("no board named {0:?}")]
    UnknownBoard(String),
    #[error("board {0:?} has data in its current periods; restore it with \"overwrite\": true only if that data is to be replayed over")]
    BoardHasData(String),
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Objects(#[from] ObjectError),
    #[error("object {0}: {1}")]
    Unreadable(String, String),
    #[error("{0}")]
    Invalid(String),
    #[error("the journal of board {0:?} did not replay within one invocation")]
    Unfinished(String),
    #[error("a restore of board {0:?} is running; invoke again once it answers")]
    Running(String),
}

impl RestoreError {
    pub fn code(&self) -> &'static str {
        match self {
            RestoreError::UnknownBoard(_) => "unknown_board",
            RestoreError::BoardHasData(_) => "board_has_data",
            RestoreError::Replay(ReplayError::Malformed { .. }) | RestoreError::Unreadable(..) => "journal_unreadable",
            RestoreError::Replay(ReplayError::Store(_)) | RestoreError::Store(_) => "store_unavailable",
            RestoreError::Objects(_) => "journal_unavailable",
            RestoreError::Invalid(_) => "bad_request",
            RestoreError::Unfinished(_) => "unfinished",
            RestoreError::Running(_) => "restore_running",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Complete,
    InProgress,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BoardRestore {
    pub board: String,
    pub status: Status,
    /// Lines replayed by this invocation, and what they did.
    pub replayed: usize,
    pub applied: usize,
    pub duplicates: usize,
    pub refused: usize,
    /// The first refused lines (`<stream id>: <why>`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestoreReport {
    pub status: Status,
    pub boards: Vec<BoardRestore>,
}

pub struct Restorer<O> {
    config: Arc<Config>,
    keys: Keys,
    store: Store,
    objects: O,
    replayer: Replayer,
    clock: Clock,
}

impl<O: Objects> Restorer<O> {
    /// `clock` decides which periods are current (the "has data" check).
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, objects: O, clock: Clock) -> Self {
        let replayer = Replayer::new(config.clone(), keys.clone(), store.clone());
        Self { config, keys, store, objects, replayer, clock }
    }

    /// Restores `board` (every board when `None`) until done or `deadline`; every call makes
    /// progress, so calling again until `complete` finishes.
    pub async fn restore(&self, board: Option<&str>, overwrite: bool, deadline: DateTime<Utc>) -> Result<RestoreReport, RestoreError> {
        let boards: Vec<String> = match board {
            Some(PROFILES_JOURNAL) => vec![PROFILES_JOURNAL.to_owned()],
            Some(name) => vec![self.config.board(name).ok_or_else(|| RestoreError::UnknownBoard(name.to_owned()))?.name.clone()],
            None => self.config.boards().iter().map(|b| b.name.clone()).chain([PROFILES_JOURNAL.to_owned()]).collect(),
        };
        let mut reports = Vec::new();
        for name in boards {
            let first = reports.is_empty();
            if !first && Utc::now() >= deadline {
                reports.push(BoardRestore::pending(&name));
                continue;
            }
            reports.push(self.restore_board(&name, overwrite, deadline).await?);
        }
        let status = if reports.iter().all(|r| r.status == Status::Complete) { Status::Complete } else { Status::InProgress };
        Ok(RestoreReport { status, boards: reports })
    }

    /// One board's restore, under its lock: one restore of a board at a time (a caller that
    /// retries a slow invocation must not start a second).
    async fn restore_board(&self, name: &str, overwrite: bool, deadline: DateTime<Utc>) -> Result<BoardRestore, RestoreError> {
        let keys = self.keys.board(name);
        let mut conn = self.store.write_connection().await?;
        let lease = (deadline - Utc::now()).num_milliseconds().max(0).unsigned_abs() + LOCK_SLACK_MS;
        if !journal::lock_restore(&mut conn, &keys, lease).await? {
            return Err(RestoreError::Running(name.to_owned()));
        }
        let restored = self.restore_locked(name, overwrite, deadline, &mut conn, &keys).await;
        if let Err(error) = journal::unlock_restore(&mut conn, &keys).await {
            tracing::warn!(board = name, error = %error, "the restore lock is left to its lease");
        }
        restored
    }

    async fn restore_locked(
        &self,
        name: &str,
        overwrite: bool,
        deadline: DateTime<Utc>,
        conn: &mut Connection,
        keys: &BoardKeys,
    ) -> Result<BoardRestore, RestoreError> {
        let mut report = BoardRestore::pending(name);
        let at = match journal::restore_checkpoint(conn, keys).await? {
            Checkpoint::Done if !overwrite => {
                report.status = Status::Complete;
                return Ok(report);
            }
            Checkpoint::At(object, line) => Some((object, line)),
            Checkpoint::Done | Checkpoint::Fresh => None,
        };
        if at.is_none() && !overwrite && self.has_data(name).await? {
            return Err(RestoreError::BoardHasData(name.to_owned()));
        }
        let names = journal_objects(&self.objects, self.keys.prefix(), name).await?;
        let start = match &at {
            Some((object, _)) => names
                .iter()
                .position(|n| n == object)
                .ok_or_else(|| RestoreError::Unreadable(object.clone(), "the restore's checkpoint names an object that is gone".into()))?,
            None => 0,
        };
        for (index, object) in names.iter().enumerate().skip(start) {
            let lines = read_lines(&self.objects, object).await?;
            let from = match &at {
                Some((_, line)) if index == start => *line,
                _ => 0,
            };
            for (number, line) in lines.iter().enumerate().skip(from) {
                // Every call makes progress: at least one line before the deadline counts.
                if report.replayed > 0 && Utc::now() >= deadline {
                    journal::save_restore_checkpoint(conn, keys, object, number).await?;
                    return Ok(report);
                }
                match self.replayer.replay(name, line).await {
                    Ok(replayed) => report.count(&line.id, replayed),
                    Err(error) => {
                        // Redis failed on this line: the next invocation starts with it.
                        let _ = journal::save_restore_checkpoint(conn, keys, object, number).await;
                        return Err(error.into());
                    }
                }
            }
            if let Some(next) = names.get(index + 1) {
                journal::save_restore_checkpoint(conn, keys, next, 0).await?;
            }
        }
        journal::finish_restore(conn, keys).await?;
        report.status = Status::Complete;
        Ok(report)
    }

    /// Whether any current period board of `name` has members; for the profiles' journal,
    /// whether it holds entries not yet drained (Redis did not lose them).
    async fn has_data(&self, name: &str) -> Result<bool, RestoreError> {
        if name == PROFILES_JOURNAL {
            let mut conn = self.store.connection().await?;
            return Ok(journal::len(&mut conn, &self.keys.profiles_journal()).await? > 0);
        }
        let board = self.config.board(name).ok_or_else(|| RestoreError::UnknownBoard(name.to_owned()))?;
        let mut conn = self.store.connection().await?;
        Ok(journal::any_members(&mut conn, &self.keys.board(name), &current_periods(board, (self.clock)())).await?)
    }
}

impl From<ReadError> for RestoreError {
    fn from(error: ReadError) -> Self {
        match error {
            ReadError::Unavailable(error) => RestoreError::Objects(error),
            ReadError::Unreadable(name, why) => RestoreError::Unreadable(name, why),
        }
    }
}

impl BoardRestore {
    fn pending(board: &str) -> Self {
        Self {
            board: board.to_owned(),
            status: Status::InProgress,
            replayed: 0,
            applied: 0,
            duplicates: 0,
            refused: 0,
            refusals: Vec::new(),
        }
    }

    fn count(&mut self, id: &str, replayed: Replayed) {
        self.replayed += 1;
        match replayed {
            Replayed::Applied => self.applied += 1,
            Replayed::Duplicate => self.duplicates += 1,
            Replayed::Refused(why) => {
                self.refused += 1;
                if self.refusals.len() < LISTED_REFUSALS {
                    self.refusals.push(format!("{id}: {why}"));
                }
            }
        }
    }
}
