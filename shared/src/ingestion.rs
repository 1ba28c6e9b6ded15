//! The write path: validate an event, fan it out to every board that scores its action, and
//! apply each board's share with one script call (one round trip per board, all boards
//! concurrently).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::future::join_all;
use serde::Serialize;

use crate::config::Config;
use crate::keys::Keys;
use crate::period::EventWindow;
use crate::scoring::{plan_event, Event, EventPlan, Refusal};
use crate::scripts::{self, ApplyReply, BoardOutcome};
use crate::store::{Store, StoreError};

/// Largest `POST /v1/events:batch`.
pub const MAX_BATCH: usize = 500;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("event {0:?} was already recorded with a different payload")]
    Conflict(String),
    #[error("the new score on board {0:?} would exceed the supported range")]
    ScoreOutOfRange(String),
    #[error("user {0:?} is banned from board {1:?}")]
    Banned(String, String),
    #[error("period {period_id} of board {board:?} is closed for archiving")]
    PeriodClosed { board: String, period_id: String },
    #[error("too many {action:?} events for this user on board {board:?}; retry in {retry_after_secs} s")]
    RateLimited { board: String, action: String, retry_after_secs: u64 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A batch refused as a whole because one of its events is invalid.
#[derive(Debug, thiserror::Error)]
#[error("events[{index}]: {refusal}")]
pub struct BatchRefusal {
    pub index: usize,
    pub refusal: Refusal,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BoardResult {
    pub board: String,
    #[serde(flatten)]
    pub outcome: BoardOutcome,
}

/// The answer to an event. A duplicate delivery gets the same `results` with
/// `duplicate: true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventReceipt {
    pub event_id: String,
    pub duplicate: bool,
    pub results: Vec<BoardResult>,
}

#[derive(Clone)]
pub struct Ingestor {
    config: Arc<Config>,
    keys: Keys,
    store: Store,
    window: EventWindow,
}

impl Ingestor {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store) -> Self {
        Self { config, keys, store, window: EventWindow::default() }
    }

    pub async fn record(&self, event: &Event, now: DateTime<Utc>) -> Result<EventReceipt, IngestError> {
        let plan = plan_event(&self.config, event, now, &self.window)?;
        self.apply(event, &plan).await
    }

    /// Validates every event first: one invalid event refuses the batch and nothing is
    /// written. Valid batches are applied concurrently on the shared connection (pipelined);
    /// each event gets its own result, in order.
    pub async fn record_batch(
        &self,
        events: &[Event],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<EventReceipt, IngestError>>, BatchRefusal> {
        let plans = events
            .iter()
            .enumerate()
            .map(|(index, event)| {
                plan_event(&self.config, event, now, &self.window).map_err(|refusal| BatchRefusal { index, refusal })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(join_all(events.iter().zip(&plans).map(|(event, plan)| self.apply(event, plan))).await)
    }

    async fn apply(&self, event: &Event, plan: &EventPlan<'_>) -> Result<EventReceipt, IngestError> {
        let conn = self.store.connection().await?;
        let replies = join_all(plan.boards.iter().map(|board_plan| {
            let mut conn = conn.clone();
            let keys = self.keys.board(&board_plan.board.name);
            let wait = self.store.replica_wait().with_replicas(board_plan.board.wait_replicas);
            async move {
                scripts::apply_event(&mut conn, &keys, board_plan, &event.event_id, &event.user_id, &plan.fingerprint, wait)
                    .await
            }
        }))
        .await;

        let mut duplicate = true;
        let mut results = Vec::with_capacity(replies.len());
        for (board_plan, reply) in plan.boards.iter().zip(replies) {
            let outcome = match reply? {
                ApplyReply::New(outcome) => {
                    duplicate = false;
                    outcome
                }
                ApplyReply::Duplicate(outcome) => outcome,
                ApplyReply::Conflict => return Err(IngestError::Conflict(event.event_id.clone())),
                ApplyReply::OutOfRange => return Err(IngestError::ScoreOutOfRange(board_plan.board.name.clone())),
                ApplyReply::Banned => return Err(IngestError::Banned(event.user_id.clone(), board_plan.board.name.clone())),
                ApplyReply::PeriodClosed(period_id) => {
                    return Err(IngestError::PeriodClosed { board: board_plan.board.name.clone(), period_id });
                }
                ApplyReply::RateLimited(retry_after_secs) => {
                    return Err(IngestError::RateLimited {
                        board: board_plan.board.name.clone(),
                        action: board_plan.rule.action.clone(),
                        retry_after_secs,
                    });
                }
            };
            results.push(BoardResult { board: board_plan.board.name.clone(), outcome });
        }
        Ok(EventReceipt { event_id: event.event_id.clone(), duplicate, results })
    }
}
