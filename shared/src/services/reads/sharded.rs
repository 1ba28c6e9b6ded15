//! Reads of a board spread over shards (docs/scaling.md): the same windows and places the read
//! scripts give of one sorted set, merged from every shard's part (`redis::sharded`).

use crate::domain::config::Board;
use crate::domain::guard;
use crate::domain::paging::RankCursor;
use crate::domain::period::Period;
use crate::domain::tiebreak::Scale;
use crate::redis::error::StoreError;
use crate::redis::keys::{Keys, Layout};
use crate::redis::scripts::{MemberPlace, PeriodStanding, RawEntry, RawWindow};
use crate::redis::sharded::{self, Around, Entry, ShardAbove, ShardSet};
use crate::redis::sharded_window;
use crate::redis::store::Connection;

/// Every sorted set of `period` in `layout` (the board's recorded one), with its guard when
/// reads honour fences, and with `now_ms` (the function's clock) a set found missing while its
/// guard records it is refused as lost (docs/journal.md#losses) and a season the archive has
/// closed as closed (docs/archival.md#live-routes).
pub fn sets(keys: &Keys, layout: &Layout, period: &Period, now_ms: Option<i64>) -> Vec<ShardSet> {
    let journaled = keys.journal_on();
    layout
        .all()
        .into_iter()
        .map(|shard| {
            let set = shard.period(period);
            let kept = now_ms.filter(|_| journaled).and_then(|now| shard.kept_field(&set).map(|field| (field, now)));
            let closed = now_ms.and(guard::read_closed_field(period)).map(|field| (shard.guard(), field));
            ShardSet { set, guard: journaled.then(|| shard.guard()), kept, closed }
        })
        .collect()
}

fn value(scale: &Scale, composite: f64) -> i64 {
    (composite / scale.span as f64).floor() as i64
}

/// The lowest composite of the value above `composite`'s: members at or above it have
/// strictly more points.
fn next_value_floor(scale: &Scale, composite: f64) -> f64 {
    ((value(scale, composite) + 1) * scale.span) as f64
}

/// Entries in rank order from `start`, with `above` (members with strictly more points) for
/// each: `first_above` for the first, then as `read_board.lua` counts it.
fn ranked(scale: &Scale, window: Vec<Entry>, start: u64, first_above: u64) -> Vec<RawEntry> {
    let mut previous: Option<i64> = None;
    let mut above = first_above;
    window
        .into_iter()
        .enumerate()
        .map(|(i, (member, composite))| {
            let points = value(scale, composite);
            if previous.is_some_and(|p| p != points) {
                above = start + i as u64;
            }
            previous = Some(points);
            RawEntry { member, composite, above }
        })
        .collect()
}

/// Pages ending within this many entries read each shard's first `offset + limit` in one round;
/// deeper ones find where they start in each shard first (`sharded_window::window`).
const PREFIX_PAGE: u64 = 1_000;

/// How many entries of each of `shards` a prefix page of `need` reads first: `need` spread
/// evenly, twice over, and a few more. Members are spread over shards by a hash of their ids,
/// so a shard holds more than this of the prefix rarely (binomially: about one top-100 read
/// in 4,000 over 12 shards); then `page` reads that shard again.
fn first_round(need: u64, shards: usize) -> u64 {
    match shards as u64 {
        0 | 1 => need,
        n => need.min(2 * need.div_ceil(n) + 4),
    }
}

/// How many neighbours on each side of a member each of `shards` is asked for first: an even
/// share of `around` and three more. A window needs `around` a side unless shifted at the
/// board's end, and a shard is read again (`short`) only when all it gave on a side lie within
/// them: for 5 around over 12 shards, a shard holding all of the 4 nearest on a side, about one
/// read in 900 (binomially; with two more, one in 20 measured), and about one in 20 within
/// `around` of either end of the board, where the window holds up to `2 · around` on a side. Each entry a shard returns costs
/// about a microsecond end to end, so asking every shard for the whole window cost more.
fn side_share(around: u64, shards: usize) -> u64 {
    (around.div_ceil(shards.max(1) as u64) + 3).min(2 * around + 1)
}

