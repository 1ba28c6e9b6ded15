//! A move's verify step (docs/scaling.md#changing-shards, step 5): every period set of the old
//! layout against the same period's sets of the new, in pages. Each layout holds a member once,
//! in its user's shard, so the two are the same when they hold as many members and every member
//! of the new layout has the same composite in its user's old shard. One page of one set in
//! memory at a time, whatever the board's size.

use std::collections::BTreeMap;

use super::restore::RestoreError;
use crate::domain::period::Period;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Layout};
use crate::redis::store::Connection;

/// Members read from a new shard's set at once.
const PAGE: isize = 1000;

/// Compares every period either layout holds but the `carried` ones (closed seasons, carried
/// as the old layout holds them, not by their lines). The count compared; a difference stops
/// the move, the board still fenced.
pub(super) async fn compare(conn: &mut Connection, source: &Layout, target: &Layout, carried: &[Period]) -> Result<usize, RestoreError> {
    let (sources, targets) = (source.all(), target.all());
    let closed: Vec<String> = sources.first().map_or_else(Vec::new, |first| {
        carried.iter().filter_map(|period| first.relative_of(&first.period(period)).map(str::to_owned)).collect()
    });
    // Both layouts' periods: one the new layout holds and the old does not (a season whose set
    // the moved lines brought back after its freeze) differs as much as a lost one.
    let mut periods: BTreeMap<String, ()> = BTreeMap::new();
    for shard in sources.iter().chain(&targets) {
        for key in conn.scan_slot_of(&shard.guard(), &shard.period_pattern()).await? {
            if let Some(relative) = shard.relative_of(&key) {
                periods.insert(relative.to_owned(), ());
            }
        }
    }
    for relative in periods.keys().filter(|relative| !closed.contains(relative)) {
        let differs = |detail: String| {
            RestoreError::Invalid(format!(
                "reshard of board {:?}: period {relative} {detail} in the old layout and the new: the board stays fenced",
                source.board()
            ))
        };
        let (old, new) = (size(conn, &sources, relative).await?, size(conn, &targets, relative).await?);
        if old != new {
            return Err(differs(format!("holds {old} and {new} entries")));
        }
        for shard in &targets {
            let key = shard.relative(relative);
            let mut start = 0;
            loop {
                let page: Vec<(String, f64)> = redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(start)
                    .arg(start + PAGE - 1)
                    .arg("WITHSCORES")
                    .query_async(conn)
                    .await
                    .map_err(StoreError::from)?;
                if page.is_empty() {
                    break;
                }
                for (home, members) in source.by_shard(&page, |(member, _)| member.as_str()) {
                    let names: Vec<&str> = members.iter().map(|(member, _)| member.as_str()).collect();
                    let found: Vec<Option<f64>> = redis::cmd("ZMSCORE")
                        .arg(sources[home].relative(relative))
                        .arg(&names)
                        .query_async(conn)
                        .await
                        .map_err(StoreError::from)?;
                    if let Some(((member, composite), was)) =
                        members.iter().zip(&found).find(|((_, composite), was)| **was != Some(*composite))
                    {
                        return Err(differs(format!("holds {member:?} at {was:?} and {composite}")));
                    }
                }
                start += PAGE;
            }
        }
    }
    Ok(periods.len())
}

/// Members of `relative`'s sets over `shards`.
async fn size(conn: &mut Connection, shards: &[BoardKeys], relative: &str) -> Result<u64, StoreError> {
    let mut total = 0;
    for shard in shards {
        total += redis::cmd("ZCARD").arg(shard.relative(relative)).query_async::<u64>(conn).await?;
    }
    Ok(total)
}
