//! A move's verify step (docs/scaling.md#changing-shards, step 5): every period set of the old
//! layout against the same period's sets of the new, in pages. Each layout holds a member once,
//! in its user's shard, so the two are the same when they hold as many members and every member
//! of the new layout has the same composite in its user's old shard. One page of one set in
//! memory at a time, whatever the board's size; against the invocation's deadline, each period
//! compared recorded in the new layout's first shard (`checked` in its reshard checkpoint), so
//! the next invocation goes on after it (the move is fenced: what was compared stays so). A move
//! that re-encodes the scores compares each old composite at the new scale (`rescale`).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use super::error::RestoreError;
use super::reshard_touched::{Again, Touched};
use crate::domain::config::Board;
use crate::domain::period::Period;
use crate::domain::rescale::Rescale;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Layout};
use crate::redis::period_sets::PeriodSets;
use crate::redis::store::Connection;

/// Members read from a set at once (a new shard's, a frozen board's).
pub(super) const PAGE: isize = 1000;
/// The field of the first new shard's reshard checkpoint naming the last period compared.
pub(super) const CHECKED: &str = "checked";

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
    (sets, pre): (&PeriodSets, Option<&PreChecked>),
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
    let periods = relatives(sets, sources.iter().chain(&targets));
    let mut compared = 0;
    let left = periods.iter().filter(|relative| !closed.contains(relative) && through.as_ref().is_none_or(|through| *relative > through));
    for relative in left {
        if compared > 0 && Utc::now() >= deadline {
            return Ok(Checked { compared, done: false });
        }
        let same = agreeing(board, rescale, relative)?;
        let again = pre.map(|pre| pre.again(relative));
        let found = match &again {
            Some(Again::Members(members)) => differs_in(conn, (source, &sources), (target, &targets), relative, members, same).await?,
            Some(Again::Whole) | None => differs(conn, (source, &sources), (target, &targets), relative, same).await?,
        };
        if let Some(detail) = found {
            // A move that failed its check compares everything again when it is run again.
            let _: () = redis::cmd("HDEL").arg(&checkpoint).arg(CHECKED).query_async(conn).await.map_err(StoreError::from)?;
            return Err(RestoreError::Invalid(format!(
                "reshard of board {:?}: period {relative} {detail} in the old layout and the new: the board stays fenced",
                source.board()
            )));
        }
        // Compared whole or narrowed, it stays so: the board is fenced.
        let _: () = redis::cmd("HSET").arg(&checkpoint).arg(CHECKED).arg(relative).query_async(conn).await.map_err(StoreError::from)?;
        compared += 1;
    }
    Ok(Checked { compared, done: true })
}

/// Whether a composite of period set `relative` in the new layout holds what one in the old
/// held: the same, or its re-encoding (`Rescale::agrees`).
fn agreeing(board: &Board, rescale: Option<&Rescale>, relative: &str) -> Result<impl Fn(f64, f64) -> bool, RestoreError> {
    let period = match BoardKeys::composites_in(relative) {
        Some((_, kind, id)) if rescale.is_some() => Some(super::rescale::period(board, kind, id).map_err(RestoreError::Invalid)?),
        _ => None,
    };
    Ok(move |old: f64, new: f64| match (&period, rescale) {
        (Some(period), Some(rescale)) => rescale.agrees(period, old, new),
        _ => old == new,
    })
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
    let mut differing = None;
    let outside = walk(conn, (source, sources), (target, targets), relative, |member, was, composite| {
        if was.is_some_and(|was| same(was, composite)) {
            return true;
        }
        differing = Some(format!("holds {member:?} at {was:?} and {composite}"));
        false
    })
    .await?;
    Ok(outside.or(differing))
}

/// `differs`, looking only at `members` (each in its user's shard of either layout) once the
/// two layouts hold as many.
async fn differs_in(
    conn: &mut Connection,
    (source, sources): (&Layout, &[BoardKeys]),
    (target, targets): (&Layout, &[BoardKeys]),
    relative: &str,
    members: &BTreeSet<String>,
    same: impl Fn(f64, f64) -> bool,
) -> Result<Option<String>, RestoreError> {
    let (old, new) = (size(conn, sources, relative).await?, size(conn, targets, relative).await?);
    if old != new {
        return Ok(Some(format!("holds {old} and {new} entries")));
    }
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    for page in members.chunks(PAGE as usize) {
        let (was, now) =
            (composites(conn, source, sources, relative, page).await?, composites(conn, target, targets, relative, page).await?);
        for ((member, was), now) in page.iter().zip(was).zip(now) {
            let agree = match (was, now) {
                (Some(was), Some(now)) => same(was, now),
                (was, now) => was.is_none() && now.is_none(),
            };
            if !agree {
                return Ok(Some(format!("holds {member:?} at {was:?} and {now:?}")));
            }
        }
    }
    Ok(None)
}

/// Each of `members`' composite in period `relative`, in its user's shard of `layout`.
async fn composites(
    conn: &mut Connection,
    layout: &Layout,
    shards: &[BoardKeys],
    relative: &str,
    members: &[&str],
) -> Result<Vec<Option<f64>>, RestoreError> {
    let mut found = vec![None; members.len()];
    let indexed: Vec<(usize, &str)> = members.iter().copied().enumerate().collect();
    for (home, group) in layout.by_shard(&indexed, |(_, member)| member) {
        let names: Vec<&str> = group.iter().map(|(_, member)| *member).collect();
        let held: Vec<Option<f64>> =
            redis::cmd("ZMSCORE").arg(shards[home].relative(relative)).arg(&names).query_async(conn).await.map_err(StoreError::from)?;
        for ((at, _), held) in group.iter().zip(held) {
            found[*at] = held;
        }
    }
    Ok(found)
}

