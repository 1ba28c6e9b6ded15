//! Score submissions: validate, then one script call on the board (one round trip; a batch, one
//! per chunk), exactly once per `event_id`.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::config::{Board, BoardKind, Config};
use crate::domain::period::{EventTimeError, EventWindow, Period};
use crate::domain::scores::{ScorePlan, Submission, SubmissionRefusal, plan_submission};
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys, user_shard};
use crate::redis::scripts::CHUNK;
use crate::redis::scripts::scores::{ScoreOutcome, SubmitReply, submit_score, submit_scores};
use crate::redis::settings::ReplicaWait;
use crate::redis::sharded::{self, ShardSet};
use crate::redis::store::{Connection, Store};
use futures::future::try_join_all;

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

    fn score_board(&self, name: &str) -> Result<&Board, ScoreError> {
        self.config
            .board(name)
            .filter(|b| b.kind == BoardKind::Scores)
            .ok_or_else(|| ScoreError::UnknownBoard(crate::domain::ids::loggable(name).into_owned()))
    }

    pub async fn submit(&self, board: &str, submission: &Submission, now: DateTime<Utc>) -> Result<ScoreReceipt, ScoreError> {
        let board = self.score_board(board)?;
        let plan = plan_submission(board, submission, now, &self.window)?;
        let mut conn = self.store.write_connection().await?;
        let wait = self.store.replica_wait().with_replicas(board.wait_replicas);
        self.store.check_layout(&self.keys, board).await?;
        let keys = self.keys.board_of_user(&board.name, board.shards, &submission.user_id);
        let reply = submit_score(&mut conn, &keys, &plan, wait).await?;
        let mut receipts = [receipt(board, submission, reply)];
        self.rank_on_whole_board(board, &[&submission.user_id], &mut receipts).await?;
        let [receipt] = receipts;
        receipt
    }

    /// On a sharded board, turns each receipt's ranks (its shard's) into ranks on the whole
    /// board: one parallel read of every shard per period (docs/scaling.md). `users[i]` sent
    /// `receipts[i]`.
    async fn rank_on_whole_board(
        &self,
        board: &Board,
        users: &[&str],
        receipts: &mut [Result<ScoreReceipt, ScoreError>],
    ) -> Result<(), StoreError> {
        if board.shards <= 1 {
            return Ok(());
        }
        // Per period: (receipt, standing, user, composite) of every standing held.
        type Probe<'u> = (usize, usize, &'u str, f64);
        let mut by_period: Vec<(Period, Vec<Probe<'_>>)> = Vec::new();
        for (r, (user, receipt)) in users.iter().zip(receipts.iter()).enumerate() {
            let Ok(receipt) = receipt else { continue };
            for (s, standing) in receipt.outcome.periods.iter().enumerate() {
                let (Some(composite), Some(kind)) = (standing.composite, board.period_kind(&standing.period)) else { continue };
                // Only its kind and id name its keys.
                let period = Period { kind, id: standing.period_id.clone(), start: None, end: None };
                let probe = (r, s, *user, composite as f64);
                match by_period.iter_mut().find(|(known, _)| *known == period) {
                    Some((_, probes)) => probes.push(probe),
                    None => by_period.push((period, vec![probe])),
                }
            }
        }
        let conn = self.store.write_connection().await?;
        let counted = try_join_all(by_period.iter().map(|(period, probes)| {
            let sets: Vec<ShardSet> = self
                .keys
                .board_shards(&board.name, board.shards)
                .iter()
                .map(|shard| ShardSet { set: shard.period(period), guard: None })
                .collect();
            let probes: Vec<(&str, f64)> = probes.iter().map(|&(_, _, user, composite)| (user, composite)).collect();
            let conn = &conn;
            async move { sharded::counts(conn, &sets, &probes, &[]).await.map(|(before, _)| before) }
        }))
        .await?;
        for ((_, probes), before) in by_period.iter().zip(counted) {
            for (&(r, s, ..), before) in probes.iter().zip(before) {
                if let Ok(receipt) = &mut receipts[r] {
                    receipt.outcome.periods[s].rank = Some(before + 1);
                }
            }
        }
        Ok(())
    }

    /// Up to `MAX_BATCH` submissions to one board: validated together (one invalid refuses
    /// the batch and writes nothing), then applied in their order, one script call per
    /// `CHUNK` (per shard). Each gets its own answer, as `submit` would have given it; on a
    /// sharded board its ranks are as the batch left the board.
    pub async fn submit_batch(
        &self,
        board: &str,
        submissions: &[Submission],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<ScoreReceipt, ScoreError>>, ScoreBatchRefusal> {
        let mut results = self.submit_batch_at(board, submissions, &vec![now; submissions.len()]).await?;
        let board = self.score_board(board).map_err(|error| ScoreBatchRefusal { index: None, error })?;
        let users: Vec<&str> = submissions.iter().map(|s| s.user_id.as_str()).collect();
        if let Err(error) = self.rank_on_whole_board(board, &users, &mut results).await {
            // Applied, but their ranks unknown: answered as the store failing (a retry is a duplicate).
            results.iter_mut().filter(|r| r.is_ok()).for_each(|r| *r = Err(ScoreError::Store(error.clone())));
        }
        Ok(results)
    }

    /// `submit_batch`, submission i applied at `times[i]` (a queue's untimed message: when SQS
    /// took it). Nobody reads a queue's ranks: on a sharded board they are not counted (`None`).
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
        let connected = match self.store.check_layout(&self.keys, board).await {
            Ok(()) => self.store.write_connection().await,
            Err(error) => Err(error),
        };
        let conn = match connected {
            Ok(conn) => conn,
            Err(error) => return Ok(plans.iter().map(|_| Err(error.clone().into())).collect()),
        };
        // Each shard's submissions in the batch's order (a user's all go to one shard, so each
        // user's keep their order), the shards in parallel: one call per shard per chunk.
        let mut shards: Vec<Vec<usize>> = vec![Vec::new(); board.shards as usize];
        for (index, plan) in plans.iter().enumerate() {
            shards[user_shard(&plan.submission.user_id, board.shards) as usize].push(index);
        }
        let applied =
            futures::future::join_all(shards.iter().enumerate().filter(|(_, indexes)| !indexes.is_empty()).map(|(shard, indexes)| {
                let (conn, keys) = (conn.clone(), self.keys.board_shard(&board.name, board.shards, shard as u32));
                let plans: Vec<&ScorePlan<'_>> = indexes.iter().map(|&i| &plans[i]).collect();
                async move {
                    (
                        indexes,
                        apply_in_order(conn, board, &keys, &plans, self.store.replica_wait().with_replicas(board.wait_replicas)).await,
                    )
                }
            }))
            .await;
        let mut results: Vec<Option<Result<ScoreReceipt, ScoreError>>> = (0..plans.len()).map(|_| None).collect();
        for (indexes, answers) in applied {
            for (&index, answer) in indexes.iter().zip(answers) {
                results[index] = Some(answer);
            }
        }
        let mut results: Vec<Result<ScoreReceipt, ScoreError>> =
            results.into_iter().map(|r| r.expect("every submission is answered")).collect();
        if board.shards > 1 {
            // A shard's ranks are not the board's.
            results.iter_mut().flatten().flat_map(|receipt| &mut receipt.outcome.periods).for_each(|standing| standing.rank = None);
        }
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
    board: &Board,
    keys: &BoardKeys,
    plans: &[&ScorePlan<'_>],
    wait: ReplicaWait,
) -> Vec<Result<ScoreReceipt, ScoreError>> {
    let mut results = Vec::with_capacity(plans.len());
    let mut chunks = plans.chunks(CHUNK);
    for chunk in chunks.by_ref() {
        match submit_scores(&mut conn, keys, chunk, wait).await {
            Ok(replies) => results.extend(chunk.iter().zip(replies).map(|(plan, reply)| receipt(board, plan.submission, reply))),
            Err(error) if error.is_programming_error() => {
                for plan in chunk {
                    results.push(match submit_score(&mut conn, keys, plan, wait).await {
                        Ok(reply) => receipt(board, plan.submission, reply),
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

/// A submission's receipt from its script reply, or why it was refused.
fn receipt(board: &Board, submission: &Submission, reply: SubmitReply) -> Result<ScoreReceipt, ScoreError> {
    let (duplicate, outcome) = match reply {
        SubmitReply::New(outcome) => (false, outcome),
        SubmitReply::Duplicate(outcome) => (true, outcome),
        SubmitReply::Conflict => return Err(ScoreError::Conflict(submission.event_id.clone())),
        SubmitReply::OutsideWindow(refusal) => return Err(ScoreError::EventTime(refusal)),
        SubmitReply::OutOfRange => return Err(ScoreError::SumOutOfRange(board.name.clone())),
        SubmitReply::Banned => return Err(ScoreError::Banned(submission.user_id.clone(), board.name.clone())),
        SubmitReply::PeriodClosed(period_id) => return Err(ScoreError::PeriodClosed { board: board.name.clone(), period_id }),
        SubmitReply::RateLimited(retry_after_secs) => return Err(ScoreError::RateLimited { board: board.name.clone(), retry_after_secs }),
        SubmitReply::Deferred => return Err(ScoreError::Store(StoreError::Protocol("submit_score: a deferred submission".into()))),
    };
    Ok(ScoreReceipt { event_id: submission.event_id.clone(), duplicate, board: board.name.clone(), outcome })
}
