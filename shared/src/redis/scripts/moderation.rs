//! Typed wrappers of the admin scripts: `ban.lua`, `correct_score.lua` and `void.lua`.

use super::{BAN_USER, CORRECT_SCORE, EVENT_MARKER_TTL_SECS, PeriodStanding, Status, VOID_POINTS};
use chrono::{DateTime, Utc};

use super::apply::ledger_field;
use crate::domain::guard;
use crate::domain::league::League;
use crate::domain::notify::Notify;
use crate::domain::period::Period;
use crate::domain::tiebreak::Scale;
use crate::domain::void::LedgerEntry;
use crate::redis::error::StoreError;
use crate::redis::keys::BoardKeys;
use crate::redis::store::Connection;

/// The top each period's notifications watch (0: none), and for each watched one its arrivals
/// key, added to `invocation` after the `keys_before` keys it holds: the key's index in KEYS
/// (1-based; 0: none), as the scripts take it.
fn watched<'p>(
    invocation: &mut redis::ScriptInvocation<'_>,
    keys: &BoardKeys,
    notify: Option<&Notify>,
    periods: impl Iterator<Item = &'p Period>,
    keys_before: usize,
) -> (Vec<u8>, Vec<usize>) {
    let mut next_key = keys_before;
    periods
        .map(|period| {
            let top = notify.map_or(0, |notify| super::apply::notify_top(notify, period));
            if top == 0 {
                return (0, 0);
            }
            invocation.key(keys.arrivals(period));
            next_key += 1;
            (top, next_key)
        })
        .unzip()
}

/// An audit log entry (JSON) and how many entries the log keeps.
#[derive(Debug, Clone, Copy)]
pub struct AuditRecord<'a> {
    pub entry: &'a str,
    pub keep: usize,
}

/// What to do to a user's standing on one board.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ban<'a> {
    /// Guard the user out and remove them from these (live) periods, with their statements
    /// when the board keeps them.
    Ban {
        live: &'a [Period],
        statements: bool,
        /// The board's league, whose live periods' cohorts the user leaves.
        league: Option<&'a League>,
        /// The board's notifications, when its rank moves are recorded.
        notify: Option<&'a Notify>,
        /// The function's clock: a recorded period set gone before its expiry is a loss.
        now: DateTime<Utc>,
        /// A tournament's board: the user's seat in each of these instances is freed too.
        seats: bool,
    },
    Unban,
}

/// Bans or unbans `member` on one board, appending the audit entry to its log, in one atomic
/// call. Returns the periods the user was removed from.
pub async fn ban<'p>(
    conn: &mut Connection,
    keys: &BoardKeys,
    member: &str,
    action: Ban<'p>,
    audit: AuditRecord<'_>,
) -> Result<Vec<&'p Period>, StoreError> {
    let (mode, live, statements, league, notify, now_ms) = match action {
        Ban::Ban { live, statements, league, notify, now, seats } => {
            (if seats { "ban+seats" } else { "ban" }, live, statements, league, notify.filter(|_| keys.noticed()), now.timestamp_millis())
        }
        Ban::Unban => ("unban", &[][..], false, None, None, 0),
    };
    let league_periods: Vec<&Period> = live.iter().filter(|p| league.is_some_and(|l| l.period == p.kind)).collect();
    let mut invocation = BAN_USER.key(keys.guard());
    invocation.key(keys.audit()).key(keys.journal()).key(keys.notices());
    for period in live {
        invocation.key(keys.period(period));
    }
    if statements {
        for period in live {
            invocation.key(keys.statement(member, period));
        }
    }
    // The arrivals of each watched period follow the keys above.
    let (tops, arrivals) = watched(&mut invocation, keys, notify, live.iter(), 4 + live.len() * if statements { 2 } else { 1 });
    for period in &league_periods {
        invocation
            .key(keys.league_members(&period.id))
            .key(keys.league_cohorts(&period.id))
            .key(keys.league_pending(&period.id))
            .key(keys.league_order(&period.id));
    }
    if mode == "ban+seats" {
        for period in live {
            invocation.key(keys.players(period));
        }
    }
    invocation.arg(member).arg(mode).arg(audit.entry).arg(audit.keep).arg(if keys.journaled() { audit.entry } else { "" });
    invocation.arg(league_periods.len());
    for period in live {
        invocation.arg(format!("{}:{}", period.kind.as_str(), period.id));
    }
    for top in &tops {
        invocation.arg(top);
    }
    for index in &arrivals {
        invocation.arg(index);
    }
    for league_period in &league_periods {
        invocation.arg(live.iter().position(|period| std::ptr::eq(period, *league_period)).map_or(0, |i| i + 1));
    }
    invocation.arg(now_ms);
    let removed: Vec<usize> = invocation.invoke_async(conn).await?;
    removed
        .into_iter()
        .map(|position| live.get(position.wrapping_sub(1)).ok_or_else(|| StoreError::Protocol(format!("ban: position {position}"))))
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorrectionReply {
    /// The audit entry (JSON) and the standings after the correction; `duplicate` when they
    /// are the first answer to this correction id.
    Corrected {
        entry: String,
        periods: Vec<PeriodStanding>,
        duplicate: bool,
    },
    Conflict,
    Banned,
    PeriodClosed(String),
    OutOfRange,
}