/// Visits each member of period `relative` in the new layout, a page at a time, with its
/// composite in its user's old shard and in the new one, until `visit` says stop. A member held
/// outside its user's new shard: its description (no layout holds a member twice then).
async fn walk(
    conn: &mut Connection,
    (source, sources): (&Layout, &[BoardKeys]),
    (target, targets): (&Layout, &[BoardKeys]),
    relative: &str,
    mut visit: impl FnMut(&str, Option<f64>, f64) -> bool,
) -> Result<Option<String>, RestoreError> {
    for (at, shard) in targets.iter().enumerate() {
        let key = shard.relative(relative);
        let mut start = 0;
        loop {
            let page = members_page(conn, &key, start).await?;
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
                let found: Vec<Option<f64>> = redis::cmd("ZMSCORE")
                    .arg(sources[home].relative(relative))
                    .arg(&names)
                    .query_async(conn)
                    .await
                    .map_err(StoreError::from)?;
                for ((member, composite), was) in members.iter().zip(found) {
                    if !visit(member, was, *composite) {
                        return Ok(None);
                    }
                }
            }
            start += PAGE;
        }
    }
    Ok(None)
}

/// Members `start..start + PAGE` of sorted set `key`, with their composites.
pub(super) async fn members_page(conn: &mut Connection, key: &str, start: isize) -> Result<Vec<(String, f64)>, StoreError> {
    Ok(redis::cmd("ZRANGE").arg(key).arg(start).arg(start + PAGE - 1).arg("WITHSCORES").query_async(conn).await?)
}

/// The period sets (relative keys) `sets` holds on `shards`.
fn relatives<'s>(sets: &PeriodSets, shards: impl Iterator<Item = &'s BoardKeys>) -> BTreeSet<String> {
    let mut periods = BTreeSet::new();
    for shard in shards {
        for key in sets.of(shard) {
            if let Some(relative) = shard.relative_of(&key) {
                periods.insert(relative.to_owned());
            }
        }
    }
    periods
}

/// What a move's compare while writes go on found (`pre_check`), and what the lines it moved
/// since wrote: the fenced compare looks only at those (`reshard_touched`).
pub(super) struct PreChecked {
    /// The period sets either layout held then.
    pub periods: BTreeSet<String>,
    /// Members each set held differently in the two layouts then: writes not moved yet.
    pub differing: Touched,
    /// What the lines moved since wrote.
    pub touched: Touched,
}

impl PreChecked {
    /// What of period set `relative` the fenced compare looks at: all of a set the pre-check
    /// did not see, or one a write changed without naming its members.
    fn again(&self, relative: &str) -> Again {
        if !self.periods.contains(relative) {
            return Again::Whole;
        }
        let mut members = BTreeSet::new();
        for noted in [&self.differing, &self.touched] {
            match noted.0.get(relative) {
                Some(Again::Whole) => return Again::Whole,
                Some(Again::Members(named)) => members.extend(named.iter().cloned()),
                None => {}
            }
        }
        Again::Members(members)
    }

    /// Every period set the last step may find (the pre-check's, those written since, and
    /// `carried`), for `PeriodSets::among`.
    pub fn candidates(&self, carried: impl IntoIterator<Item = String>) -> BTreeSet<String> {
        let mut all = self.periods.clone();
        all.extend(self.touched.0.keys().cloned());
        all.extend(carried);
        all
    }
}

/// Compares every period set of `sets` while writes go on (the board not fenced): each member
/// of the new layout against its user's old shard, re-encoded when the move re-encodes. One held
/// differently is noted, not a failure (a write the move has not moved yet); the fenced
/// compare looks at it again. A member outside its user's new shard is a failure: only the
/// move writes the new layout. `None`: the deadline came first (checked between periods).
pub(super) async fn pre_check(
    conn: &mut Connection,
    (source, target, rescale): (&Layout, &Layout, Option<&Rescale>),
    board: &Board,
    sets: &PeriodSets,
    deadline: DateTime<Utc>,
) -> Result<Option<PreChecked>, RestoreError> {
    let (sources, targets) = (source.all(), target.all());
    let periods = relatives(sets, sources.iter().chain(&targets));
    let mut differing = Touched::default();
    for relative in &periods {
        if Utc::now() >= deadline {
            return Ok(None);
        }
        let mut found = Vec::new();
        let same = agreeing(board, rescale, relative)?;
        let outside = walk(conn, (source, &sources), (target, &targets), relative, |member, was, composite| {
            if !was.is_some_and(|was| same(was, composite)) {
                found.push(member.to_owned());
            }
            true
        })
        .await?;
        if let Some(detail) = outside {
            return Err(RestoreError::Invalid(format!(
                "reshard of board {:?}: period {relative} {detail} in the new layout",
                source.board()
            )));
        }
        differing.members(relative, found);
    }
    Ok(Some(PreChecked { periods, differing, touched: Touched::default() }))
}

/// Members of `relative`'s sets over `shards`.
async fn size(conn: &mut Connection, shards: &[BoardKeys], relative: &str) -> Result<u64, StoreError> {
    let mut total = 0;
    for shard in shards {
        total += redis::cmd("ZCARD").arg(shard.relative(relative)).query_async::<u64>(conn).await?;
    }
    Ok(total)
}
