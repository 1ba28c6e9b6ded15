//! Reads of a board spread over shards (docs/scaling.md): each shard's sorted set answers its
//! part in one `MULTI` or one script call (a snapshot of that shard; counts ranked before a
//! member search its tie rather than fetch it), one pipeline a node holding shards, the nodes
//! in parallel (`nodes`; standalone, one pipeline in all). Exact against
//! one sorted set holding every member: a composite already holds the tie part, so counts of
//! the shards add up, and equal composites order by member id as `ZREVRANGE` orders them.
//! There is no snapshot across shards: a read while writes go on may see one shard before a
//! write and another after it.

use futures::future::try_join_all;
use redis::{FromRedisValue, Pipeline, Value};

use super::error::StoreError;
use super::nodes::Part;
use super::scripts::SHARD_RANKS;
use super::settings::ReplicaWait;
use super::store::{Connection, ScriptCall};
use crate::domain::distribution::Histogram;
use crate::domain::tiebreak::Scale;

/// One shard's sorted set of a period, with the guard whose fence a read honours.
#[derive(Debug, Clone)]
pub struct ShardSet {
    pub set: String,
    pub guard: Option<String>,
    /// The guard's record of `set` (`kept|<kind>:<id>`) and the function's clock (ms): a shard
    /// whose set is missing before the record's expiry answers as lost (docs/journal.md#losses),
    /// as the one slot's read scripts do. `None`: the guard's fence alone (a frozen set).
    pub kept: Option<(String, i64)>,
    /// The shard's guard and its `closed|season:<id>` field when `set` is a season's live set,
    /// journaled or not: a read of a season the archive has closed answers `Closed`
    /// (docs/archival.md#live-routes), from the same snapshot as the set.
    pub closed: Option<(String, String)>,
}

/// An entry as stored: member and composite.
pub type Entry = (String, f64);

/// Whether `a` is ranked before `b` on one sorted set holding both (`ZREVRANGE` order: higher
/// composites first, equal composites by member id, greater first).
pub fn before(a: (&str, f64), b: (&str, f64)) -> bool {
    a.1 > b.1 || (a.1 == b.1 && a.0 > b.0)
}

/// Sorts entries in rank order (see `before`).
pub fn sort(entries: &mut [Entry]) {
    entries.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
}

pub(super) fn composite(c: f64) -> String {
    format!("{c:.0}")
}

/// Runs `build`'s commands on every shard, each shard's in one `MULTI` after its fence check
/// (a board being restored answers `Restoring`, as the read scripts do), one pipeline a node
/// (`nodes`); each shard's replies, the fence's left out, read as one `T`.
pub(super) async fn each<T: FromRedisValue + Send>(
    conn: &Connection,
    shards: &[ShardSet],
    build: impl Fn(usize, &ShardSet, &mut Pipeline),
) -> Result<Vec<T>, StoreError> {
    let protocol = |e: redis::ParsingError| StoreError::Protocol(format!("sharded read: {e}"));
    let pipes: Vec<Pipeline> = shards
        .iter()
        .enumerate()
        .map(|(i, shard)| {
            let mut pipe = redis::pipe();
            pipe.atomic();
            match (&shard.guard, &shard.kept) {
                (Some(guard), Some((field, _))) => {
                    for command in crate::redis::catalog::kept_state(guard, field, &shard.set) {
                        pipe.add_command(command);
                    }
                }
                (Some(guard), None) => {
                    pipe.add_command(crate::redis::catalog::guard_state(guard));
                }
                (None, _) => {}
            }
            if let Some((guard, field)) = &shard.closed {
                pipe.hexists(guard, field);
            }
            build(i, shard, &mut pipe);
            pipe
        })
        .collect();
    let parts: Vec<(&str, Part)> = shards.iter().zip(&pipes).map(|(shard, pipe)| (shard.set.as_str(), Part::Atomic(pipe))).collect();
    let answers = conn.per_node(&parts).await;
    try_join_all(pipes.iter().zip(shards).zip(answers).map(|((pipe, shard), answer)| {
        let mut conn = conn.clone();
        async move {
            let mut values: Vec<Value> = match answer {
                Some(Value::Array(values)) => values,
                // Not answered in its node's pipeline: on its own, redirects followed.
                _ => pipe.query_async(&mut conn).await?,
            };
            match (&shard.guard, &shard.kept) {
                (Some(_), Some((_, now_ms))) if values.len() >= 2 => {
                    let state = values.remove(0);
                    crate::redis::catalog::lost_for_reads(state, values.remove(0), *now_ms)?;
                }
                (Some(_), None) if !values.is_empty() => crate::redis::catalog::restoring_for_reads(values.remove(0))?,
                (Some(_), _) => return Err(StoreError::Protocol("sharded read: no guard's state".into())),
                (None, _) => {}
            }
            if shard.closed.is_some() {
                if values.is_empty() {
                    return Err(StoreError::Protocol("sharded read: no season's close".into()));
                }
                if bool::from_redis_value(values.remove(0)).map_err(protocol)? {
                    return Err(StoreError::Closed);
                }
            }
            T::from_redis_value(Value::Array(values)).map_err(protocol)
        }
    }))
    .await
}

