//! Score submissions: validate, then one script call on the board (one round trip), exactly
//! once per `event_id`.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::config::{BoardKind, Config};
use crate::domain::period::{EventTimeError, EventWindow};
use crate::domain::scores::{Submission, SubmissionRefusal, plan_submission};
use crate::redis::error::StoreError;
use crate::redis::keys::Keys;
use crate::redis::scripts::scores::{ScoreOutcome, SubmitReply, submit_score};
use crate::redis::store::Store;

#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    #[error("no score board is named {0:?}")]
    UnknownBoard(String),
    #[error(transparent)]
    Refused(#[from] SubmissionRefusal),
    #[error(transparent)]
    EventTime(EventTimeError),
    #[error("event {0:?} was already recorded with a different payload")]
    Conflict(String),
    #[error("the kept score on board {0:?} would leave the supported range")]
    SumOutOfRange(String),
    #[error("user {0:?} is banned from board {1:?}")]
    Banned(String, String),
    #[error("period {period_id} of board {board:?} is closed for archiving")]
    PeriodClosed { board: String, period_id: String },
    #[error("too many score submissions for this user on board {board:?}; retry in {retry_after_secs} s")]
    RateLimited { board: String, retry_after_secs: u64 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The answer to a submission; a retry gets the same decision with `duplicate: true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScoreReceipt {
    pub event_id: String,
    pub duplicate: bool,
    pub board: String,
    #[serde(flatten)]
    pub outcome: ScoreOutcome,
}

#[derive(Clone)]
pub struct Scores {
    config: Arc<Config>,
    keys: Keys,
    store: Store,
    window: EventWindow,
}

impl Scores {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store) -> Self {
        Self { config, keys, store, window: EventWindow::default() }
    }

    pub async fn submit(&self, board: &str, submission: &Submission, now: DateTime<Utc>) -> Result<ScoreReceipt, ScoreError> {
        let board = self
            .config
            .board(board)
            .filter(|b| b.kind == BoardKind::Scores)
            .ok_or_else(|| ScoreError::UnknownBoard(crate::domain::ids::loggable(board).into_owned()))?;
        let plan = plan_submission(board, submission, now, &self.window)?;
        let mut conn = self.store.write_connection().await?;
        let wait = self.store.replica_wait().with_replicas(board.wait_replicas);
        let keys = self.keys.board(&board.name);
        let reply = submit_score(&mut conn, &keys, &plan, now, wait).await?;
        let (duplicate, outcome) = match reply {
            SubmitReply::New(outcome) => (false, outcome),
            SubmitReply::Duplicate(outcome) => (true, outcome),
            SubmitReply::Conflict => return Err(ScoreError::Conflict(submission.event_id.clone())),
            SubmitReply::OutsideWindow(refusal) => return Err(ScoreError::EventTime(refusal)),
            SubmitReply::OutOfRange => return Err(ScoreError::SumOutOfRange(board.name.clone())),
            SubmitReply::Banned => return Err(ScoreError::Banned(submission.user_id.clone(), board.name.clone())),
            SubmitReply::PeriodClosed(period_id) => return Err(ScoreError::PeriodClosed { board: board.name.clone(), period_id }),
            SubmitReply::RateLimited(retry_after_secs) => {
                return Err(ScoreError::RateLimited { board: board.name.clone(), retry_after_secs });
            }
        };
        Ok(ScoreReceipt { event_id: submission.event_id.clone(), duplicate, board: board.name.clone(), outcome })
    }
}
