//! The write path: validate an event, fan it out to every board that scores its action, and
//! apply each board's share with one script call (one round trip per board, all boards
//! concurrently; a batch sends one call per board per chunk of its events).
//!
//! Boards live in different hash slots, so one event cannot be applied to all of them
//! atomically. The answer is therefore per board: when every board refuses, the event is
//! refused with the first board's error and nothing was written anywhere; when at least one
//! board applied it (now or earlier), the answer is a 200 whose `results` say, board by board,
//! what happened (`applied: false` and the refusal's code as `reason` for a refusing board).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::future::join_all;
use serde::Serialize;

use crate::domain::config::{Board, Config};
use crate::domain::journal::{Entry, Stamp};
use crate::domain::period::EventWindow;
use crate::domain::scoring::{BoardPlan, Event, EventPlan, Refusal, plan_event};
use crate::redis::error::StoreError;
use crate::redis::keys::Keys;
use crate::redis::scripts::{self, ApplyReply, BoardEvent, BoardOutcome, CHUNK};
use crate::redis::store::Store;

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
    /// Only for deliveries that ask for it (`record_batch_with`): a take-back whose give has
    /// not arrived yet on board `0`; nothing written, so a redelivery is a first delivery.
    #[error("the take-back found nothing to take back on board {0:?} yet; its give may still be on its way")]
    TakeBackDeferred(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl IngestError {
    /// The error code clients see, in an error body or as a refusing board's `reason`.
    pub fn code(&self) -> &'static str {
        match self {
            IngestError::Refused(refusal) => refusal.code(),
            IngestError::Conflict(_) => "idempotency_conflict",
            IngestError::ScoreOutOfRange(_) => "out_of_range",
            IngestError::Banned(..) => "user_banned",
            IngestError::PeriodClosed { .. } => "period_closed",
            IngestError::RateLimited { .. } => "rate_limited",
            IngestError::TakeBackDeferred(_) => "take_back_deferred",
            IngestError::Store(store) if store.is_ended() => "board_ended",
            IngestError::Store(_) => "store_unavailable",
        }
    }

    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            IngestError::RateLimited { retry_after_secs, .. } => Some(*retry_after_secs),
            _ => None,
        }
    }
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
    /// Set when this board refused the event (then `outcome.reason` holds its code).
    #[serde(skip)]
    pub refused: bool,
}

impl BoardResult {
    fn refused(board: &str, error: &IngestError) -> Self {
        let outcome = BoardOutcome {
            applied: false,
            delta: 0,
            reason: Some(error.code().to_owned()),
            capped: 0,
            periods: Vec::new(),
            retry_after: error.retry_after_secs(),
        };
        Self { board: board.to_owned(), outcome, refused: true }
    }
}

