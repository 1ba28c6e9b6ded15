//! The typed wrapper of `submit_score.lua`: one submitted score on one score board, exactly
//! once (the same marker buckets as `apply_event`), in one round trip.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::apply::{KeyList, MarkerSlot, duplicate_of, marker_bucket, short_fingerprint, standings};
use super::{SUBMIT_SCORE, Status, WriteReply};
use crate::domain::period::Period;
use crate::domain::scores::{ScorePlan, Submission};
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
}

/// A submission's answer (`OutOfRange`: a sum would leave the score range).
pub type SubmitReply = WriteReply<ScoreOutcome>;

/// Applies one planned submission (see `domain::scores`) under its `event_id`.
pub async fn submit_score(
    conn: &mut Connection,
    keys: &BoardKeys,
    plan: &ScorePlan<'_>,
    now: DateTime<Utc>,
    wait: ReplicaWait,
) -> Result<SubmitReply, StoreError> {
    let Submission { event_id, user_id: member, occurred_at, .. } = plan.submission;
    let timed = occurred_at.is_some();
    let board = plan.board;
    let bucket = marker_bucket(now, board.timezone);
    let slot = MarkerSlot::of(event_id);
    let scale = plan.periods.first().map_or(Scale::POINTS, |(_, scale)| *scale);
    let limit = plan.rules.rate_limit;
    let mut call = ScriptCall::new(&SUBMIT_SCORE);
    let mut key_list = KeyList::new(&mut call, keys.guard());
    for day in [bucket.day, bucket.day - 1, bucket.day + 1] {
        key_list.add(&mut call, keys.marker_bucket(day, slot.shard));
    }
    key_list.add(&mut call, keys.rate_log(member, RATE_LOG_NAME));
    call.arg(bucket.ttl_secs)
        .arg(&slot.field[..])
        .arg(short_fingerprint(&plan.fingerprint))
        .arg(member)
        .arg(plan.rules.keep.as_str())
        .arg(plan.first_delivery.map_or("", |refusal| refusal.code()))
        .arg(scale.value(plan.submission.score))
        .arg(scale.value(0))
        .arg(limit.map_or(0, |l| l.max))
        .arg(limit.map_or(0, |l| i64::from(l.per_secs) * 1000))
        .arg(now.timestamp_millis())
        .arg(plan.periods.len());
    for (period, _) in &plan.periods {
        call.key(keys.period(period));
    }
    if board.statements {
        for (period, _) in &plan.periods {
            call.key(keys.statement(member, period));
        }
    }
    call.arg(if board.statements { 1 } else { 0 }).arg(plan.submission.score);
    for ((period, _), time_part) in plan.periods.iter().zip(&plan.time_parts) {
        call.arg(period.kind.as_str()).arg(&period.id).arg(period.ttl_secs(now)).arg(time_part);
    }
    let reply: Vec<String> = conn.run_script(&call, wait).await?;
    let protocol = |what: &str| StoreError::Protocol(format!("submit_score: {what}"));
    let mut values = reply.into_iter();
    let (status, detail) = values.next().zip(values.next()).ok_or_else(|| protocol("reply too short"))?;
    let standing: Vec<(Option<f64>, u64)> = values
        .collect::<Vec<_>>()
        .chunks(2)
        .map(|pair| match pair {
            [composite, rank] => Ok((composite.parse().ok(), rank.parse().map_err(|_| protocol("rank"))?)),
            _ => Err(protocol("standing")),
        })
        .collect::<Result<_, _>>()?;
    let periods: Vec<&Period> = plan.periods.iter().map(|(period, _)| period).collect();
    let scales: Vec<Scale> = plan.periods.iter().map(|(_, scale)| *scale).collect();
    let status = Status::parse("submit_score", &status, plan.first_delivery.map(|refusal| refusal.code()))?;
    Ok(match status {
        Status::New => SubmitReply::New(outcome(&detail, &periods, &scales, &standing).ok_or_else(|| protocol("receipt"))?),
        Status::Duplicate => {
            let (landed, receipt) =
                duplicate_of(&detail, timed, bucket.start, periods.iter().copied(), board.timezone).ok_or_else(|| protocol("duplicate"))?;
            match landed {
                None => SubmitReply::Duplicate(outcome(receipt, &periods, &scales, &standing).ok_or_else(|| protocol("receipt"))?),
                Some(landed) => {
                    // Sent without a time on another local day: its standing is in that day's periods.
                    let scales: Vec<Scale> = landed.iter().map(|period| crate::domain::scores::scale(board, period)).collect();
                    let standing = standings(conn, keys, member, &landed).await?;
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
    Some(ScoreOutcome { applied, reason: (!applied).then(|| "not_better".to_owned()), periods })
}
