//! A move's verify step (docs/scaling.md#changing-shards, step 5): every period set of the old
//! layout against the same period's sets of the new, in pages. Each layout holds a member once,
//! in its user's shard, so the two are the same when they hold as many members and every member
//! of the new layout has the same composite in its user's old shard. One page of one set in
//! memory at a time, whatever the board's size; against the invocation's deadline, each period
//! compared recorded in the new layout's first shard (`checked` in its reshard checkpoint), so
//! the next invocation goes on after it (the move is fenced: what was compared stays so). A move
//! that re-encodes the scores compares each old composite at the new scale (`rescale`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::restore::RestoreError;
use crate::domain::config::Board;
use crate::domain::period::Period;
use crate::domain::rescale::Rescale;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Layout};
use crate::redis::period_sets::PeriodSets;
use crate::redis::store::Connection;

/// Members read from a new shard's set at once.
const PAGE: isize = 1000;
/// The field of the first new shard's reshard checkpoint naming the last period compared.
const CHECKED: &str = "checked";

/// How far a compare got.
pub(super) struct Checked {
    /// Periods compared by this call.
    pub compared: usize,
    /// Every period compared, by this call or those before it.
    pub done: bool,
}

/// Compares every period either layout holds but the `carried` ones (closed seasons, carried
/// as the old layout holds them, not by their lines), after those an earlier call compared,
/// until done or `deadline` (one period at least). A difference stops the move, the board still
/// fenced.
pub(super) async fn compare(
    conn: &mut Connection,
    (source, target, rescale): (&Layout, &Layout, Option<&Rescale>),
    board: &Board,
    carried: &[Period],
    sets: &PeriodSets,
    deadline: DateTime<Utc>,
) -> Result<Checked, RestoreError> {
    let (sources, targets) = (source.all(), target.all());
    let checkpoint = targets[0].reshard_checkpoint();
    let through: Option<String> = redis::cmd("HGET").arg(&checkpoint).arg(CHECKED).query_async(conn).await.map_err(StoreError::from)?;
    let closed: Vec<String> = sources.first().map_or_else(Vec::new, |first| {
        carried.iter().filter_map(|period| first.relative_of(&first.period(period)).map(str::to_owned)).collect()
    });
    // Both layouts' periods: one the new layout holds and the old does not (a season whose set
    // the moved lines brought back after its freeze) differs as much as a lost one.
    let mut periods: BTreeMap<String, ()> = BTreeMap::new();
    for shard in sources.iter().chain(&targets) {
        for key in sets.of(shard) {
            if let Some(relative) = shard.relative_of(&key) {
                periods.insert(relative.to_owned(), ());
            }
        }
    }
    let mut compared = 0;
    let left = periods.keys().filter(|relative| !closed.contains(relative) && through.as_ref().is_none_or(|through| *relative > through));
    for relative in left {
        if compared > 0 && Utc::now() >= deadline {
            return Ok(Checked { compared, done: false });
        }
        let period = match BoardKeys::composites_in(relative) {
            Some((_, kind, id)) if rescale.is_some() => Some(super::rescale::period(board, kind, id).map_err(RestoreError::Invalid)?),
            _ => None,
        };
        let same = |old: f64, new: f64| match (&period, rescale) {
            (Some(period), Some(rescale)) => rescale.agrees(period, old, new),
            _ => old == new,
        };
        if let Some(detail) = differs(conn, (source, &sources), (target, &targets), relative, same).await? {
            // A move that failed its check compares everything again when it is run again.
            let _: () = redis::cmd("HDEL").arg(&checkpoint).arg(CHECKED).query_async(conn).await.map_err(StoreError::from)?;
            return Err(RestoreError::Invalid(format!(
                "reshard of board {:?}: period {relative} {detail} in the old layout and the new: the board stays fenced",
                source.board()
            )));
        }
        let _: () = redis::cmd("HSET").arg(&checkpoint).arg(CHECKED).arg(relative).query_async(conn).await.map_err(StoreError::from)?;
        compared += 1;
    }
    Ok(Checked { compared, done: true })
}

/// How period `relative` differs between the layouts, if it does.
async fn differs(
    conn: &mut Connection,
    (source, sources): (&Layout, &[BoardKeys]),
    (target, targets): (&Layout, &[BoardKeys]),
    relative: &str,
    same: impl Fn(f64, f64) -> bool,
) -> Result<Option<String>, RestoreError> {
    let (old, new) = (size(conn, sources, relative).await?, size(conn, targets, relative).await?);
    if old != new {
        return Ok(Some(format!("holds {old} and {new} entries")));
    }
    for (at, shard) in targets.iter().enumerate() {
        let key = shard.relative(relative);
        let mut start = 0;
        loop {
            let page: Vec<(String, f64)> =
                redis::cmd("ZRANGE").arg(&key).arg(start).arg(start + PAGE - 1).arg("WITHSCORES").query_async(conn).await?;
            if page.is_empty() {
                break;
            }
            // Each member in its user's shard: none is held twice, so equal counts and equal
            // composites make equal sets.
            if let Some((member, _)) = page.iter().find(|(member, _)| target.shard_of(member) != at) {
                return Ok(Some(format!("holds {member:?} outside its user's shard")));
            }
            for (home, members) in source.by_shard(&page, |(member, _)| member.as_str()) {
                let names: Vec<&str> = members.iter().map(|(member, _)| member.as_str()).collect();
                let found: Vec<Option<f64>> =
                    redis::cmd("ZMSCORE").arg(sources[home].relative(relative)).arg(&names).query_async(conn).await?;
                let differing = members.iter().zip(&found).find(|((_, composite), was)| !was.is_some_and(|was| same(was, *composite)));
                if let Some(((member, composite), was)) = differing {
                    return Ok(Some(format!("holds {member:?} at {was:?} and {composite}")));
                }
            }
            start += PAGE;
        }
    }
    Ok(None)
}

/// Members of `relative`'s sets over `shards`.
async fn size(conn: &mut Connection, shards: &[BoardKeys], relative: &str) -> Result<u64, StoreError> {
    let mut total = 0;
    for shard in shards {
        total += redis::cmd("ZCARD").arg(shard.relative(relative)).query_async::<u64>(conn).await?;
    }
    Ok(total)
}
