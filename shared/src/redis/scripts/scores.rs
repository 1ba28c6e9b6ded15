//! The typed wrapper of `submit_score.lua`: submitted scores on one score board, each exactly
//! once (the same marker buckets as `apply_event`), a chunk in one round trip.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::apply::{MarkerBucket, MarkerSlot, bucket_args, duplicate_of, marker_bucket, short_fingerprint, standings};
use super::key_list::KeyList;
use super::{SUBMIT_SCORE, Status, WriteReply};
use crate::domain::journal::{Entry, Stamp};
use crate::domain::period::Period;
use crate::domain::scores::ScorePlan;
use crate::domain::tiebreak::Scale;
use crate::redis::error::StoreError;
use crate::redis::keys::BoardKeys;
use crate::redis::settings::ReplicaWait;
use crate::redis::store::{Connection, ScriptCall};

/// Receipt codes of a submission's marker (the script gets them from `compose`).
pub(super) const SCORE_KEPT: char = 'k';
pub(super) const SCORE_NOT_BETTER: char = 'n';
/// The rate-limit log of score submissions shares the keyspace of actions' logs under a name
/// no action can take (actions are `[a-z0-9_]`).
const RATE_LOG_NAME: &str = "score-submissions";

/// A member's standing in one period after a submission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScoreStanding {
    pub period: String,
    pub period_id: String,
    /// The kept score (`null` when the member is not on the period's board).
    pub score: Option<i64>,
    pub rank: Option<u64>,
    /// Whether this submission changed the period's entry.
    pub changed: bool,
    /// Why this period did not take the submission: `out_of_range` when a sum would leave
    /// the score range there (the other periods took it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What a submission did on its board: a duplicate answers its first delivery's decision with
/// the member's standing now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScoreOutcome {
    pub applied: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub periods: Vec<ScoreStanding>,
    /// On a tournament's board: the player's submissions applied in the instance now.
    #[serde(skip)]
    pub entries: Option<i64>,
}

/// A submission's answer (`OutOfRange`: a sum would leave the score range).
pub type SubmitReply = WriteReply<ScoreOutcome>;

/// Applies one planned submission (see `domain::scores`) under its `event_id`.
pub async fn submit_score(
    conn: &mut Connection,
    keys: &BoardKeys,
    plan: &ScorePlan<'_>,
    wait: ReplicaWait,
) -> Result<SubmitReply, StoreError> {
    let mut replies = submit_scores(conn, keys, &[plan], wait).await?;
    replies.pop().ok_or_else(|| StoreError::Protocol("submit_score: no reply".into()))
}

