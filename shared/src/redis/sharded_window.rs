//! A window of a board spread over shards at any depth (docs/scaling.md#reads): where a rank
//! falls in each shard, found by counts, and each shard read from there. Entries sharing the
//! composite at that rank are ordered by member id, as one sorted set orders them; however many
//! share it, a shard sends at most `FETCHED_TIES` of them, and past that each shard's part of the
//! tie is searched, not fetched.

use super::error::StoreError;
use super::sharded::{CUTOFF_PROBES, Entry, ShardSet, bounds, composite, counts, each, each_ranks, sort};
use super::store::Connection;

/// Tied members each shard sends in the round that finds the tie: a page landing fewer than this
/// deep in a tie takes no round more. A deeper place in a tie is searched (`ties_before`).
const FETCHED_TIES: u64 = 64;

/// Rounds a search of a tie takes at most: each halves every shard's undecided range (a tie of
/// 2^40 members needs 40); a board written meanwhile may stop it short (a live deep page is
/// not a snapshot across shards anyway).
const TIE_ROUNDS: usize = 64;

/// Where position `rank` (0-based, in rank order over every shard) falls in each shard: how
/// many of its entries are ranked before it. Rounds of `CUTOFF_PROBES` counts narrow the
/// composite of the entry at that position; entries sharing it are ordered by member id, as one
/// sorted set orders them. For boards that take no writes meanwhile (a frozen season).
pub async fn offsets(conn: &Connection, shards: &[ShardSet], rank: u64) -> Result<Vec<u64>, StoreError> {
    let bounds = bounds(conn, shards).await?;
    let sizes: Vec<u64> = bounds.iter().map(|(size, ..)| *size).collect();
    if rank == 0 || rank >= sizes.iter().sum() {
        return Ok(if rank == 0 { vec![0; shards.len()] } else { sizes });
    }
    // Composites are whole numbers (`composite_of`), exact in an f64.
    let mut low = bounds.iter().filter_map(|(_, low, _)| *low).fold(f64::INFINITY, f64::min) as i64;
    let mut high = bounds.iter().filter_map(|(_, _, high)| *high).fold(f64::NEG_INFINITY, f64::max) as i64;
    // At least rank + 1 entries are at or above `low`; fewer above `high`.
    while low < high {
        let step = ((high - low + CUTOFF_PROBES - 1) / CUTOFF_PROBES).max(1);
        let probes: Vec<i64> = (low + 1..=high).step_by(step as usize).collect();
        let (_, at_least) = counts(conn, shards, &[], &probes.iter().map(|p| *p as f64).collect::<Vec<_>>()).await?;
        for (probe, count) in probes.iter().zip(at_least) {
            if count > rank {
                low = *probe;
            } else {
                high = probe - 1;
                break;
            }
        }
    }
    let at = composite(low as f64);
    // Each shard's members above the composite, below it, tied on it, and its greatest tied ids.
    let parts: Vec<(u64, u64, u64, Vec<String>)> = each(conn, shards, |_, shard, pipe| {
        pipe.zcount(&shard.set, format!("({at}"), "+inf").zcount(&shard.set, "-inf", format!("({at}")).zcount(&shard.set, &at, &at);
        pipe.cmd("ZREVRANGEBYSCORE").arg(&shard.set).arg(&at).arg(&at).arg("LIMIT").arg(0).arg(FETCHED_TIES);
    })
    .await?;
    let mut offsets: Vec<u64> = parts.iter().map(|(above, ..)| *above).collect();
    // A write between the rounds (a live board) may have moved an entry above: never below 0.
    let before_ties = rank.saturating_sub(offsets.iter().sum::<u64>());
    let taken = if before_ties <= FETCHED_TIES {
        // The greatest `before_ties` ids of the whole tie are each among their shard's greatest.
        let mut ties: Vec<(&str, usize)> = parts
            .iter()
            .enumerate()
            .flat_map(|(shard, (.., members))| members.iter().map(move |member| (member.as_str(), shard)))
            .collect();
        ties.sort_by(|a, b| b.0.cmp(a.0));
        let mut taken = vec![0; shards.len()];
        for (_, shard) in ties.into_iter().take(before_ties as usize) {
            taken[shard] += 1;
        }
        taken
    } else {
        let tie: Vec<Tie> = parts.iter().map(|(above, below, tied, _)| Tie { above: *above, below: *below, tied: *tied }).collect();
        ties_before(conn, shards, &at, &tie, before_ties).await?
    };
    for (offset, taken) in offsets.iter_mut().zip(taken) {
        *offset += taken;
    }
    Ok(offsets)
}

