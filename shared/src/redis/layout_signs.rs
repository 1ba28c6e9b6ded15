//! What a board's keys show of it while its layout is probed (`layout::probe`): whether a
//! layout's guard is a new board's, and whether its one slot holds, or its guard names, period
//! sets (a board with scores from before scales were recorded).

use chrono::{DateTime, Utc};
use redis::aio::ConnectionLike;

use super::error::StoreError;
use super::keys::BoardKeys;
use crate::domain::config::Board;
use crate::domain::guard;
use crate::domain::period::Period;

/// Whether `keys`'s guard is born a new board's (docs/journal.md#fence): not a move's target.
pub(super) async fn is_born(conn: &mut (impl ConnectionLike + Send), keys: &BoardKeys) -> Result<bool, StoreError> {
    let (born, target): (Option<String>, Option<String>) =
        redis::cmd("HMGET").arg(keys.guard()).arg(guard::BORN).arg(guard::TARGET).query_async(conn).await.map_err(StoreError::from)?;
    Ok(born.is_some() && target.is_none())
}

/// Whether the board's one slot holds a period set, live or frozen, of a period still kept
/// (each kind's periods back to its retention, `PeriodKind::retention`): one `EXISTS`.
pub(crate) async fn holds_periods(
    conn: &mut (impl ConnectionLike + Send),
    keys: &BoardKeys,
    board: &Board,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let mut held = Vec::new();
    for kind in &board.periods {
        let current = Period::containing(*kind, now, board.timezone);
        let kept = |period: &Period| match (period.end, kind.retention()) {
            (Some(end), Some(retention)) => end.with_timezone(&Utc) + retention > now,
            _ => true,
        };
        for period in std::iter::once(current.clone()).chain(current.before()).take(40).take_while(kept) {
            held.extend([keys.period(&period), keys.frozen(&period)]);
        }
    }
    let found: u64 = redis::cmd("EXISTS").arg(&held).query_async(conn).await.map_err(StoreError::from)?;
    Ok(found > 0)
}

/// Whether the board's guard names a period set it held, live, frozen or released (a
/// journaled board records each as it is created: docs/journal.md#losses): an `HSCAN` of the
/// guard (its bans and records), made only while a score board configured with a `max_score`
/// has no scale record and no score in its current periods: by each read of such a board (a
/// new one, until its first write records the scale) and by that first write.
pub(super) async fn held_sets(conn: &mut (impl ConnectionLike + Send), keys: &BoardKeys) -> Result<bool, StoreError> {
    let mut cursor = 0u64;
    loop {
        let (next, pairs): (u64, Vec<String>) =
            redis::cmd("HSCAN").arg(keys.guard()).arg(cursor).arg("COUNT").arg(1000).query_async(conn).await.map_err(StoreError::from)?;
        if pairs.iter().step_by(2).any(|field| [guard::KEPT, guard::CLOSED, guard::RELEASED].iter().any(|p| field.starts_with(p))) {
            return Ok(true);
        }
        if next == 0 {
            return Ok(false);
        }
        cursor = next;
    }
}
