//! Typed wrappers of the admin scripts: `ban.lua` and `correct_score.lua`.

use std::sync::LazyLock;

use redis::Script;

use super::{with_prelude, PeriodStanding};
use crate::keys::BoardKeys;
use crate::period::Period;
use crate::store::{Connection, StoreError};

pub(super) static BAN: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("ban.lua")));
pub(super) static CORRECT_SCORE: LazyLock<Script> = LazyLock::new(|| with_prelude(include_str!("correct_score.lua")));

/// An audit log entry (JSON) and how many entries the log keeps.
#[derive(Debug, Clone, Copy)]
pub struct AuditRecord<'a> {
    pub entry: &'a str,
    pub keep: usize,
}

/// What to do to a user's standing on one board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ban<'a> {
    /// Guard the user out and remove them from these (live) periods.
    Ban { live: &'a [Period] },
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
    let (mode, live) = match action {
        Ban::Ban { live } => ("ban", live),
        Ban::Unban => ("unban", &[][..]),
    };
    let mut invocation = BAN.key(keys.guard());
    invocation.key(keys.audit());
    for period in live {
        invocation.key(keys.period(period));
    }
    invocation.arg(member).arg(mode).arg(audit.entry).arg(audit.keep);
    for period in live {
        invocation.arg(format!("{}:{}", period.kind.as_str(), period.id));
    }
    let removed: Vec<usize> = invocation.invoke_async(conn).await?;
    removed
        .into_iter()
        .map(|position| live.get(position.wrapping_sub(1)).ok_or_else(|| StoreError::Protocol(format!("ban: position {position}"))))
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorrectionReply {
    Corrected(Vec<PeriodStanding>),
    Banned,
    PeriodClosed(String),
    OutOfRange,
}

/// A correction of one user's score on one board.
#[derive(Debug, Clone)]
pub struct ScoreCorrection<'a> {
    pub member: &'a str,
    pub delta: i64,
    /// The board's current periods.
    pub periods: &'a [Period],
    /// Time part of the composite: the corrected score is reached now.
    pub time_part: i64,
}

/// Adds `delta` to the member's score on every period given, with the audit entry, atomically.
pub async fn correct_score(
    conn: &mut Connection,
    keys: &BoardKeys,
    correction: &ScoreCorrection<'_>,
    audit: AuditRecord<'_>,
) -> Result<CorrectionReply, StoreError> {
    let mut invocation = CORRECT_SCORE.key(keys.guard());
    invocation.key(keys.audit());
    for period in correction.periods {
        invocation.key(keys.period(period));
    }
    invocation.arg(correction.member).arg(correction.delta).arg(correction.time_part).arg(audit.entry).arg(audit.keep);
    for period in correction.periods {
        invocation.arg(period.kind.as_str()).arg(&period.id).arg(period.expires_at().unwrap_or(0));
    }
    let (status, body): (String, String) = invocation.invoke_async(conn).await?;
    match status.as_str() {
        "corrected" => serde_json::from_str(&body)
            .map(CorrectionReply::Corrected)
            .map_err(|e| StoreError::Protocol(format!("correct_score: {e}"))),
        "banned" => Ok(CorrectionReply::Banned),
        "period_closed" => Ok(CorrectionReply::PeriodClosed(body)),
        "out_of_range" => Ok(CorrectionReply::OutOfRange),
        other => Err(StoreError::Protocol(format!("correct_score status {other:?}"))),
    }
}
