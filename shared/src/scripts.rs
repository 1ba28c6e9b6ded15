//! Typed wrappers around the Lua scripts in `scripts/`. Each script is hashed once per
//! process and called with EVALSHA through `Connection::run_script`; after `SCRIPT FLUSH` or a
//! failover to a node that never saw it, NOSCRIPT is answered by loading it and retrying, so
//! callers never notice.

use std::sync::LazyLock;

use redis::Script;
use serde::{Deserialize, Serialize};

use crate::keys::BoardKeys;
use crate::scoring::{BoardPlan, Ledger, Mode};
use crate::store::{Connection, ReplicaWait, ScriptCall, StoreError};

#[cfg(test)]
mod key_check;

static APPLY_EVENT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/apply_event.lua")));

/// How long an event id is remembered per board.
pub const EVENT_MARKER_TTL_SECS: u64 = 48 * 3600;
/// Day ledgers outlive their day by this much (~31 days of history, seed 001).
const LEDGER_RETENTION_SECS: i64 = 30 * 24 * 3600;

/// One period's standing after an event, in whole points.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeriodStanding {
    pub period: String,
    pub period_id: String,
    pub score: i64,
    /// 1-based; `None` when the member is not on the board (zero points).
    pub rank: Option<u64>,
}

/// What an event did on one board. Stored verbatim in the event marker so a duplicate gets
/// the first answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardOutcome {
    pub applied: bool,
    pub delta: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Points withheld by the daily cap.
    #[serde(default)]
    pub capped: i64,
    pub periods: Vec<PeriodStanding>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyReply {
    New(BoardOutcome),
    Duplicate(BoardOutcome),
    Conflict,
    OutOfRange,
}

/// Applies one board's share of an event: dedupe, ledger, cap, every period board, TTLs and
/// the new ranks, atomically, in one round trip (with `wait` for replicas in the same one).
pub async fn apply_event(
    conn: &mut Connection,
    keys: &BoardKeys,
    plan: &BoardPlan<'_>,
    event_id: &str,
    member: &str,
    fingerprint: &str,
    wait: ReplicaWait,
) -> Result<ApplyReply, StoreError> {
    let day_ledger = keys.day_ledger(member, &plan.day.id);
    let day_ledger_expiry = plan.day.end.map_or(0, |end| end.timestamp() + LEDGER_RETENTION_SECS);
    let (ledger, ledger_expiry) = match plan.ledger {
        Ledger::Day | Ledger::None => (day_ledger.clone(), day_ledger_expiry),
        Ledger::Lifetime => (keys.lifetime_ledger(member), 0),
        Ledger::Target => (keys.target_ledger(), 0),
    };
    let (cap_field, cap) = plan.cap.clone().unwrap_or_default();

    let mut invocation = ScriptCall::new(&APPLY_EVENT);
    invocation.key(keys.event(event_id)).key(ledger).key(day_ledger);
    for period in &plan.periods {
        invocation.key(keys.period(period));
    }
    invocation
        .arg(fingerprint)
        .arg(member)
        .arg(match plan.mode {
            Mode::Give => "give",
            Mode::TakeBack => "take",
        })
        .arg(plan.points)
        .arg(&plan.ledger_field)
        .arg(cap_field)
        .arg(cap)
        .arg(plan.time_part)
        .arg(EVENT_MARKER_TTL_SECS)
        .arg(ledger_expiry)
        .arg(day_ledger_expiry);
    for period in &plan.periods {
        invocation.arg(period.kind.as_str()).arg(&period.id).arg(period.expires_at().unwrap_or(0));
    }
    let (status, body): (String, String) = conn.run_script(&invocation, wait).await?;
    let outcome = || serde_json::from_str(&body).map_err(|e| StoreError::Protocol(format!("apply_event: {e}")));
    match status.as_str() {
        "new" => Ok(ApplyReply::New(outcome()?)),
        "duplicate" => Ok(ApplyReply::Duplicate(outcome()?)),
        "conflict" => Ok(ApplyReply::Conflict),
        "out_of_range" => Ok(ApplyReply::OutOfRange),
        other => Err(StoreError::Protocol(format!("apply_event status {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use crate::tiebreak::{MAX_POINTS, TIME_SPAN};

    #[test]
    fn the_script_uses_the_same_composite_constants_as_rust() {
        let script = include_str!("scripts/apply_event.lua");
        assert!(script.contains(&format!("local SPAN = {TIME_SPAN} ")));
        assert!(script.contains(&format!("local MAX_POINTS = {MAX_POINTS} ")));
        assert!(script.starts_with("#!lua\n"), "the shebang makes Redis refuse the script up front when out of memory");
    }
}
