//! The journal's jobs' one error type (restore, verify, dry-runs, reshard), mapped to an
//! invocation's error code in one place (`code`).

use crate::archive::objects::ObjectError;
use crate::redis::error::StoreError;
use crate::services::replay::ReplayError;

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("no board named {0:?}")]
    UnknownBoard(String),
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
    /// A board lost, fenced or being restored where a job needs it whole: a restore first.
    #[error("{0}")]
    Lost(String),
    #[error("the journal of board {0:?} did not replay within one invocation")]
    Unfinished(String),
    #[error("a restore of board {0:?} is running; invoke again once it answers")]
    Running(String),
}

impl From<redis::RedisError> for RestoreError {
    fn from(error: redis::RedisError) -> Self {
        Self::Store(error.into())
    }
}

impl From<super::windows::WindowError> for RestoreError {
    fn from(error: super::windows::WindowError) -> Self {
        match error {
            super::windows::WindowError::Store(error) => Self::Store(error),
            super::windows::WindowError::Objects(error) => Self::Objects(error),
            super::windows::WindowError::Unreadable(name, problem) => Self::Unreadable(name, problem),
        }
    }
}

impl RestoreError {
    pub fn code(&self) -> &'static str {
        match self {
            RestoreError::UnknownBoard(_) => "unknown_board",
            RestoreError::Replay(ReplayError::Malformed { .. }) | RestoreError::Unreadable(..) => "journal_unreadable",
            // A loss found on the way (a move freezing a shard whose recorded set is gone): a restore first.
            RestoreError::Replay(ReplayError::Store(e)) | RestoreError::Store(e) if e.is_restoring() => "board_restoring",
            RestoreError::Lost(_) => "board_restoring",
            RestoreError::Replay(ReplayError::Store(_)) | RestoreError::Store(_) => "store_unavailable",
            RestoreError::Objects(_) => "journal_unavailable",
            RestoreError::Invalid(_) => "bad_request",
            RestoreError::Unfinished(_) => "unfinished",
            RestoreError::Running(_) => "restore_running",
        }
    }
}