/// A correction of one user's score on one board.
#[derive(Debug, Clone)]
pub struct ScoreCorrection<'a> {
    pub correction_id: &'a str,
    /// Of the payload: tells a retry from another correction under the same id.
    pub fingerprint: &'a str,
    pub member: &'a str,
    /// `add`, `set` or `remove`, and its operand in stored values (`domain::correction`).
    pub mode: &'static str,
    pub operand: i64,
    /// `points` (a rule board), `desc` or `asc` (a score board and its order).
    pub kind: &'static str,
    /// The board's composite layout (span and largest value).
    pub scale: Scale,
    /// The periods to correct, each with the time part of a score reached now in it.
    pub periods: &'a [(Period, i64)],
    /// The function's clock: TTLs of keys the correction creates count from it.
    pub now: DateTime<Utc>,
    pub reason: &'a str,
    /// The board keeps statements: the correction is itemised in each period's.
    pub statements: bool,
    /// Its journal entry (the audit entry and the request), "" when the journal is off.
    pub journal_entry: &'a str,
    /// The board's league, if one of `periods` is its period: a correction placing the member
    /// on it places them in a cohort.
    pub league: Option<&'a League>,
    /// What the board notifies: a correction that moves members records their rank moves.
    pub notify: Option<&'a Notify>,
}

/// Adds `delta` to the member's score on every period given, with the audit entry, exactly
/// once per correction id, atomically.
pub async fn correct_score(
    conn: &mut Connection,
    keys: &BoardKeys,
    correction: &ScoreCorrection<'_>,
    audit: AuditRecord<'_>,
) -> Result<CorrectionReply, StoreError> {
    let mut invocation = CORRECT_SCORE.key(keys.guard());
    invocation.key(keys.audit()).key(keys.correction(correction.correction_id)).key(keys.journal());
    for (period, _) in correction.periods {
        invocation.key(keys.period(period));
    }
    if correction.statements {
        for (period, _) in correction.periods {
            invocation.key(keys.statement(correction.member, period));
        }
    }
    // Every league period of the correction: a removal in the grace after midnight has two days.
    let league_periods: Vec<usize> = correction.league.map_or_else(Vec::new, |league| {
        correction.periods.iter().enumerate().filter(|(_, (p, _))| p.kind == league.period).map(|(at, _)| at + 1).collect()
    });
    for &at in &league_periods {
        for key in super::league::correction_keys(keys, &correction.periods[at - 1].0) {
            invocation.key(key);
        }
    }
    let notify = correction.notify.filter(|_| keys.noticed());
    // The arrivals of each watched period follow the keys above.
    let before = 4 + correction.periods.len() * if correction.statements { 2 } else { 1 } + 10 * league_periods.len();
    let (tops, arrivals) = watched(&mut invocation, keys, notify, correction.periods.iter().map(|(period, _)| period), before);
    if notify.is_some() {
        invocation.key(keys.notices());
    }
    invocation
        .arg(correction.member)
        .arg(correction.operand)
        .arg(correction.mode)
        .arg(audit.entry)
        .arg(audit.keep)
        .arg(correction.fingerprint)
        .arg(keys.ttl(EVENT_MARKER_TTL_SECS as i64, correction.now))
        .arg(if correction.statements { 1 } else { 0 })
        .arg(format!("c:{}", correction.correction_id))
        .arg(correction.reason)
        .arg(correction.kind)
        .arg(correction.scale.span)
        .arg(correction.scale.max_value)
        .arg(if keys.journaled() { correction.journal_entry } else { "" });
    let (size, top) = correction.league.filter(|_| !league_periods.is_empty()).map_or((0, 0), super::league::sizes);
    let positions = league_periods.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    invocation.arg(positions).arg(size).arg(top).arg(correction.now.timestamp_millis());
    invocation.arg(if notify.is_some() { correction.correction_id } else { "" });
    for (((period, time_part), top), arrivals) in correction.periods.iter().zip(&tops).zip(&arrivals) {
        let ttl = keys.ttl(period.ttl_secs(correction.now), correction.now);
        invocation.arg(period.kind.as_str()).arg(&period.id).arg(ttl).arg(time_part).arg(top).arg(arrivals);
    }
    let (status, entry, body): (String, String, String) = invocation.invoke_async(conn).await?;
    let corrected = |duplicate| {
        serde_json::from_str(&body)
            .map(|periods| CorrectionReply::Corrected { entry: entry.clone(), periods, duplicate })
            .map_err(|e| StoreError::Protocol(format!("correct_score: {e}")))
    };
    match Status::parse("correct_score", &status, None)? {
        Status::New => corrected(false),
        Status::Duplicate => corrected(true),
        Status::Conflict => Ok(CorrectionReply::Conflict),
        Status::Banned => Ok(CorrectionReply::Banned),
        Status::PeriodClosed => Ok(CorrectionReply::PeriodClosed(entry)),
        Status::OutOfRange => Ok(CorrectionReply::OutOfRange),
        other => Err(other.unexpected("correct_score")),
    }
}