/// One shard's members around a tied composite: above it, below it and on it.
struct Tie {
    above: u64,
    below: u64,
    tied: u64,
}

/// How many of each shard's tied members are among the `k` greatest ids of the whole tie. Each
/// round reads the middle of each shard's undecided range (its members by index, one request a
/// node) and counts, on every shard, the tied ids greater than each of them (`shard_ranks.lua`,
/// one call a shard): a probe among the `k` decides that at least the members above it in every
/// shard are, one outside decides that at most those are, and each shard's own range halves.
async fn ties_before(conn: &Connection, shards: &[ShardSet], at: &str, tie: &[Tie], k: u64) -> Result<Vec<u64>, StoreError> {
    // Each shard's count among the `k` lies in lo..=hi.
    let (mut lo, mut hi): (Vec<u64>, Vec<u64>) = (vec![0; tie.len()], tie.iter().map(|t| t.tied).collect());
    for _ in 0..TIE_ROUNDS {
        // The middle of each undecided range, by its index in the shard's tie in descending ids.
        let middles: Vec<Option<u64>> = lo.iter().zip(&hi).map(|(lo, hi)| (lo < hi).then(|| lo + (hi - lo) / 2)).collect();
        if middles.iter().all(Option::is_none) {
            break;
        }
        let picked: Vec<Vec<String>> = each(conn, shards, |i, shard, pipe| {
            // Ascending index of the tie's `m`-th greatest id: below the tie, then from its top.
            let index = middles[i].map(|m| (tie[i].below + tie[i].tied - 1 - m) as isize);
            pipe.zrange(&shard.set, index.unwrap_or(1), index.unwrap_or(0));
        })
        .await
        .map(|parts: Vec<(Vec<String>,)>| parts.into_iter().map(|(members,)| members).collect())?;
        let probes: Vec<(usize, u64, String)> = middles
            .iter()
            .zip(picked)
            .enumerate()
            .filter_map(|(i, (middle, members))| Some((i, (*middle)?, members.into_iter().next()?)))
            .collect();
        if probes.is_empty() {
            break;
        }
        // Per shard, per probe: the shard's members ranked before it (above the tie, then ids greater).
        let replies: Vec<(Vec<u64>, Vec<u64>)> = each_ranks(conn, shards, "counts", |call| {
            call.arg(probes.len());
            for (_, _, member) in &probes {
                call.arg(member.as_str()).arg(at);
            }
        })
        .await?;
        for (p, (shard, middle, _)) in probes.iter().enumerate() {
            let greater: Vec<u64> =
                replies.iter().zip(tie).map(|((before, _), t)| before.get(p).copied().unwrap_or(0).saturating_sub(t.above)).collect();
            let inside = greater.iter().sum::<u64>() < k;
            for (j, count) in greater.into_iter().enumerate() {
                // The probe's own shard: the members above it, then (inside) the probe itself.
                let count = if j == *shard { middle + u64::from(inside) } else { count };
                if inside {
                    lo[j] = lo[j].max(count.min(hi[j]));
                } else {
                    hi[j] = hi[j].min(count.max(lo[j]));
                }
            }
        }
    }
    Ok(lo)
}

/// `count` entries from position `rank` (0-based) over every shard, in rank order, each shard
/// read from its own offset (`offsets`): no shard reads what comes before the window.
pub async fn window(conn: &Connection, shards: &[ShardSet], rank: u64, count: u64) -> Result<Vec<Entry>, StoreError> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let offsets = offsets(conn, shards, rank).await?;
    let parts: Vec<(Vec<Entry>,)> = each(conn, shards, |i, shard, pipe| {
        pipe.zrevrange_withscores(&shard.set, offsets[i] as isize, (offsets[i] + count - 1) as isize);
    })
    .await?;
    let mut merged: Vec<Entry> = parts.into_iter().flat_map(|(entries,)| entries).collect();
    sort(&mut merged);
    merged.truncate(count as usize);
    Ok(merged)
}
