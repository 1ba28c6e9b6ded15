//! Score submissions: validate, then one script call on the board (one round trip; a batch, one
//! per chunk), exactly once per `event_id`.

use std::borrow::Cow;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::config::{Board, BoardKind, Config};
use crate::domain::period::{EventTimeError, EventWindow};
use crate::domain::scores::{ScorePlan, Submission, SubmissionRefusal, held_at, plan_submission};
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys, Layout};
use crate::redis::scripts::scores::{ScoreOutcome, SubmitReply, submit_score, submit_scores};
use crate::redis::scripts::{CHUNK, SeatRefusal};
use crate::redis::settings::ReplicaWait;
use crate::redis::store::{Connection, Store};

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
    /// A tournament's seat or attempts (docs/tournaments.md).
    #[error("{}", seat_message(.0))]
    Seat(SeatRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn seat_message(refusal: &SeatRefusal) -> &'static str {
    match refusal {
        SeatRefusal::NotJoined => "join the tournament before submitting a score",
        SeatRefusal::Full => "the tournament is full",
        SeatRefusal::EntryLimit => "this player's attempts in the tournament are used up",
    }
}

/// A batch refused as a whole (nothing written): its board is unknown, or `scores[index]` is
/// invalid.
#[derive(Debug, thiserror::Error)]
pub struct ScoreBatchRefusal {
    pub index: Option<usize>,
    pub error: ScoreError,
}