/// A void of points one user's events earned on one board, per period (`domain::void`).
#[derive(Debug, Clone)]
pub struct PointsVoid<'a> {
    pub void_id: &'a str,
    /// Of the payload: tells a retry from another void under the same id.
    pub fingerprint: &'a str,
    pub member: &'a str,
    /// Points to remove from each period (positive).
    pub periods: &'a [(Period, i64)],
    /// The day ledger entries of the gives voided.
    pub entries: &'a [LedgerEntry],
    pub now: DateTime<Utc>,
    pub reason: &'a str,
    pub statements: bool,
    /// The count of the user's voids on the board the points were decided on (`voids_seen`);
    /// `None` for a restore's replay, which does not check.
    pub voids_seen: Option<i64>,
    /// Its journal entry, "" when the journal is off.
    pub journal_entry: &'a str,
    /// What the board notifies: a void that moves members records their rank moves.
    pub notify: Option<&'a Notify>,
    /// The board's league: a void of its period keeps the member's cohort's scores.
    pub league: Option<&'a League>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoidReply {
    /// The audit entry (JSON) and the standings after the void; `duplicate` when they are the
    /// first answer to this void id.
    Voided {
        entry: String,
        periods: Vec<PeriodStanding>,
        duplicate: bool,
    },
    Conflict,
    Banned,
    /// A take-back or another void landed since the void was decided: decide again.
    Stale,
}