/// Every shard's entries read, in rank order.
fn merge(tops: &[(u64, Vec<Entry>)]) -> Vec<Entry> {
    let mut merged: Vec<Entry> = tops.iter().flat_map(|(_, entries)| entries.iter().cloned()).collect();
    sharded::sort(&mut merged);
    merged
}

/// `limit` entries from `offset`: each shard's first entries (`first_round`), merged, and
/// again to `offset + limit` from a shard that may hold more of them; from deeper, each shard
/// read from where the page starts in it.
pub async fn page(conn: &Connection, sets: &[ShardSet], scale: &Scale, offset: u64, limit: u64) -> Result<RawWindow, StoreError> {
    if offset + limit > PREFIX_PAGE {
        let total = sharded::sizes(conn, sets).await?.iter().sum();
        let window = sharded_window::window(conn, sets, offset, limit).await?;
        // Everyone with more points than the first entry is ranked before it.
        let first_above = match window.first() {
            Some((_, first)) => sharded::counts(conn, sets, &[], &[next_value_floor(scale, *first)]).await?.1[0],
            None => 0,
        };
        return Ok(RawWindow { total, position: None, below: None, start: offset, entries: ranked(scale, window, offset, first_above) });
    }
    let need = offset + limit;
    let mut tops = sharded::tops(conn, sets, first_round(need, sets.len())).await?;
    let mut merged = merge(&tops);
    // A shard read short of `need` whose last entry read made the prefix may hold more of it:
    // read again to `need` (whole, one snapshot of it). Entries are spread over shards by a
    // hash of their ids, so this is rare (about one top-100 read in 4,000 at 12 shards).
    let cut = merged.get(need as usize - 1).cloned();
    let short: Vec<usize> = (0..tops.len())
        .filter(|&i| {
            let (size, entries) = &tops[i];
            let last = entries.last().map(|(m, c)| (m.as_str(), *c));
            (entries.len() as u64) < need.min(*size)
                && last.is_some_and(|last| cut.as_ref().is_none_or(|(m, c)| !sharded::before((m, *c), last)))
        })
        .collect();
    if !short.is_empty() {
        let again: Vec<ShardSet> = short.iter().map(|&i| sets[i].clone()).collect();
        for (i, read) in short.into_iter().zip(sharded::tops(conn, &again, need).await?) {
            tops[i] = read;
        }
        merged = merge(&tops);
    }
    let total = tops.iter().map(|(size, _)| size).sum();
    let window: Vec<Entry> = merged.iter().skip(offset as usize).take(limit as usize).cloned().collect();
    // Everyone with more points than the first entry is ranked before it: in the merged prefix.
    let first_above = window.first().map_or(0, |(_, first)| {
        merged.iter().take(offset as usize).filter(|(_, c)| value(scale, *c) > value(scale, *first)).count() as u64
    });
    Ok(RawWindow { total, position: None, below: None, start: offset, entries: ranked(scale, window, offset, first_above) })
}

/// `limit` entries ranked after `cursor`'s place (a keyset page): each shard's next `limit`,
/// merged, and where the page starts, in one call a shard; the first entry's competition rank
/// takes one round more when `competition`.
pub async fn page_after(
    conn: &Connection,
    sets: &[ShardSet],
    scale: &Scale,
    cursor: &RankCursor,
    limit: u64,
    competition: bool,
) -> Result<RawWindow, StoreError> {
    let (total, start, mut entries) = sharded::after(conn, sets, &cursor.member, cursor.composite as f64, limit).await?;
    sharded::sort(&mut entries);
    entries.truncate(limit as usize);
    let first_above = match entries.first() {
        Some((_, first)) if competition => sharded::counts(conn, sets, &[], &[next_value_floor(scale, *first)]).await?.1[0],
        _ => 0,
    };
    Ok(RawWindow { total, position: None, below: None, start, entries: ranked(scale, entries, start, first_above) })
}

/// Reads of a member's neighbourhood while the member writes: at most this many, then the last.
const AROUND_ATTEMPTS: u32 = 3;