/// Every shard's size and its first `count` entries in rank order.
pub async fn tops(conn: &Connection, shards: &[ShardSet], count: u64) -> Result<Vec<(u64, Vec<Entry>)>, StoreError> {
    if count == 0 {
        // ZREVRANGE 0 -1 would be the whole board.
        return Err(StoreError::Protocol("sharded top of no entries".into()));
    }
    each(conn, shards, |_, shard, pipe| {
        pipe.zcard(&shard.set).zrevrange_withscores(&shard.set, 0, count as isize - 1);
    })
    .await
}

/// Every shard's size.
pub async fn sizes(conn: &Connection, shards: &[ShardSet]) -> Result<Vec<u64>, StoreError> {
    let replies: Vec<(u64,)> = each(conn, shards, |_, shard, pipe| {
        pipe.zcard(&shard.set);
    })
    .await?;
    Ok(replies.into_iter().map(|(size,)| size).collect())
}

/// Every shard's size and its lowest and highest composites (`None` on an empty shard).
pub async fn bounds(conn: &Connection, shards: &[ShardSet]) -> Result<Vec<(u64, Option<f64>, Option<f64>)>, StoreError> {
    let replies: Vec<(u64, Vec<Entry>, Vec<Entry>)> = each(conn, shards, |_, shard, pipe| {
        pipe.zcard(&shard.set).zrange_withscores(&shard.set, 0, 0).zrange_withscores(&shard.set, -1, -1);
    })
    .await?;
    Ok(replies.into_iter().map(|(size, low, high)| (size, low.first().map(|e| e.1), high.first().map(|e| e.1))).collect())
}

/// What the shards hold around a probe `(member, composite)`: for each, members ranked before
/// it, members with composites strictly below `below_under`, the `width` nearest entries
/// ranked before it and after it, and its size.
pub struct Around {
    pub total: u64,
    pub ranked_before: u64,
    pub below: u64,
    pub nearest: Vec<Entry>,
    /// Each shard's part above the probe, when a span was given (competition ranks).
    pub above: Vec<ShardAbove>,
    /// The member's composite changed since the probe (written meanwhile): the counts above are
    /// of another standing than the member holds now.
    pub moved: bool,
    /// Each shard's farthest entry above the probe and below it, when it answered as many as
    /// asked on that side (it may hold more beyond).
    pub ends: Vec<(Option<Entry>, Option<Entry>)>,
}

/// One shard above a probe: its members ranked before it, the nearest of them (nearest first),
/// whether it holds more than those, and then the members with strictly more points than the
/// farthest of them (the value above the farthest's).
#[derive(Debug, Clone, PartialEq)]
pub struct ShardAbove {
    pub ranked_before: u64,
    pub nearest: Vec<Entry>,
    pub edge: Option<u64>,
}