impl std::fmt::Display for ScoreBatchRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(index) => write!(f, "scores[{index}]: {}", self.error),
            None => self.error.fmt(f),
        }
    }
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

    /// A score board the score routes take: a tournament's takes its scores through the
    /// tournament's route, which checks its window first (docs/tournaments.md).
    fn score_board(&self, name: &str) -> Result<&Board, ScoreError> {
        self.config
            .board(name)
            .filter(|b| b.kind == BoardKind::Scores && b.tournament.is_none())
            .ok_or_else(|| ScoreError::UnknownBoard(crate::domain::ids::loggable(name).into_owned()))
    }

    pub async fn submit(&self, board: &str, submission: &Submission, now: DateTime<Utc>) -> Result<ScoreReceipt, ScoreError> {
        self.submit_to(self.score_board(board)?, submission, now, None).await
    }

    /// `submit` on `board` as given (a tournament's, its window checked by the caller), a first
    /// delivery refused with `refusal` when given (a retry is still answered as a duplicate).
    pub async fn submit_to(
        &self,
        board: &Board,
        submission: &Submission,
        now: DateTime<Utc>,
        refusal: Option<EventTimeError>,
    ) -> Result<ScoreReceipt, ScoreError> {
        plan_submission(board, submission, now, &self.window)?;
        let mut conn = self.store.write_connection().await?;
        let wait = self.store.replica_wait().with_replicas(board.wait_replicas);
        let layout = self.store.written_layout(&self.keys, board).await?;
        // Laid out as the board holds its scores (a move to the configured `max_score` may be due).
        let held = held_at(board, layout.held_scale());
        let mut plan = plan_held(board, &held, submission, now, &self.window)?;
        plan.first_delivery = plan.first_delivery.or(refusal);
        let reply = submit_score(&mut conn, &layout.of_user(&submission.user_id), &plan, wait).await?;
        let mut receipts = [receipt(board, &held, submission, reply)];
        without_shard_ranks(&layout, &mut receipts);
        let [receipt] = receipts;
        receipt
    }

    /// Up to `MAX_BATCH` submissions to one board: validated together (one invalid refuses
    /// the batch and writes nothing), then applied in their order, one script call per
    /// `CHUNK` (per shard). Each gets its own answer, as `submit` would have given it.
    pub async fn submit_batch(
        &self,
        board: &str,
        submissions: &[Submission],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<ScoreReceipt, ScoreError>>, ScoreBatchRefusal> {
        self.submit_batch_at(board, submissions, &vec![now; submissions.len()]).await
    }

    /// `submit_batch`, submission i applied at `times[i]` (a queue's untimed message: when SQS
    /// took it).
    pub async fn submit_batch_at(
        &self,
        board: &str,
        submissions: &[Submission],
        times: &[DateTime<Utc>],
    ) -> Result<Vec<Result<ScoreReceipt, ScoreError>>, ScoreBatchRefusal> {
        let board = self.score_board(board).map_err(|error| ScoreBatchRefusal { index: None, error })?;
        let plans = submissions
            .iter()
            .zip(times)
            .enumerate()
            .map(|(index, (submission, &now))| {
                plan_submission(board, submission, now, &self.window)
                    .map_err(|refusal| ScoreBatchRefusal { index: Some(index), error: refusal.into() })
            })
            .collect::<Result<Vec<_>, _>>()?;
        // The store's policy first: a refused write records nothing, the layout included.
        let connected = match self.store.write_connection().await {
            Ok(conn) => self.store.written_layout(&self.keys, board).await.map(|layout| (conn, layout)),
            Err(error) => Err(error),
        };
        let (conn, layout) = match connected {
            Ok(connected) => connected,
            Err(error) => return Ok(plans.iter().map(|_| Err(error.clone().into())).collect()),
        };
        // Laid out as the board holds its scores: one that does not fit that scale waits.
        let held = held_at(board, layout.held_scale());
        let mut results: Vec<Option<Result<ScoreReceipt, ScoreError>>> = (0..plans.len()).map(|_| None).collect();
        let plans: Vec<(usize, ScorePlan<'_>)> = match &held {
            Cow::Borrowed(_) => plans.into_iter().enumerate().collect(),
            Cow::Owned(_) => {
                let mut fitting = Vec::with_capacity(plans.len());
                for (index, plan) in plans.into_iter().enumerate() {
                    match plan_held(board, &held, plan.submission, plan.now, &self.window) {
                        Ok(held) => fitting.push((index, held)),
                        Err(error) => results[index] = Some(Err(error)),
                    }
                }
                fitting
            }
        };
        // Each shard's submissions in the batch's order (a user's all go to one shard, so each
        // user's keep their order), the shards in parallel: one call per shard per chunk.
        let shards = layout.by_shard(plans.iter().map(|(index, plan)| (*index, plan)), |(_, plan)| plan.submission.user_id.as_str());
        let applied = futures::future::join_all(shards.into_iter().map(|(shard, mine)| {
            let (conn, keys) = (conn.clone(), layout.shard(shard));
            let (indexes, plans): (Vec<usize>, Vec<&ScorePlan<'_>>) = mine.into_iter().unzip();
            let (board, held) = (board, &*held);
            async move {
                let wait = self.store.replica_wait().with_replicas(board.wait_replicas);
                (indexes, apply_in_order(conn, (board, held), &keys, &plans, wait).await)
            }
        }))
        .await;
        for (indexes, answers) in applied {
            for (&index, answer) in indexes.iter().zip(answers) {
                results[index] = Some(answer);
            }
        }
        let mut results: Vec<Result<ScoreReceipt, ScoreError>> =
            results.into_iter().map(|r| r.expect("every submission is answered")).collect();
        without_shard_ranks(&layout, &mut results);
        Ok(results)
    }
}

/// Applies one board's (or shard's) submissions in their order, a chunk a call. After a chunk
/// fails for a reason that passes none is tried: a retry of the batch must not be overtaken
/// by later chunks already applied. A submission Redis cannot apply (a key of another type)
/// stopped its chunk where it stood, after the ones before it applied: the chunk is sent
/// again one by one, so those answer as the duplicates they are, only it fails, and the rest
/// goes on.
async fn apply_in_order(
    mut conn: Connection,
    (board, held): (&Board, &Board),
    keys: &BoardKeys,
    plans: &[&ScorePlan<'_>],
    wait: ReplicaWait,
) -> Vec<Result<ScoreReceipt, ScoreError>> {
    let mut results = Vec::with_capacity(plans.len());
    let mut chunks = plans.chunks(CHUNK);
    for chunk in chunks.by_ref() {
        match submit_scores(&mut conn, keys, chunk, wait).await {
            Ok(replies) => results.extend(chunk.iter().zip(replies).map(|(plan, reply)| receipt(board, held, plan.submission, reply))),
            // A submission Redis cannot apply, or one that found the board's data lost and
            // fenced it, stopped the chunk after those before it applied: each sent again alone
            // answers as the duplicate it is (the ones after, refused by the fence).
            Err(error) if error.is_programming_error() || error.is_loss_found() => {
                for plan in chunk {
                    results.push(match submit_score(&mut conn, keys, plan, wait).await {
                        Ok(reply) => receipt(board, held, plan.submission, reply),
                        Err(error) => Err(ScoreError::Store(error)),
                    });
                }
            }
            Err(error) => {
                results.extend(chunk.iter().map(|_| Err(ScoreError::Store(error.clone()))));
                results.extend(chunks.flatten().map(|_| Err(ScoreError::Store(error.clone()))));
                break;
            }
        }
    }
    results
}

/// On a sharded board a write answers no rank (`null`): its script knows the rank in its shard
/// only, and counting the others would cost a round trip to every shard on every write
/// (docs/scaling.md#what-a-write-answers). Reads give the exact rank.
fn without_shard_ranks(layout: &Layout, receipts: &mut [Result<ScoreReceipt, ScoreError>]) {
    if layout.is_sharded() {
        receipts.iter_mut().flatten().flat_map(|receipt| &mut receipt.outcome.periods).for_each(|standing| standing.rank = None);
    }
}

/// `submission` planned on `held` (`board` as its scores are held, `scores::held_at`): one
/// within `board`'s `max_score` but above the held one waits for the move that re-encodes the
/// board (503 `board_scale_changed`), nothing written.
fn plan_held<'a>(
    board: &Board,
    held: &'a Board,
    submission: &'a Submission,
    now: DateTime<Utc>,
    window: &EventWindow,
) -> Result<ScorePlan<'a>, ScoreError> {
    plan_submission(held, submission, now, window).map_err(|refusal| match refusal {
        SubmissionRefusal::OutOfRange(_) if !std::ptr::eq(board, held) => ScoreError::Store(StoreError::rescaled(board, held)),
        refusal => refusal.into(),
    })
}