/// The member and `around` entries on each side (shifted to stay full at either end).
/// The entries' `above` (competition ranks) take a round of their own: read when
/// `competition`, else 0 (unique ranks need only positions).
#[allow(clippy::too_many_arguments)]
pub async fn around(
    conn: &Connection,
    layout: &Layout,
    sets: &[ShardSet],
    scale: &Scale,
    member: &str,
    around: u64,
    competition: bool,
) -> Result<RawWindow, StoreError> {
    let home = layout.shard_of(member);
    let width = 2 * around + 1;
    // The member's standing, then the shards around it: a write of the member's between the two
    // rounds moves the probe, so both are read again (the counts must be of one standing).
    let mut attempts = 0;
    // Each shard's share of the neighbours first (`side_share`), all of them when a shard may
    // hold more of the window than it answered (`short`).
    let (mut whole, mut probe) = (false, None);
    let (composite, near) = loop {
        let found = match probe.take() {
            Some(composite) => Some(composite),
            None => sharded::scores(conn, &sets[home..=home], &[member], &[0]).await?.1[0],
        };
        let Some(composite) = found else {
            let total = sharded::sizes(conn, sets).await?.iter().sum();
            return Ok(RawWindow { total, position: None, below: None, start: 0, entries: Vec::new() });
        };
        let floor = (value(scale, composite) * scale.span) as f64;
        // A window of the member alone needs no neighbours (it never shifts past the member), but
        // for its competition rank the nearest above (`competition_above`).
        let asked = match (around, whole) {
            (0, _) => u64::from(competition),
            (_, true) => width,
            (_, false) => side_share(around, sets.len()),
        };
        let near = sharded::around(conn, sets, member, floor, composite, (asked, competition.then_some(scale.span))).await?;
        if asked < width && short(&near, (member, composite), around) {
            (whole, probe) = (true, Some(composite));
            continue;
        }
        attempts += 1;
        if !near.moved || attempts == AROUND_ATTEMPTS {
            break (composite, near);
        }
    };
    let rank = near.ranked_before;
    let start = rank.saturating_sub(around).min(near.total.saturating_sub(width));
    let mut candidates = near.nearest;
    candidates.push((member.to_owned(), composite));
    sharded::sort(&mut candidates);
    // The member's place among the candidates: they hold the nearest `width` on each side.
    // Still moving after every attempt, the counts may be one standing ahead of the candidates:
    // the window starts at the member then, never before the first candidate.
    let at = candidates.iter().position(|(m, _)| m == member).expect("the member is a candidate");
    let first = at.saturating_sub((rank - start) as usize);
    let window: Vec<Entry> = candidates.into_iter().skip(first).take(width as usize).collect();
    let above = match window.first() {
        Some((_, c)) if competition => competition_above(scale, &near.above, *c),
        _ => 0,
    };
    Ok(RawWindow { total: near.total, position: Some(rank), below: Some(near.below), start, entries: ranked(scale, window, start, above) })
}

/// Whether a shard that answered as many neighbours as asked on a side may hold more of the
/// window than it gave: its farthest on that side is nearer the member than the window's end
/// there (or the window is not filled on that side). Otherwise its entries beyond lie beyond the
/// window, and `competition_above` is exact (a shard's farthest above ranks at or before the
/// window's first entry, so it has at least the first entry's points).
fn short(near: &Around, (member, composite): (&str, f64), around: u64) -> bool {
    let width = 2 * around + 1;
    let rank = near.ranked_before;
    let start = rank.saturating_sub(around).min(near.total.saturating_sub(width));
    // A member last on the board removed or moved up since its probe: `rank` may be `total`.
    let above_wanted = rank - start;
    let (wanted_above, wanted_below) = (above_wanted as usize, (width - 1).saturating_sub(above_wanted) as usize);
    let probe = (member, composite);
    let mut above: Vec<&Entry> = near.nearest.iter().filter(|(m, c)| sharded::before((m, *c), probe)).collect();
    let mut below: Vec<&Entry> = near.nearest.iter().filter(|(m, c)| sharded::before(probe, (m, *c))).collect();
    // Nearest first on both sides.
    above.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    below.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    let (cut_above, cut_below) = (above.get(wanted_above.wrapping_sub(1)), below.get(wanted_below.wrapping_sub(1)));
    near.ends.iter().any(|(far_above, far_below)| {
        let above_short = far_above
            .as_ref()
            .is_some_and(|(m, c)| wanted_above > 0 && cut_above.is_none_or(|(cm, cc)| sharded::before((cm, *cc), (m, *c))));
        let below_short = far_below
            .as_ref()
            .is_some_and(|(m, c)| wanted_below > 0 && cut_below.is_none_or(|(cm, cc)| sharded::before((m, *c), (cm, *cc))));
        above_short || below_short
    })
}