/// Applies a chunk of one board's planned submissions (at most `CHUNK`) in order, each
/// exactly once, in one script call (one round trip, with `wait` for replicas in the same
/// one). One reply per submission.
pub async fn submit_scores(
    conn: &mut Connection,
    keys: &BoardKeys,
    plans: &[&ScorePlan<'_>],
    wait: ReplicaWait,
) -> Result<Vec<SubmitReply>, StoreError> {
    let Some(first) = plans.first() else {
        return Ok(Vec::new());
    };
    let board = first.board;
    // Each submission's marker goes to the bucket of its own day; the latest one's bucket lives
    // longest (its TTL covers every bucket of the chunk), and its clock is the rate window's.
    let buckets: Vec<MarkerBucket> = plans.iter().map(|plan| marker_bucket(plan.now, board.timezone)).collect();
    let (now, bucket) = plans.iter().map(|plan| plan.now).zip(&buckets).max_by_key(|(now, _)| *now).expect("a chunk has a submission");
    let scale = first.periods.first().map_or(Scale::POINTS, |(_, scale)| *scale);
    let limit = first.rules.rate_limit;
    let mut call = ScriptCall::new(&SUBMIT_SCORE);
    let mut key_list = KeyList::new(&mut call, keys.guard());
    call.arg(plans.len())
        .arg(keys.ttl(bucket.ttl_secs, now))
        .arg(first.rules.keep.as_str())
        .arg(if board.statements { 1 } else { 0 })
        .arg(limit.map_or(0, |l| l.max))
        .arg(limit.map_or(0, |l| i64::from(l.per_secs) * 1000))
        .arg(now.timestamp_millis())
        .arg(scale.span)
        .arg(scale.max_value)
        .arg(scale.value(0));
    let journal = key_list.add(&mut call, keys.journal());
    call.arg(journal);
    let notify = board.notify.as_ref().filter(|_| keys.noticed());
    let notices = if notify.is_some() { key_list.add(&mut call, keys.notices()) } else { 0 };
    call.arg(notices);
    // A tournament's chunk is one submission, in the instance its time opened (one period).
    match (&board.tournament, first.periods.first()) {
        (Some(tournament), Some((instance, _))) => {
            let players = key_list.add(&mut call, keys.players(instance));
            let entries = key_list.add(&mut call, keys.entries(instance));
            call.arg(players)
                .arg(entries)
                .arg(if tournament.join_required { 1 } else { 0 })
                .arg(tournament.max_size.unwrap_or(0))
                .arg(tournament.max_entries.unwrap_or(0));
        }
        _ => {
            call.arg(0).arg(0).arg(0).arg(0).arg(0);
        }
    }
    for (plan, bucket) in plans.iter().zip(&buckets) {
        let member = &plan.submission.user_id;
        let slot = MarkerSlot::of(&plan.submission.event_id);
        bucket_args(&mut call, &mut key_list, keys, bucket, slot.shard);
        let rate_log = key_list.add(&mut call, keys.rate_log(member, RATE_LOG_NAME));
        call.arg(rate_log)
            .arg(&slot.field[..])
            .arg(short_fingerprint(&plan.fingerprint))
            .arg(member)
            .arg(plan.first_delivery.map_or("", |refusal| refusal.code()))
            .arg(scale.value(plan.submission.score))
            .arg(plan.submission.score)
            .arg(plan.periods.len())
            .arg(if keys.journaled() {
                Entry::Score { at: Stamp(plan.now), submission: plan.submission, max_score: crate::domain::scores::line_scale(board) }
                    .json()
            } else {
                String::new()
            });
        let league = board.league.as_ref().and_then(|league| {
            let at = plan.periods.iter().position(|(p, _)| p.kind == league.period)?;
            Some((league, &plan.periods[at].0, at + 1))
        });
        call.arg(league.map_or(0, |(_, _, at)| at));
        call.arg(if notify.is_some() { plan.submission.event_id.as_str() } else { "" });
        for ((period, _), time_part) in plan.periods.iter().zip(&plan.time_parts) {
            let board_key = key_list.add(&mut call, keys.period(period));
            let statement = if board.statements { key_list.add(&mut call, keys.statement(member, period)) } else { 0 };
            let top = notify.map_or(0, |notify| super::apply::notify_top(notify, period));
            let arrivals = if top > 0 { key_list.add(&mut call, keys.arrivals(period)) } else { 0 };
            call.arg(board_key)
                .arg(statement)
                .arg(period.kind.as_str())
                .arg(&period.id)
                .arg(keys.ttl(period.ttl_secs(plan.now), plan.now))
                .arg(time_part)
                .arg(top)
                .arg(arrivals);
        }
        if let Some((league, period, _)) = league {
            super::league::league_args(&mut call, &mut key_list, keys, league, period);
        }
    }
    let reply: Vec<String> = conn.run_script(&call, wait).await?;
    let mut values = reply.into_iter();
    let mut replies = Vec::with_capacity(plans.len());
    for (plan, bucket) in plans.iter().zip(&buckets) {
        replies.push(read_reply(conn, keys, plan, &mut values, bucket.start).await?);
    }
    Ok(replies)
}

/// One submission's reply from the script's flat answer: status, detail, then composite and
/// rank for each period. `today` is the first instant of the local day of the call's bucket.
async fn read_reply(
    conn: &mut Connection,
    keys: &BoardKeys,
    plan: &ScorePlan<'_>,
    values: &mut impl Iterator<Item = String>,
    today: DateTime<Utc>,
) -> Result<SubmitReply, StoreError> {
    let protocol = |what: &str| StoreError::Protocol(format!("submit_score: {what}"));
    let (status, detail) = values.next().zip(values.next()).ok_or_else(|| protocol("reply too short"))?;
    let mut standing: Vec<(Option<f64>, u64)> = Vec::with_capacity(plan.periods.len());
    for _ in &plan.periods {
        let (composite, rank) = values.next().zip(values.next()).ok_or_else(|| protocol("reply too short"))?;
        standing.push((composite.parse().ok(), rank.parse().map_err(|_| protocol("rank"))?));
    }
    let board = plan.board;
    let entries = match &board.tournament {
        Some(_) => Some(values.next().and_then(|n| n.parse::<i64>().ok()).ok_or_else(|| protocol("entries"))?),
        None => None,
    };
    let timed = plan.submission.occurred_at.is_some();
    let periods: Vec<&Period> = plan.periods.iter().map(|(period, _)| period).collect();
    let scales: Vec<Scale> = plan.periods.iter().map(|(_, scale)| *scale).collect();
    let status = Status::parse("submit_score", &status, plan.first_delivery.map(|refusal| refusal.code()))?;
    let with_entries = |mut outcome: ScoreOutcome| {
        outcome.entries = entries;
        outcome
    };
    Ok(match status {
        Status::New => SubmitReply::New(with_entries(outcome(&detail, &periods, &scales, &standing).ok_or_else(|| protocol("receipt"))?)),
        Status::Duplicate => {
            let (landed, receipt) =
                duplicate_of(&detail, timed, today, periods.iter().copied(), board.timezone).ok_or_else(|| protocol("duplicate"))?;
            match landed {
                None => {
                    SubmitReply::Duplicate(with_entries(outcome(receipt, &periods, &scales, &standing).ok_or_else(|| protocol("receipt"))?))
                }
                Some(landed) => {
                    // Sent without a time on another local day: its standing is in that day's periods.
                    let scales: Vec<Scale> = landed.iter().map(|period| crate::domain::scores::scale(board, period)).collect();
                    let standing = standings(conn, keys, &plan.submission.user_id, &landed).await?;
                    let landed: Vec<&Period> = landed.iter().collect();
                    SubmitReply::Duplicate(outcome(receipt, &landed, &scales, &standing).ok_or_else(|| protocol("receipt"))?)
                }
            }
        }
        Status::Conflict => SubmitReply::Conflict,
        Status::OutsideWindow => SubmitReply::OutsideWindow(plan.first_delivery.expect("parsed only with a refusal")),
        Status::OutOfRange => SubmitReply::OutOfRange,
        Status::Banned => SubmitReply::Banned,
        Status::PeriodClosed => SubmitReply::PeriodClosed(detail),
        Status::RateLimited => SubmitReply::RateLimited(detail.parse().map_err(|_| protocol("retry-after"))?),
        Status::Seat(refusal) => SubmitReply::Seat(refusal),
        other => return Err(other.unexpected("submit_score")),
    })
}

/// A submission's outcome from its receipt (`<code><one flag per period>`) and the standing.
fn outcome(receipt: &str, periods: &[&Period], scales: &[Scale], standing: &[(Option<f64>, u64)]) -> Option<ScoreOutcome> {
    let mut chars = receipt.chars();
    let applied = match chars.next()? {
        SCORE_KEPT => true,
        SCORE_NOT_BETTER => false,
        _ => return None,
    };
    let flags: Vec<char> = chars.collect();
    if flags.len() != periods.len() || standing.len() != periods.len() {
        return None;
    }
    let periods = periods
        .iter()
        .zip(scales)
        .zip(standing)
        .zip(flags)
        .map(|(((period, scale), &(composite, rank)), flag)| ScoreStanding {
            period: period.kind.as_str().to_owned(),
            period_id: period.id.clone(),
            score: composite.map(|c| scale.score_of(c)),
            rank: (rank > 0).then_some(rank),
            changed: flag == '1',
            reason: (flag == 'o').then(|| "out_of_range".to_owned()),
        })
        .collect();
    Some(ScoreOutcome { applied, reason: (!applied).then(|| "not_better".to_owned()), periods, entries: None })
}
