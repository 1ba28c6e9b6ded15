//! Daily sign-ins: one bit per day per user per month, the consecutive-day streak, and the
//! sign-in points plus streak bonuses on the board with a `sign_in` section, applied together
//! in one script call. The rules are `domain::sign_in`; this service runs them on Redis.

use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use crate::domain::config::{Board, Config};
use crate::domain::ids::{self, IdError};
use crate::domain::journal::{Entry, Stamp};
use crate::domain::period::{EventWindow, Period, PeriodKind, first_of_month, month_id, previous_month};
use crate::domain::scoring::fingerprint;
use crate::domain::sign_in::{Calendar, DateRefusal, MonthBitmap, SignInPlan, SignInRequest, accepted_date, read_calendar};
use crate::domain::tiebreak::{self, RangeError};
use crate::redis::error::StoreError;
use crate::redis::keys::{Keys, Layout};
use crate::redis::scripts::CHUNK;
use crate::redis::scripts::GuardRefusal;
use crate::redis::scripts::sign_in::{self as script, SignInOutcome, SignInReply};
use crate::redis::store::Store;

/// The answer to a sign-in; a duplicate delivery gets the first answer with `duplicate: true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SignInReceipt {
    pub event_id: String,
    pub duplicate: bool,
    pub date: NaiveDate,
    #[serde(flatten)]
    pub outcome: SignInOutcome,
}