/// The answer to an event. A duplicate delivery gets the same `results` with
/// `duplicate: true` (every board that took the event answered from its marker).
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
        self.apply(&[(event, plan)], &[false], &[now]).await.pop().expect("one answer per event")
    }

    /// Validates every event first: one invalid event refuses the batch and nothing is
    /// written. A valid batch is applied with one script call per board per `CHUNK` of its
    /// events, all concurrently on the shared connection; each event gets its own result, in
    /// order.
    pub async fn record_batch(&self, events: &[Event], now: DateTime<Utc>) -> Result<Vec<Result<EventReceipt, IngestError>>, BatchRefusal> {
        self.record_batch_with(events, &vec![false; events.len()], &vec![now; events.len()]).await
    }

    /// `record_batch`, where `defer[i]` makes event i's take-backs that find nothing to take
    /// back answer `TakeBackDeferred` and write nothing (a queue's delivery, which may overtake
    /// its give's, asks for it until it has waited long enough), and event i happens at
    /// `times[i]` (a queue's untimed message: when SQS took it).
    pub async fn record_batch_with(
        &self,
        events: &[Event],
        defer: &[bool],
        times: &[DateTime<Utc>],
    ) -> Result<Vec<Result<EventReceipt, IngestError>>, BatchRefusal> {
        let planned = events
            .iter()
            .zip(times)
            .enumerate()
            .map(|(index, (event, &now))| {
                plan_event(&self.config, event, now, &self.window)
                    .map(|plan| (event, plan))
                    .map_err(|refusal| BatchRefusal { index, refusal })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.apply(&planned, defer, times).await)
    }

    /// A restore's replay of `event` as `board`'s journal has it: planned and applied at `at`,
    /// the time it was first applied, on that board only (each board journals its own share).
    pub async fn replay(&self, board: &str, event: &Event, at: DateTime<Utc>) -> Result<EventReceipt, IngestError> {
        let mut plan = plan_event(&self.config, event, at, &self.window)?;
        plan.boards.retain(|share| share.board.name == board);
        if plan.boards.is_empty() {
            return Err(Refusal::UnknownAction(event.action.clone()).into());
        }
        self.apply(&[(event, plan)], &[false], &[at]).await.pop().expect("one answer per event")
    }

    /// Applies `events`, event i at `times[i]`.
    async fn apply(
        &self,
        events: &[(&Event, EventPlan<'_>)],
        defer: &[bool],
        times: &[DateTime<Utc>],
    ) -> Vec<Result<EventReceipt, IngestError>> {
        let conn = match self.store.write_connection().await {
            Ok(conn) => conn,
            Err(error) => return events.iter().map(|_| Err(error.clone().into())).collect(),
        };
        // Where each board written takes writes: the layout its data is in, whatever the
        // configuration says while a move goes on (docs/scaling.md#changing-shards); probed once
        // per container every 30 s.
        let mut boards: Vec<&Board> = Vec::new();
        for board_plan in events.iter().flat_map(|(_, plan)| &plan.boards).filter(|p| p.refused.is_none()) {
            if !boards.iter().any(|board| board.name == board_plan.board.name) {
                boards.push(board_plan.board);
            }
        }
        let layouts = join_all(boards.iter().map(|board| self.store.write_layout(&self.keys, board))).await;
        let layout_of =
            |board: &Board| &layouts[boards.iter().position(|b| b.name == board.name).expect("every board written has a layout")];
        // Each board's shares, by the shard of the event's user (docs/scaling.md: 0 on a board
        // of one slot), in event order: (event, board plan) indexes.
        let mut shares: Vec<Share<'_>> = Vec::new();
        for (e, (event, plan)) in events.iter().enumerate() {
            for (b, board_plan) in plan.boards.iter().enumerate().filter(|(_, p)| p.refused.is_none()) {
                let board = board_plan.board;
                let shard = layout_of(board).as_ref().map_or(0, |layout| layout.shard_of(&event.user_id));
                match shares.iter_mut().find(|(other, s, _)| other.name == board.name && *s == shard) {
                    Some((_, _, list)) => list.push((e, b)),
                    None => shares.push((board, shard, vec![(e, b)])),
                }
            }
        }
        let entries: Vec<String> = events
            .iter()
            .zip(times)
            .map(|((event, _), &at)| if self.keys.journal_on() { Entry::Event { at: Stamp(at), event }.json() } else { String::new() })
            .collect();
        let entries = &entries;
        let calls = shares.iter().flat_map(|(board, shard, list)| list.chunks(CHUNK).map(move |chunk| (*board, *shard, chunk)));
        let answers = join_all(calls.map(|(board, shard, chunk)| {
            let mut conn = conn.clone();
            async move {
                let items: Vec<BoardEvent<'_>> = chunk
                    .iter()
                    .map(|&(e, b)| {
                        let (event, plan) = &events[e];
                        BoardEvent {
                            plan: &plan.boards[b],
                            first_delivery: plan.first_delivery,
                            event_id: &event.event_id,
                            member: &event.user_id,
                            fingerprint: &plan.fingerprint,
                            timed: event.occurred_at.is_some(),
                            defer_orphan_take_back: defer.get(e).copied().unwrap_or(false),
                            journal_entry: &entries[e],
                            now: times[e],
                        }
                    })
                    .collect();
                let wait = self.store.replica_wait().with_replicas(board.wait_replicas);
                let (keys, sharded) = match layout_of(board) {
                    Ok(layout) => (layout.shard(shard), layout.is_sharded()),
                    Err(error) => return (chunk, items.iter().map(|_| Err(error.clone())).collect()),
                };
                let mut answers: Vec<Result<ApplyReply, StoreError>> =
                    match scripts::apply_events(&mut conn, &keys, &items, wait).await {
                        Ok(replies) => replies.into_iter().map(Ok).collect(),
                        // An event Redis cannot apply (a key of another type), or one that found the
                        // board's data lost and fenced it (not a board fenced before the call: nothing
                        // of the chunk applied), stopped the chunk where it stood, after the ones
                        // before it applied: each is sent again alone, so those answer as the
                        // duplicates they are and only it (and those after it) fails.
                        Err(error) if (error.is_programming_error() || error.is_loss_found()) && items.len() > 1 => {
                            let mut each = Vec::with_capacity(items.len());
                            for item in &items {
                                let reply = scripts::apply_events(&mut conn, &keys, std::slice::from_ref(item), wait).await;
                                each.push(reply.and_then(|mut replies| {
                                    replies.pop().ok_or_else(|| StoreError::Protocol("apply_event: no reply".into()))
                                }));
                            }
                            each
                        }
                        Err(error) => items.iter().map(|_| Err(error.clone())).collect(),
                    };
                if sharded {
                    answers.iter_mut().flatten().for_each(without_shard_rank);
                }
                (chunk, answers)
            }
        }))
        .await;

        let mut replies: Vec<Vec<Option<Result<ApplyReply, StoreError>>>> =
            events.iter().map(|(_, plan)| plan.boards.iter().map(|_| None).collect()).collect();
        for (chunk, answers) in answers {
            chunk.iter().zip(answers).for_each(|(&(e, b), reply)| replies[e][b] = Some(reply));
        }
        events.iter().zip(replies).map(|((event, plan), replies)| receipt(event, plan, replies)).collect()
    }
}

/// On a board whose data is sharded (the layout written to, which a move makes differ from the
/// configuration) the script knows the rank in its shard only: the write answers none
/// (docs/scaling.md#what-a-write-answers); reads give the exact rank.
fn without_shard_rank(reply: &mut ApplyReply) {
    if let ApplyReply::New(outcome) | ApplyReply::Duplicate(outcome) = reply {
        outcome.periods.iter_mut().for_each(|standing| standing.rank = None);
    }
}

/// A board's shard and the (event, board plan) indexes of the events it takes there.
type Share<'a> = (&'a Board, usize, Vec<(usize, usize)>);

/// The answer to one event from its boards' replies (`None`: refused by its plan, unsent).
fn receipt(event: &Event, plan: &EventPlan<'_>, replies: Vec<Option<Result<ApplyReply, StoreError>>>) -> Result<EventReceipt, IngestError> {
    let mut duplicate = true;
    let mut first_refusal = None;
    let mut results = Vec::with_capacity(replies.len());
    for (board_plan, reply) in plan.boards.iter().zip(replies) {
        let board = &board_plan.board.name;
        let answer = match (reply, &board_plan.refused) {
            // A runtime board deleted since this function read its catalog: that board only
            // refuses (docs/runtime-boards.md#deleting); the others keep what they applied.
            (Some(Err(error)), _) if error.is_ended() => Err(IngestError::Store(error)),
            (Some(reply), _) => board_reply(event, board_plan, reply?),
            (None, Some(refusal)) => Err(IngestError::Refused(refusal.clone())),
            (None, None) => unreachable!("every board without a refusal is sent"),
        };
        match answer {
            Ok((seen, outcome)) => {
                duplicate &= seen;
                results.push(BoardResult { board: board.clone(), outcome, refused: false });
            }
            Err(error) => {
                results.push(BoardResult::refused(board, &error));
                first_refusal.get_or_insert(error);
            }
        }
    }
    match first_refusal {
        // No board took the event, so none wrote anything: refused as a whole.
        Some(error) if results.iter().all(|r| r.refused) => Err(error),
        _ => Ok(EventReceipt { event_id: event.event_id.clone(), duplicate, results }),
    }
}

/// One board's script reply: `(duplicate, outcome)` when the board holds the event (now or
/// from an earlier delivery), or why it refused it (nothing written on that board).
fn board_reply(event: &Event, board_plan: &BoardPlan<'_>, reply: ApplyReply) -> Result<(bool, BoardOutcome), IngestError> {
    let board = || board_plan.board.name.clone();
    match reply {
        ApplyReply::New(outcome) => Ok((false, outcome)),
        ApplyReply::Duplicate(outcome) => Ok((true, outcome)),
        ApplyReply::Conflict => Err(IngestError::Conflict(event.event_id.clone())),
        ApplyReply::OutsideWindow(refusal) => Err(IngestError::Refused(Refusal::EventTime(refusal))),
        ApplyReply::OutOfRange => Err(IngestError::ScoreOutOfRange(board())),
        ApplyReply::Banned => Err(IngestError::Banned(event.user_id.clone(), board())),
        ApplyReply::PeriodClosed(period_id) => Err(IngestError::PeriodClosed { board: board(), period_id }),
        ApplyReply::Deferred => Err(IngestError::TakeBackDeferred(board())),
        ApplyReply::Seat(_) => Err(IngestError::Store(StoreError::Protocol("apply_event: a tournament's refusal".into()))),
        ApplyReply::RateLimited(retry_after_secs) => {
            Err(IngestError::RateLimited { board: board(), action: board_plan.rule.action.clone(), retry_after_secs })
        }
    }
}
