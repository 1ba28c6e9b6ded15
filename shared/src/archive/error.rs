//! The archive job's error (one enum for the archive layer), with the stable code each
//! invocation's error result carries.

use chrono::{DateTime, Utc};

use super::table::{MAX_SHARDS, TableError};
use crate::redis::error::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("invalid archive request: {0}")]
    BadRequest(String),
    #[error("unknown board {0:?}")]
    UnknownBoard(String),
    #[error("board {0:?} is not archived (archive = false in its configuration)")]
    NotArchived(String),
    #[error("season {0:?} is not a month such as 2026-10")]
    InvalidSeason(String),
    #[error("season {season} of board {board:?} has not ended; it can be archived from {}", .ready_at.to_rfc3339())]
    SeasonNotEnded { board: String, season: String, ready_at: DateTime<Utc> },
    #[error("shard_index must be below shard_total, and shard_total within 1..={MAX_SHARDS}")]
    InvalidShard,
    #[error("redis: {0}")]
    Store(#[from] StoreError),
    #[error(transparent)]
    Table(#[from] TableError),
    #[error("DynamoDB still left items unprocessed after {0} attempts; the next invocation resumes")]
    Unprocessed(u32),
    #[error("season {season} of board {board:?}: {stored} entries in DynamoDB for {frozen} frozen members; the frozen board is kept")]
    VerificationFailed { board: String, season: String, stored: u64, frozen: u64 },
    #[error(
        "season {season} of board {board:?} was frozen with {members} members, but its frozen board is gone and its archive is not complete"
    )]
    FrozenBoardMissing { board: String, season: String, members: u64 },
    #[error(
        "season {season} of board {board:?} had members, but its live board was gone (expired, evicted or flushed) when it was frozen; it is not archived as empty"
    )]
    LiveBoardLost { board: String, season: String },
}

impl ArchiveError {
    /// A stable code for the invocation's error result.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadRequest(_) => "bad_request",
            Self::UnknownBoard(_) => "unknown_board",
            Self::NotArchived(_) => "board_not_archived",
            Self::InvalidSeason(_) => "invalid_season",
            Self::SeasonNotEnded { .. } => "season_not_ended",
            Self::InvalidShard => "invalid_shard",
            // A journaled board lost or being restored: the freeze wrote nothing; restore first.
            Self::Store(e) if e.is_restoring() => "board_restoring",
            Self::Store(_) => "store_unavailable",
            Self::Table(_) => "table_unavailable",
            Self::Unprocessed(_) => "unprocessed_items",
            Self::VerificationFailed { .. } => "verification_failed",
            Self::FrozenBoardMissing { .. } => "frozen_board_missing",
            Self::LiveBoardLost { .. } => "live_board_lost",
        }
    }
}