#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("no board takes sign-ins")]
    NotConfigured,
    #[error(transparent)]
    InvalidId(#[from] IdError),
    #[error("month must be YYYY-MM, not {0:?}")]
    BadMonth(String),
    #[error(transparent)]
    Date(#[from] DateRefusal),
    #[error(transparent)]
    OutOfRange(#[from] RangeError),
    #[error("the new score on board {0:?} would exceed the supported range")]
    ScoreOutOfRange(String),
    #[error("event {0:?} was already recorded with a different payload")]
    Conflict(String),
    #[error(transparent)]
    Guard(#[from] GuardRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub fn plan_sign_in<'a>(
    config: &'a Config,
    request: &SignInRequest,
    now: DateTime<Utc>,
    window: &EventWindow,
) -> Result<SignInPlan<'a>, SignInError> {
    ids::validate_id("event_id", &request.event_id)?;
    ids::validate_id("user_id", &request.user_id)?;
    let board = config.sign_in_board().ok_or(SignInError::NotConfigured)?;
    let sign_in = board.sign_in.as_ref().ok_or(SignInError::NotConfigured)?;
    let (date, first_delivery) = match accepted_date(request.date, now, board.timezone, window.grace) {
        Ok(date) => (date, None),
        Err(refusal) => (now.with_timezone(&board.timezone).date_naive(), Some(refusal)),
    };
    let next_day = date.succ_opt().ok_or(SignInError::OutOfRange(RangeError::Time))?;
    let periods_of = |day: NaiveDate| board.periods.iter().map(|&kind| Period::on_date(kind, day, board.timezone)).collect();
    Ok(SignInPlan {
        board,
        sign_in,
        event_id: request.event_id.clone(),
        user_id: request.user_id.clone(),
        fingerprint: fingerprint(request),
        date,
        first_delivery,
        periods: periods_of(date),
        next_day_periods: periods_of(next_day),
        bitmap_ttl_secs: Period::on_date(PeriodKind::Month, date, board.timezone).ttl_secs(now),
        journal_entry: String::new(),
        now,
        time_part: tiebreak::time_part(now)?,
    })
}

/// `YYYY-MM` → the month's first day.
pub fn parse_month(text: &str) -> Result<NaiveDate, SignInError> {
    crate::domain::period::parse_month(text).map_err(|_| SignInError::BadMonth(text.to_owned()))
}

/// The sign-in service, shared by `ingest` (sign in) and `query` (calendar).
#[derive(Clone)]
pub struct SignIns {
    config: Arc<Config>,
    keys: Keys,
    store: Store,
    window: EventWindow,
}

impl SignIns {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store) -> Self {
        Self { config, keys, store, window: EventWindow::default() }
    }

    pub async fn record(&self, request: &SignInRequest, now: DateTime<Utc>) -> Result<SignInReceipt, SignInError> {
        let mut plan = self.plan(request, now)?;
        let layout = self.write_layout(plan.board).await?;
        let reply = self.sign_in_alone(&layout, &plan).await?;
        receipt(request, &mut plan, reply)
    }

    /// Every sign-in of `requests`, in order, one script call per `CHUNK` (a queue's batch):
    /// each answered as `record` would answer it alone. A store failure answers every
    /// sign-in of its chunk.
    pub async fn record_batch(&self, requests: &[SignInRequest], now: DateTime<Utc>) -> Vec<Result<SignInReceipt, SignInError>> {
        self.record_batch_at(requests, &vec![now; requests.len()]).await
    }

    /// `record_batch`, sign-in i recorded at `times[i]` (a queue's message without `date`: when
    /// SQS took it, so one sent before midnight counts for its day).
    pub async fn record_batch_at(&self, requests: &[SignInRequest], times: &[DateTime<Utc>]) -> Vec<Result<SignInReceipt, SignInError>> {
        let mut answers: Vec<Option<Result<SignInReceipt, SignInError>>> = requests.iter().map(|_| None).collect();
        let mut planned: Vec<(usize, SignInPlan<'_>)> = Vec::new();
        for (i, (request, &now)) in requests.iter().zip(times).enumerate() {
            match self.plan(request, now) {
                Ok(plan) => planned.push((i, plan)),
                Err(error) => answers[i] = Some(Err(error)),
            }
        }
        // Every plan is of the one sign-in board.
        let layout = match planned.first() {
            Some((_, plan)) => self.write_layout(plan.board).await,
            None => return answers.into_iter().map(|answer| answer.expect("every sign-in is answered")).collect(),
        };
        let layout = match layout {
            Ok(layout) => layout,
            Err(error) => {
                for (i, _) in planned {
                    answers[i] = Some(Err(error.clone().into()));
                }
                return answers.into_iter().map(|answer| answer.expect("every sign-in is answered")).collect();
            }
        };
        // By the shard of each user (docs/scaling.md; one on a board of one slot), in order.
        let mut shards: Vec<(Vec<usize>, Vec<SignInPlan<'_>>)> = layout
            .by_shard(planned, |(_, plan)| plan.user_id.as_str())
            .into_iter()
            .map(|(_, planned)| planned.into_iter().unzip())
            .collect();
        for (chunk, at) in shards.iter_mut().flat_map(|(indices, plans)| plans.chunks_mut(CHUNK).zip(indices.chunks(CHUNK))) {
            let replies = self.sign_in_chunk(&layout, chunk).await;
            for (k, (plan, &i)) in chunk.iter_mut().zip(at).enumerate() {
                let reply = match &replies {
                    Ok(replies) => Ok(replies[k].clone()),
                    // One sign-in Redis cannot apply (a key of the wrong type), or one that found
                    // the board's data lost and fenced it, stopped the call where it stood, after
                    // the ones before it applied: each is sent again alone, so those answer as
                    // the duplicates they are and only it fails (a sign-in's day bit is its first
                    // write: one stopped half-way is not counted twice, it reads as already signed).
                    Err(error) if error.is_programming_error() || error.is_loss_found() => self.sign_in_alone(&layout, plan).await,
                    Err(error) => Err(error.clone()),
                };
                answers[i] = Some(reply.map_err(SignInError::from).and_then(|reply| receipt(&requests[i], plan, reply)));
            }
        }
        answers.into_iter().map(|answer| answer.expect("every sign-in is answered")).collect()
    }

    /// Where the sign-in board takes writes: the store's policy first (a refused write records
    /// nothing, the layout included).
    async fn write_layout(&self, board: &Board) -> Result<Layout, StoreError> {
        self.store.write_connection().await?;
        self.store.write_layout(&self.keys, board).await
    }

    /// One script call for `plans` (all of the sign-in board, all of one shard of `layout`),
    /// with the board's replica wait.
    async fn sign_in_chunk(&self, layout: &Layout, plans: &[SignInPlan<'_>]) -> Result<Vec<SignInReply>, StoreError> {
        let board = plans[0].board;
        let mut conn = self.store.write_connection().await?;
        let wait = self.store.replica_wait().with_replicas(board.wait_replicas);
        script::sign_in_chunk(&mut conn, &layout.of_user(&plans[0].user_id), plans, wait).await
    }

    async fn sign_in_alone(&self, layout: &Layout, plan: &SignInPlan<'_>) -> Result<SignInReply, StoreError> {
        let mut replies = self.sign_in_chunk(layout, std::slice::from_ref(plan)).await?;
        replies.pop().ok_or_else(|| StoreError::Protocol("sign_in: no reply".into()))
    }

    fn plan<'a>(&'a self, request: &'a SignInRequest, now: DateTime<Utc>) -> Result<SignInPlan<'a>, SignInError> {
        let mut plan = plan_sign_in(&self.config, request, now, &self.window)?;
        if self.keys.journal_on() {
            plan.journal_entry = Entry::SignIn { at: Stamp(now), request }.json();
        }
        Ok(plan)
    }

    /// A user's sign-ins in `month` (`YYYY-MM`, default: the current month in the board's
    /// timezone), read with one round trip.
    pub async fn calendar(&self, user_id: &str, month: Option<&str>, now: DateTime<Utc>) -> Result<Calendar, SignInError> {
        ids::validate_id("user_id", user_id)?;
        let board = self.config.sign_in_board().ok_or(SignInError::NotConfigured)?;
        let today = now.with_timezone(&board.timezone).date_naive();
        let month = month.map(parse_month).transpose()?.unwrap_or(first_of_month(today));
        let (this, previous) =
            self.store.on_read_layout(&self.keys, board, |layout| async move { self.months(&layout, user_id, month).await }).await?;
        Ok(read_calendar(user_id, month, MonthBitmap::new(&this), MonthBitmap::new(&previous), today))
    }
}

impl SignIns {
    /// A user's bitmaps of `month` and the month before, in one snapshot with their shard's
    /// guard: a board being restored or lost answers `Restoring` (docs/journal.md#fence), not an
    /// empty calendar; one being moved between layouts is read (its move fences writes only).
    async fn months(&self, layout: &Layout, user_id: &str, month: NaiveDate) -> Result<(Vec<u8>, Vec<u8>), StoreError> {
        let keys = layout.of_user(user_id);
        let mut conn = self.store.connection().await?;
        let mut pipe = redis::pipe();
        pipe.atomic().get(keys.sign_ins(user_id, &month_id(month))).get(keys.sign_ins(user_id, &month_id(previous_month(month))));
        if self.keys.journal_on() {
            pipe.add_command(crate::redis::catalog::guard_state(&keys.guard()));
        }
        let mut replies: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
        if self.keys.journal_on() {
            crate::redis::catalog::restoring_for_reads(replies.pop().unwrap_or(redis::Value::Nil))?;
        }
        let bitmap = |value: Option<redis::Value>| -> Result<Vec<u8>, StoreError> {
            let bytes: Option<Vec<u8>> = redis::from_redis_value(value.unwrap_or(redis::Value::Nil))
                .map_err(|e| StoreError::Protocol(format!("a sign-in bitmap: {e}")))?;
            Ok(bytes.unwrap_or_default())
        };
        let mut replies = replies.into_iter();
        Ok((bitmap(replies.next())?, bitmap(replies.next())?))
    }
}

/// What a sign-in's script reply means for the caller.
fn receipt(request: &SignInRequest, plan: &mut SignInPlan<'_>, reply: SignInReply) -> Result<SignInReceipt, SignInError> {
    let board = &plan.board.name;
    let (duplicate, outcome) = match reply {
        SignInReply::New(outcome) => (false, outcome),
        SignInReply::Duplicate(outcome) => (true, outcome),
        SignInReply::Conflict => return Err(SignInError::Conflict(request.event_id.clone())),
        SignInReply::OutsideWindow => {
            return Err(plan
                .first_delivery
                .take()
                .map_or_else(|| StoreError::Protocol("sign_in: unasked window refusal".into()).into(), SignInError::Date));
        }
        SignInReply::Banned => Err(GuardRefusal::Banned { user_id: request.user_id.clone(), board: board.clone() })?,
        SignInReply::PeriodClosed(period_id) => Err(GuardRefusal::PeriodClosed { board: board.clone(), period_id })?,
        SignInReply::OutOfRange => return Err(SignInError::ScoreOutOfRange(board.clone())),
    };
    let date = outcome.date.unwrap_or(plan.date);
    Ok(SignInReceipt { event_id: request.event_id.clone(), duplicate, date, outcome })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn months_parse_strictly() {
        assert_eq!(parse_month("2026-02").unwrap(), date("2026-02-01"));
        for bad in ["2026-2", "2026-13", "202602", "2026-02-01", "", "abcd-ef"] {
            assert!(matches!(parse_month(bad), Err(SignInError::BadMonth(_))), "{bad}");
        }
    }
}