/// A submission's receipt from its script reply, or why it was refused. `held`: `board` as
/// its scores are held (the composites' scale; a sum that leaves it fits the configured one
/// only after the move).
fn receipt(board: &Board, held: &Board, submission: &Submission, reply: SubmitReply) -> Result<ScoreReceipt, ScoreError> {
    let (duplicate, outcome) = match reply {
        SubmitReply::New(outcome) => (false, outcome),
        SubmitReply::Duplicate(outcome) => (true, outcome),
        SubmitReply::Conflict => return Err(ScoreError::Conflict(submission.event_id.clone())),
        SubmitReply::OutsideWindow(refusal) => return Err(ScoreError::EventTime(refusal)),
        SubmitReply::OutOfRange if !std::ptr::eq(board, held) => return Err(ScoreError::Store(StoreError::rescaled(board, held))),
        SubmitReply::OutOfRange => return Err(ScoreError::SumOutOfRange(board.name.clone())),
        SubmitReply::Banned => return Err(ScoreError::Banned(submission.user_id.clone(), board.name.clone())),
        SubmitReply::PeriodClosed(period_id) => return Err(ScoreError::PeriodClosed { board: board.name.clone(), period_id }),
        SubmitReply::RateLimited(retry_after_secs) => return Err(ScoreError::RateLimited { board: board.name.clone(), retry_after_secs }),
        SubmitReply::Deferred => return Err(ScoreError::Store(StoreError::Protocol("submit_score: a deferred submission".into()))),
        SubmitReply::Seat(refusal) => return Err(ScoreError::Seat(refusal)),
    };
    Ok(ScoreReceipt { event_id: submission.event_id.clone(), duplicate, board: board.name.clone(), outcome })
}