/// The members of every shard with strictly more points than `first`, the first entry of a
/// window around a member, from what each shard answered around that member (no round more):
/// its members ranked before the member less its nearest below the value above `first`'s;
/// unless its nearest fill its answer and the farthest has `first`'s value, when members of
/// that value lie beyond them, and its `edge` counts the ones above. Exact while the window
/// holds fewer entries above the member than each shard's answer (at most `2 · around` of
/// `2 · around + 1`, shifted up at the board's end): a shard whose nearest all had a lower value
/// than `first`'s would put more than that between the member and `first`.
fn competition_above(scale: &Scale, shards: &[ShardAbove], first: f64) -> u64 {
    let (points, floor) = (value(scale, first), next_value_floor(scale, first));
    shards
        .iter()
        .map(|shard| match (shard.edge, shard.nearest.last()) {
            (Some(edge), Some((_, farthest))) if value(scale, *farthest) == points => edge,
            _ => shard.ranked_before.saturating_sub(shard.nearest.iter().filter(|(_, c)| *c < floor).count() as u64),
        })
        .sum()
}

/// The places of `members` (distinct), in their order, with the board's size.
pub async fn members(
    conn: &Connection,
    layout: &Layout,
    sets: &[ShardSet],
    scale: &Scale,
    members: &[&str],
) -> Result<(u64, Vec<Option<MemberPlace>>), StoreError> {
    let home: Vec<usize> = members.iter().map(|m| layout.shard_of(m)).collect();
    let (total, found) = sharded::scores(conn, sets, members, &home).await?;
    let probes: Vec<(&str, f64)> = members.iter().zip(&found).filter_map(|(m, c)| Some((*m, (*c)?))).collect();
    let floors: Vec<f64> = probes.iter().map(|(_, c)| next_value_floor(scale, *c)).collect();
    let (before, above) = sharded::counts(conn, sets, &probes, &floors).await?;
    let mut places =
        probes.iter().zip(before).zip(above).map(|((&(_, composite), position), above)| MemberPlace { position, composite, above });
    Ok((total, found.iter().map(|c| c.and_then(|_| places.next())).collect()))
}

/// How many members of every shard are ranked before `(member, composite)` in each probe.
pub async fn ranks(conn: &Connection, sets: &[ShardSet], probes: &[(&str, f64)]) -> Result<Vec<u64>, StoreError> {
    Ok(sharded::counts(conn, sets, probes, &[]).await?.0)
}

/// Turns the ranks of `user_id` in `standings` (their shard's, as a write script answers) into
/// ranks on the whole board: their composites from their shard, then every shard's count of
/// members before them. Nothing to do on a board of one shard.
pub async fn rank_standings(
    conn: &Connection,
    keys: &Keys,
    layout: &Layout,
    board: &Board,
    user_id: &str,
    standings: &mut [PeriodStanding],
) -> Result<(), StoreError> {
    if !layout.is_sharded() {
        return Ok(());
    }
    let home = layout.shard_of(user_id);
    for standing in standings.iter_mut().filter(|standing| standing.rank.is_some()) {
        let Some(kind) = board.period_kind(&standing.period) else { continue };
        let Ok(period) = Period::named(kind, &standing.period_id, board.timezone) else { continue };
        // The write that asks has been applied: its answer's ranks do not refuse it (the fence alone).
        let sets = sets(keys, layout, &period, None);
        let (_, found) = sharded::scores(conn, &sets[home..=home], &[user_id], &[0]).await?;
        standing.rank = match found[0] {
            Some(composite) => Some(ranks(conn, &sets, &[(user_id, composite)]).await?[0] + 1),
            None => None,
        };
    }
    Ok(())
}

