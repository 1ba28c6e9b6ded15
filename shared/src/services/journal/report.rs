//! What a restore answers (docs/journal.md#restore): per board, how far it got and what its
//! lines did.

use chrono::{DateTime, SecondsFormat};
use serde::Serialize;

use crate::domain::journal::stream_id_ms;
use crate::services::replay::Replayed;

/// Refused lines listed in a report (the count covers them all).
const LISTED_REFUSALS: usize = 20;

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
    /// Lines read by this invocation, and what they did: applied (their effects, on the keys
    /// that were lost), duplicates and refusals (lines decided again: see the module).
    pub replayed: usize,
    pub applied: usize,
    pub duplicates: usize,
    pub refused: usize,
    /// How far through the journal's objects the restore stands, in bytes (the journal's lines
    /// are counted only as they are read): all of the board's objects, what this invocation
    /// read, and what is left to read after it (0 once complete). The stream's undrained tail
    /// is not in them.
    pub journal_bytes: u64,
    pub read_bytes: u64,
    pub left_bytes: u64,
    /// The first refused lines (`<stream id>: <why>`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<String>,
    /// The last line restored so far (its stream id) and its time: once complete, the recovery
    /// point. Writes after it that were not drained were lost with the stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub through: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery_point: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestoreReport {
    pub status: Status,
    pub boards: Vec<BoardRestore>,
    /// What the next invocation passes on (`{"restore": {"campaign"}}`) to go on from here: a
    /// journal completed before is not read again (`redis::restore::Campaign`). Absent once
    /// complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub campaign: Option<String>,
}

impl BoardRestore {
    pub(super) fn pending(board: &str) -> Self {
        Self {
            board: board.to_owned(),
            status: Status::InProgress,
            replayed: 0,
            applied: 0,
            duplicates: 0,
            refused: 0,
            journal_bytes: 0,
            read_bytes: 0,
            left_bytes: 0,
            refusals: Vec::new(),
            through: None,
            recovery_point: None,
        }
    }

    /// Completed by an earlier call of the same restore (`redis::restore::Campaign`), not read again.
    pub(super) fn done_before(board: &str) -> Self {
        Self { status: Status::Complete, ..Self::pending(board) }
    }

    /// The restore has gone through line `id`.
    pub(super) fn passed(&mut self, id: &str) {
        self.through = Some(id.to_owned());
        self.recovery_point =
            stream_id_ms(id).and_then(DateTime::from_timestamp_millis).map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true));
    }

    pub(super) fn refuse(&mut self, id: &str, why: String) {
        self.refused += 1;
        if self.refusals.len() < LISTED_REFUSALS {
            self.refusals.push(format!("{id}: {why}"));
        }
    }

    pub(super) fn count(&mut self, id: &str, replayed: Replayed) {
        match replayed {
            Replayed::Applied => self.applied += 1,
            Replayed::Duplicate => self.duplicates += 1,
            Replayed::Refused(why) => self.refuse(id, why),
        }
    }
}