/// Removes the points of `void` from the member's periods, with the audit entry, exactly once
/// per void id, atomically.
pub async fn void_points(
    conn: &mut Connection,
    keys: &BoardKeys,
    void: &PointsVoid<'_>,
    audit: AuditRecord<'_>,
) -> Result<VoidReply, StoreError> {
    let mut invocation = VOID_POINTS.key(keys.guard());
    invocation.key(keys.audit()).key(keys.void(void.void_id)).key(keys.journal());
    for (period, _) in void.periods {
        invocation.key(keys.period(period));
    }
    if void.statements {
        for (period, _) in void.periods {
            invocation.key(keys.statement(void.member, period));
        }
    }
    for entry in void.entries {
        invocation.key(keys.day_ledger(void.member, &entry.day));
    }
    // A void across a league period's end holds two of them.
    let league_at: Vec<usize> = void
        .periods
        .iter()
        .enumerate()
        .filter(|(_, (period, _))| void.league.is_some_and(|league| period.kind == league.period))
        .map(|(at, _)| at)
        .collect();
    for &at in &league_at {
        let id = &void.periods[at].0.id;
        invocation.key(keys.league_members(id)).key(keys.league_cohorts(id)).key(keys.league_order(id));
    }
    let notify = void.notify.filter(|_| keys.noticed());
    // The arrivals of each watched period follow the keys above.
    let before = 4 + void.periods.len() * if void.statements { 2 } else { 1 } + void.entries.len() + 3 * league_at.len();
    let (tops, arrivals) = watched(&mut invocation, keys, notify, void.periods.iter().map(|(period, _)| period), before);
    if notify.is_some() {
        invocation.key(keys.notices());
    }
    invocation
        .arg(void.member)
        .arg(audit.entry)
        .arg(audit.keep)
        .arg(void.fingerprint)
        .arg(keys.ttl(EVENT_MARKER_TTL_SECS as i64, void.now))
        .arg(if void.statements { 1 } else { 0 })
        .arg(format!("v:{}", void.void_id))
        .arg(void.reason)
        .arg(if keys.journaled() { void.journal_entry } else { "" })
        .arg(guard::voids_field(void.member))
        .arg(void.voids_seen.map(|seen| seen.to_string()).unwrap_or_default())
        .arg(void.periods.len())
        .arg(if notify.is_some() { void.void_id } else { "" });
    for (((period, points), top), arrivals) in void.periods.iter().zip(&tops).zip(&arrivals) {
        invocation.arg(period.kind.as_str()).arg(&period.id).arg(points).arg(top).arg(arrivals);
    }
    for entry in void.entries {
        invocation.arg(ledger_field(&entry.field)).arg(&entry.field);
    }
    invocation.arg(league_at.iter().map(|at| (at + 1).to_string()).collect::<Vec<_>>().join(","));
    invocation.arg(void.now.timestamp_millis());
    let (status, entry, body): (String, String, String) = invocation.invoke_async(conn).await?;
    let voided = |duplicate| {
        // cjson encodes an empty table as an object.
        let periods = if body == "{}" { Ok(Vec::new()) } else { serde_json::from_str(&body) };
        periods
            .map(|periods| VoidReply::Voided { entry: entry.clone(), periods, duplicate })
            .map_err(|e| StoreError::Protocol(format!("void: {e}")))
    };
    match Status::parse("void", &status, None)? {
        Status::New => voided(false),
        Status::Duplicate => voided(true),
        Status::Conflict => Ok(VoidReply::Conflict),
        Status::Banned => Ok(VoidReply::Banned),
        Status::Stale => Ok(VoidReply::Stale),
        other => Err(other.unexpected("void")),
    }
}

/// Of `ended` (a tournament's instances ended before a ban's live ones), those not frozen (no
/// `closed|` in the guard) where `member` holds a score or a seat: one pipeline.
pub async fn holding(conn: &mut Connection, keys: &BoardKeys, member: &str, ended: &[Period]) -> Result<Vec<Period>, StoreError> {
    if ended.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    pipe.cmd("HMGET").arg(keys.guard());
    for period in ended {
        pipe.arg(guard::closed_field(period));
    }
    for period in ended {
        pipe.zscore(keys.period(period), member).sismember(keys.players(period), member);
    }
    let mut replies: Vec<redis::Value> = pipe.query_async(conn).await?;
    let unexpected = |e: redis::ParsingError| StoreError::Protocol(format!("ended instances: {e}"));
    let held: Vec<bool> = replies
        .split_off(1)
        .chunks(2)
        .map(|pair| Ok(!matches!(pair[0], redis::Value::Nil) || redis::from_redis_value::<bool>(pair[1].clone())?))
        .collect::<Result<_, redis::ParsingError>>()
        .map_err(unexpected)?;
    let closed: Vec<Option<String>> = redis::from_redis_value(replies.remove(0)).map_err(unexpected)?;
    Ok(ended.iter().zip(closed.iter().zip(held)).filter(|(_, (closed, held))| closed.is_none() && *held).map(|(p, _)| p.clone()).collect())
}

/// The count of `member`'s voids on the board (its guard's field), read before the journal.
pub async fn voids_seen(conn: &mut Connection, keys: &BoardKeys, member: &str) -> Result<i64, StoreError> {
    let seen: Option<i64> = redis::cmd("HGET").arg(keys.guard()).arg(guard::voids_field(member)).query_async(conn).await?;
    Ok(seen.unwrap_or(0))
}