pub use crate::redis::sharded::distribution;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn above_counts_follow_the_first_entry() {
        let scale = Scale { span: 10, ..Scale::POINTS };
        let window = vec![("a".into(), 55.0), ("b".into(), 51.0), ("c".into(), 43.0), ("d".into(), 40.0), ("e".into(), 30.0)];
        let above: Vec<u64> = ranked(&scale, window, 7, 4).iter().map(|e| e.above).collect();
        // 5 and 5 share the first entry's count; 4 and 4 start at their position; 3 likewise.
        assert_eq!(above, [4, 4, 9, 9, 11]);
    }

    #[test]
    fn a_first_round_reads_a_share_of_the_prefix_with_room_to_spare() {
        assert_eq!(first_round(100, 1), 100, "one shard: the prefix");
        assert_eq!(first_round(100, 12), 22);
        assert_eq!(first_round(10, 12), 6);
        assert_eq!(first_round(3, 12), 3, "never more than the prefix");
        assert_eq!(first_round(1000, 12), 172);
    }

    #[test]
    fn a_side_share_is_an_even_share_of_the_neighbours_and_three_more() {
        assert_eq!(side_share(5, 12), 4);
        assert_eq!(side_share(5, 3), 5);
        assert_eq!(side_share(1, 12), 3, "never more than the window");
        assert_eq!(side_share(50, 12), 8);
    }

    /// One shard's answer around `(member, at)` as `shard_ranks.lua` gives it: the members ranked
    /// before it (a higher composite, or an equal one with a greater id), the `width` nearest of
    /// them, and the count above the farthest's value when they fill the answer.
    fn answer(scale: &Scale, shard: &[(String, f64)], (member, at): (&str, f64), width: usize) -> ShardAbove {
        let mut before: Vec<Entry> =
            shard.iter().filter(|(m, c)| m != member && (*c > at || (*c == at && m.as_str() > member))).cloned().collect();
        before.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        let ranked_before = before.len() as u64;
        before.truncate(width);
        let edge = (before.len() == width).then(|| {
            let farthest = value(scale, before[width - 1].1);
            shard.iter().filter(|(_, c)| value(scale, *c) > farthest).count() as u64
        });
        ShardAbove { ranked_before, nearest: before, edge }
    }

    proptest::proptest! {
        /// Model: every shard's members with more points than the window's first entry, counted
        /// one by one. The window's first entry is any of the `2 · around` nearest above the
        /// member on the whole board (a window shifted up at the board's end), or the member;
        /// ties of points are many (values 0..4).
        #[test]
        fn competition_above_counts_what_every_shard_holds_above_the_first_entry(
            entries in proptest::collection::vec((0usize..4, 0i64..4, 0i64..3), 1..60),
            around in 0usize..4,
            pick in 0usize..16,
        ) {
            let scale = Scale { span: 10, ..Scale::POINTS };
            let mut shards: Vec<Vec<(String, f64)>> = vec![Vec::new(); 4];
            for (i, (shard, points, time)) in entries.iter().enumerate() {
                shards[*shard].push((format!("m{i:02}"), (points * 10 + time) as f64));
            }
            let (member, at) = entries.iter().enumerate().map(|(i, (_, p, t))| (format!("m{i:02}"), (p * 10 + t) as f64)).next().unwrap();
            let width = if around == 0 { 1 } else { 2 * around + 1 };
            let answers: Vec<ShardAbove> = shards.iter().map(|shard| answer(&scale, shard, (&member, at), width)).collect();
            let mut above_member: Vec<Entry> = shards.iter().flatten()
                .filter(|(m, c)| *m != member && (*c > at || (*c == at && *m > member))).cloned().collect();
            above_member.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
            let k = pick % ((2 * around).min(above_member.len()) + 1);
            let first = if k == 0 { at } else { above_member[k - 1].1 };
            let expected = shards.iter().flatten().filter(|(_, c)| value(&scale, *c) > value(&scale, first)).count() as u64;
            proptest::prop_assert_eq!(competition_above(&scale, &answers, first), expected);
        }
    }
}