/// Runs `shard_ranks.lua` on every shard, with the shard's set and guard as its keys and
/// `args` as its arguments: one call a shard, its fence checked in it, one pipeline a node.
pub(super) async fn each_ranks<T: FromRedisValue + Send>(
    conn: &Connection,
    shards: &[ShardSet],
    mode: &str,
    args: impl Fn(&mut ScriptCall<'_>),
) -> Result<Vec<T>, StoreError> {
    let protocol = |e: redis::ParsingError| StoreError::Protocol(format!("sharded read: {e}"));
    let calls: Vec<ScriptCall> = shards
        .iter()
        .map(|shard| {
            let mut call = ScriptCall::new(&SHARD_RANKS);
            call.key(&shard.set);
            // The clock for a set its guard records (`read_fence`), else the guard's fence alone;
            // without a journal, the guard for a season's close alone (`read_fence`'s 0).
            let now = match (&shard.guard, &shard.kept, &shard.closed) {
                (Some(guard), kept, _) => {
                    call.key(guard);
                    kept.as_ref().map_or(String::new(), |(_, now_ms)| now_ms.to_string())
                }
                (None, _, Some((guard, _))) => {
                    call.key(guard);
                    "0".to_owned()
                }
                (None, _, None) => String::new(),
            };
            call.arg(mode).arg(now);
            args(&mut call);
            call
        })
        .collect();
    let parts: Vec<(&str, Part)> = shards.iter().zip(&calls).map(|(shard, call)| (shard.set.as_str(), Part::Script(call))).collect();
    let answers = conn.per_node(&parts).await;
    try_join_all(calls.iter().zip(answers).map(|(call, answer)| {
        let mut conn = conn.clone();
        async move {
            match answer {
                Some(value) => T::from_redis_value(value).map_err(protocol),
                // Not answered in its node's pipeline (a fence, a script to load, a redirect).
                None => conn.run_script(call, ReplicaWait::NONE).await,
            }
        }
    }))
    .await
}

/// The neighbourhood of `(member, composite)` over every shard (see `Around`): one call a shard
/// (`shard_ranks.lua`), whatever the ties.
pub async fn around(
    conn: &Connection,
    shards: &[ShardSet],
    member: &str,
    value_floor: f64,
    at: f64,
    (width, span): (u64, Option<i64>),
) -> Result<Around, StoreError> {
    type Reply = (u64, u64, u64, Vec<Entry>, Vec<Entry>, Option<f64>, Option<u64>);
    let replies: Vec<Reply> = each_ranks(conn, shards, "around", |call| {
        call.arg(member).arg(composite(at)).arg(composite(value_floor)).arg(width);
        call.arg(span.map_or(String::new(), |span| span.to_string()));
    })
    .await?;
    let mut out = Around { total: 0, ranked_before: 0, below: 0, nearest: Vec::new(), above: Vec::new(), moved: true, ends: Vec::new() };
    for (total, before, under, above, below, held, edge) in replies {
        let full = |side: &[Entry]| width > 0 && side.len() as u64 == width;
        // Above: nearest first; below: farthest first (ZRANGE order).
        out.ends.push((above.last().filter(|_| full(&above)).cloned(), below.first().filter(|_| full(&below)).cloned()));
        if held == Some(at) {
            out.moved = false;
        }
        out.total += total;
        out.below += under;
        out.ranked_before += before;
        if span.is_some() {
            let nearest: Vec<Entry> = above.iter().filter(|(other, _)| other != member).cloned().collect();
            // The member among them (written meanwhile): the edge was counted past it, not past
            // the farthest left; counted from the shard's members ranked before instead.
            let edge = edge.filter(|_| nearest.len() == above.len());
            out.above.push(ShardAbove { ranked_before: before, nearest, edge });
        }
        // Written meanwhile, the member may show among its own shard's neighbours too.
        out.nearest.extend(above.into_iter().chain(below).filter(|(other, _)| other != member));
    }
    Ok(out)
}

/// A keyset page over every shard: the board's size, the members ranked at or before the
/// cursor's place `(member, composite)`, and each shard's next `limit` entries after it (the
/// page is the first `limit` of them merged). One call a shard (`shard_ranks.lua`).
pub async fn after(
    conn: &Connection,
    shards: &[ShardSet],
    member: &str,
    at: f64,
    limit: u64,
) -> Result<(u64, u64, Vec<Entry>), StoreError> {
    let replies: Vec<(u64, u64, Vec<Entry>)> = each_ranks(conn, shards, "after", |call| {
        call.arg(member).arg(composite(at)).arg(limit);
    })
    .await?;
    let mut out = (0, 0, Vec::new());
    for (total, before, entries) in replies {
        out.0 += total;
        out.1 += before;
        out.2.extend(entries);
    }
    Ok(out)
}

/// Each shard's size and the composites of `members[i]` on shard `home[i]` (`None`: absent).
pub async fn scores(
    conn: &Connection,
    shards: &[ShardSet],
    members: &[&str],
    home: &[usize],
) -> Result<(u64, Vec<Option<f64>>), StoreError> {
    let replies: Vec<(u64, Vec<Option<f64>>)> = each(conn, shards, |i, shard, pipe| {
        pipe.zcard(&shard.set);
        let mine: Vec<&str> = members.iter().zip(home).filter(|(_, h)| **h == i).map(|(m, _)| *m).collect();
        // ZMSCORE needs a member: an empty list asks for none ("").
        pipe.cmd("ZMSCORE").arg(&shard.set).arg(if mine.is_empty() { vec![""] } else { mine });
    })
    .await?;
    let mut found = vec![None; members.len()];
    let mut total = 0;
    for (i, (size, composites)) in replies.into_iter().enumerate() {
        total += size;
        let mut composites = composites.into_iter();
        for (slot, _) in found.iter_mut().zip(home).filter(|(_, h)| **h == i) {
            *slot = composites.next().flatten();
        }
    }
    Ok((total, found))
}

/// For each probe `(member, composite)`, the members of every shard ranked before it; and for
/// each floor, the members with a composite at or above it (strictly more points than the
/// value below the floor). One call a shard (`shard_ranks.lua`), whatever the ties.
pub async fn counts(
    conn: &Connection,
    shards: &[ShardSet],
    probes: &[(&str, f64)],
    floors: &[f64],
) -> Result<(Vec<u64>, Vec<u64>), StoreError> {
    let replies: Vec<(Vec<u64>, Vec<u64>)> = each_ranks(conn, shards, "counts", |call| {
        call.arg(probes.len());
        for (member, c) in probes {
            call.arg(*member).arg(composite(*c));
        }
        for floor in floors {
            call.arg(composite(*floor));
        }
    })
    .await?;
    let mut before = vec![0; probes.len()];
    let mut above = vec![0; floors.len()];
    for (shard_before, at_least) in replies {
        if shard_before.len() != probes.len() || at_least.len() != floors.len() {
            return Err(StoreError::Protocol("sharded counts: reply length".into()));
        }
        for (total, count) in before.iter_mut().zip(shard_before) {
            *total += count;
        }
        for (total, count) in above.iter_mut().zip(at_least) {
            *total += count;
        }
    }
    Ok((before, above))
}

fn value(scale: &Scale, composite: f64) -> i64 {
    (composite / scale.span as f64).floor() as i64
}

/// Refinements a cut-off search asks for at once: each round narrows every share's range of
/// values to a 64th.
pub(super) const CUTOFF_PROBES: i64 = 64;

/// The board's histogram (as `read_distribution.lua` gives of one set): sizes and ends, then
/// the buckets' counts, then rounds narrowing each cut-off's value until it is exact.
pub async fn distribution(
    conn: &Connection,
    sets: &[ShardSet],
    scale: &Scale,
    buckets: u64,
    shares: &[u32],
) -> Result<Histogram, StoreError> {
    let bounds = bounds(conn, sets).await?;
    let total: u64 = bounds.iter().map(|(size, ..)| size).sum();
    let lowest = bounds.iter().filter_map(|(_, low, _)| low.map(|c| value(scale, c))).min();
    let highest = bounds.iter().filter_map(|(_, _, high)| high.map(|c| value(scale, c))).max();
    let (Some(lowest), Some(highest)) = (lowest, highest) else {
        return Ok(Histogram { total: 0, lowest: 0, highest: 0, width: 0, counts: Vec::new(), cutoffs: Vec::new() });
    };
    let wanted = buckets.max(1) as i64;
    let width = (highest - lowest + wanted) / wanted;
    let edges: Vec<i64> = (lowest..=highest).step_by(width as usize).chain([highest + 1]).collect();
    let floor = |v: i64| (v * scale.span) as f64;
    let (_, at_least) = counts(conn, sets, &[], &edges.iter().map(|v| floor(*v)).collect::<Vec<_>>()).await?;
    let bucket_counts = at_least.windows(2).map(|pair| pair[0] - pair[1]).collect();
    // Each share's rank, and the values [low, high] known to hold the member at that rank:
    // members with at least `low` points reach the rank, with more than `high` do not.
    let ranks: Vec<u64> = shares.iter().map(|p| (total * u64::from(*p)).div_ceil(100).max(1)).collect();
    let mut ranges: Vec<(i64, i64)> = vec![(lowest, highest); ranks.len()];
    while ranges.iter().any(|(low, high)| low < high) {
        let steps: Vec<Vec<i64>> = ranges
            .iter()
            .map(|&(low, high)| {
                let step = ((high - low + 1) + CUTOFF_PROBES - 1) / CUTOFF_PROBES;
                if low < high { (low + 1..=high).step_by(step.max(1) as usize).collect() } else { Vec::new() }
            })
            .collect();
        let floors: Vec<f64> = steps.iter().flatten().map(|v| floor(*v)).collect();
        let (_, reached) = counts(conn, sets, &[], &floors).await?;
        let mut reached = reached.into_iter();
        for ((range, rank), probes) in ranges.iter_mut().zip(&ranks).zip(&steps) {
            let counted: Vec<(i64, u64)> = probes.iter().map(|v| (*v, reached.next().unwrap_or(0))).collect();
            // The highest probe still reaching the rank raises `low`; the first above it caps `high`.
            for (v, count) in counted {
                if count >= *rank {
                    range.0 = v;
                } else {
                    range.1 = range.1.min(v - 1);
                    break;
                }
            }
        }
    }
    Ok(Histogram { total, lowest, highest, width, counts: bucket_counts, cutoffs: ranges.into_iter().map(|(low, _)| low).collect() })
}
