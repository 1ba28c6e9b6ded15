//! What a drain answers: its report, board by board, and why a board's drain failed.

use serde::Serialize;

use super::notices::NoticeError;
use super::windows::WindowError;
use crate::archive::objects::ObjectError;
use crate::redis::error::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum DrainError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Objects(#[from] ObjectError),
    #[error(transparent)]
    Notices(#[from] NoticeError),
    #[error("object {0} is not this chunk's (no journal line, or another first entry)")]
    Unreadable(String),
}

impl From<WindowError> for DrainError {
    fn from(error: WindowError) -> Self {
        match error {
            WindowError::Store(error) => Self::Store(error),
            WindowError::Objects(error) => Self::Objects(error),
            WindowError::Unreadable(name, _) => Self::Unreadable(name),
        }
    }
}

impl From<super::births::BirthError> for DrainError {
    fn from(error: super::births::BirthError) -> Self {
        match error {
            super::births::BirthError::Store(error) => Self::Store(error),
            super::births::BirthError::Objects(error) => Self::Objects(error),
        }
    }
}

/// One board's drain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BoardDrain {
    pub board: String,
    /// Entries trimmed from Redis, every one of them in S3.
    pub entries: usize,
    /// Objects this run created.
    pub objects: usize,
    /// Age of the oldest entry left in Redis (0: none left).
    pub lag_seconds: f64,
    /// Rank-change notifications sent (docs/notifications.md).
    pub notifications: usize,
    /// Age of the oldest rank move not yet sent or held by a quiet time (0: none).
    pub notification_lag_seconds: f64,
    /// Rank moves the full notices dropped since the last run asked (docs/notifications.md).
    #[serde(skip_serializing_if = "is_zero")]
    pub notifications_dropped: u64,
    /// The board lost its data in Redis and waits for a restore (docs/journal.md#fence), or
    /// its Redis is older than its journal (docs/journal.md#rollbacks).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lost: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The last entry this run stored and trimmed (the drain's record in S3).
    #[serde(skip)]
    pub through: Option<String>,
    /// The snapshot's point, when the board's Redis was found older than its journal.
    #[serde(skip)]
    pub rolled_back: Option<String>,
    /// What the board's guard says was drained, when it was found not older than its journal:
    /// raises the drain's record where a run's write of it was lost.
    #[serde(skip)]
    pub held: Option<String>,
    /// Its guard lost after a restore decided its rollback's window whole: the record forgets
    /// the rollback (the stream holds history).
    #[serde(skip)]
    pub window_decided: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DrainReport {
    /// The run ended before its deadline, every board's stream drained to its end as the run
    /// found it; false: the deadline stopped it, entries may be left for the next run.
    pub complete: bool,
    pub boards: Vec<BoardDrain>,
    pub entries: usize,
    pub lag_seconds: f64,
    pub notifications: usize,
    pub notification_lag_seconds: f64,
}
