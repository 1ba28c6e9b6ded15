//! Rank-change notifications (docs/notifications.md). The write scripts record, in the call that
//! applies a write, how it moved its member on each watched period board: the ranks before and
//! after, and who it shifted inside the top `top` (or, on a league board, the member's cohort in
//! order). This module names the crossings such a move makes, merges a user's crossings over a
//! quiet time (`quiet`), and shapes the events. Pure: the drain brings the moves and the time.

mod quiet;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use super::league::{League, Zone, Zones};
use super::period::PeriodKind;

pub use quiet::{Window, due, hold_unsent, merge};

/// Largest `top` a board may watch: an overtaking write names at most this many members.
pub const MAX_TOP: u32 = 100;
/// The most moves a board's notices hold while the bus cannot take them: past it the oldest
/// are dropped (and counted, `NotificationsDropped`), so a long outage of the bus never fills
/// Redis. About 20 MB a board at a few hundred bytes a move.
pub const NOTICES_MAX_LEN: u64 = 100_000;
/// Longest quiet time (a day).
pub const MAX_QUIET_SECS: u32 = 24 * 3600;
/// EventBridge's `Source` and `DetailType` of every notification, and the version of its
/// `detail` schema (docs/notifications.md).
pub const SOURCE: &str = "standings";
pub const DETAIL_TYPE: &str = "Standings Rank Changed";
pub const SCHEMA_VERSION: u32 = 1;

/// `notify = { top = 10, quiet_secs = 60, periods = ["week"] }` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNotify {
    top: u32,
    #[serde(default)]
    quiet_secs: u32,
    #[serde(default)]
    periods: Option<Vec<String>>,
}

/// What a board notifies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notify {
    /// Crossings into, out of and inside the top `top` of every watched period.
    pub top: u32,
    /// A user's crossings within this many seconds of their first are merged (0: off).
    pub quiet_secs: u32,
    /// The periods watched (all of the board's unless listed).
    pub periods: Vec<PeriodKind>,
}

impl Notify {
    /// The top watched on `kind`'s boards (0: not watched).
    pub fn top_of(&self, kind: PeriodKind) -> u32 {
        if self.periods.contains(&kind) { self.top } else { 0 }
    }
}

/// Checks a board's `notify` against its periods: (field, problem) when it is wrong.
pub fn validate(raw: RawNotify, periods: &[PeriodKind]) -> Result<Notify, (String, String)> {
    let bad = |field: &str, problem: String| Err((field.to_owned(), problem));
    if !(1..=MAX_TOP).contains(&raw.top) {
        return bad("top", format!("must be 1..={MAX_TOP}"));
    }
    if raw.quiet_secs > MAX_QUIET_SECS {
        return bad("quiet_secs", format!("must be 0..={MAX_QUIET_SECS}"));
    }
    let watched = match raw.periods {
        None => periods.to_vec(),
        Some(names) if names.is_empty() => return bad("periods", "lists no period; leave it out to watch them all".to_owned()),
        Some(names) => {
            let mut watched = Vec::new();
            for (i, name) in names.iter().enumerate() {
                match periods.iter().find(|p| p.as_str() == name) {
                    Some(kind) if !watched.contains(kind) => watched.push(*kind),
                    Some(_) => return bad(&format!("periods[{i}]"), "listed twice".to_owned()),
                    None => return bad(&format!("periods[{i}]"), "must be one of the board's periods".to_owned()),
                }
            }
            watched
        }
    };
    Ok(Notify { top: raw.top, quiet_secs: raw.quiet_secs, periods: watched })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrossingKind {
    EnteredTop,
    LeftTop,
    TookFirst,
    LostFirst,
    Overtaken,
    EnteredPromotion,
    LeftPromotion,
    EnteredDemotion,
    LeftDemotion,
}

impl CrossingKind {
    pub const ALL: [CrossingKind; 9] = [
        CrossingKind::EnteredTop,
        CrossingKind::LeftTop,
        CrossingKind::TookFirst,
        CrossingKind::LostFirst,
        CrossingKind::Overtaken,
        CrossingKind::EnteredPromotion,
        CrossingKind::LeftPromotion,
        CrossingKind::EnteredDemotion,
        CrossingKind::LeftDemotion,
    ];

    /// Crossings of one dimension merge in a quiet time; `entered`/`left` (and `took`/`lost`)
    /// are one dimension's two directions.
    fn dimension(self) -> u8 {
        match self {
            CrossingKind::EnteredTop | CrossingKind::LeftTop => 0,
            CrossingKind::TookFirst | CrossingKind::LostFirst => 1,
            CrossingKind::Overtaken => 2,
            CrossingKind::EnteredPromotion | CrossingKind::LeftPromotion => 3,
            CrossingKind::EnteredDemotion | CrossingKind::LeftDemotion => 4,
        }
    }
}

/// One notification's `detail` (schema version `SCHEMA_VERSION`). Ranks are 1-based, on the
/// period's board (in the user's cohort for the league crossings); `None`: not on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detail {
    /// Stable: a redelivery carries the same id (`<board>:<stream id>:<n>`).
    pub id: String,
    pub board: String,
    pub period: String,
    pub period_id: String,
    pub user_id: String,
    pub crossing: CrossingKind,
    pub rank_before: Option<u32>,
    pub rank_after: Option<u32>,
    /// Who passed the user (an overtaking write's member); `None` when nobody did.
    pub by: Option<String>,
    /// The write that moved the ranks (its event or submission id); `None` for a ban.
    pub event_id: Option<String>,
}

/// A recorded move (one line of a notification entry, written by prelude.lua's `record_move`
/// and `record_cohort`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    /// `T|BT <kind> <id> <top> <member> <before> <after> <lo> <names…>`: 0-based ranks (-1: not
    /// on the board); `names` are the members at ranks `lo`.. after the move whom it shifted
    /// inside the top (and the one it pushed out).
    Top {
        period: String,
        period_id: String,
        top: u32,
        member: String,
        before: Option<u32>,
        after: Option<u32>,
        lo: u32,
        names: Vec<String>,
        banned: bool,
    },
    /// `L|BL <kind> <id> <cohort> <member> <before> <names…>`: the member's cohort in order after
    /// the move (without a banned member; names with no score marked `!`, last; names holding a
    /// climber's very composite marked `=`), and the member's 0-based place before (-1: not in
    /// it, or in it with no score).
    /// `LW <kind> <id> <cohort> <member> <before> <lo> <size> <names…>`: a move inside a cohort
    /// whose members with a score it did not change, `size` of them, with only the names at
    /// places `lo`.. after it that it shifted (the member among them); `order` then holds `size`
    /// places, the others empty (their places and zones are the same before and after).
    Cohort { period: String, period_id: String, cohort: String, member: String, before: Option<u32>, order: Vec<String>, banned: bool },
}

/// The most places a windowed cohort move (`LW`) may name: a line past it is not a move.
const MAX_COHORT_PLACES: usize = 100_000;

fn rank(text: &str) -> Option<Option<u32>> {
    if text == "-1" { Some(None) } else { text.parse().ok().map(Some) }
}

impl Move {
    pub fn parse(line: &str) -> Option<Move> {
        let mut parts = line.split(' ');
        let tag = parts.next()?;
        let banned = tag.starts_with('B');
        let (period, period_id) = (parts.next()?.to_owned(), parts.next()?.to_owned());
        match tag.trim_start_matches('B') {
            "T" => {
                let top = parts.next()?.parse().ok()?;
                let member = parts.next()?.to_owned();
                let (before, after, lo) = (rank(parts.next()?)?, rank(parts.next()?)?, parts.next()?.parse().ok()?);
                Some(Move::Top { period, period_id, top, member, before, after, lo, names: parts.map(str::to_owned).collect(), banned })
            }
            "L" => {
                let cohort = parts.next()?.to_owned();
                let member = parts.next()?.to_owned();
                let before = rank(parts.next()?)?;
                Some(Move::Cohort { period, period_id, cohort, member, before, order: parts.map(str::to_owned).collect(), banned })
            }
            "LW" => {
                let cohort = parts.next()?.to_owned();
                let member = parts.next()?.to_owned();
                let before = rank(parts.next()?)?;
                let (lo, size): (usize, usize) = (parts.next()?.parse().ok()?, parts.next()?.parse().ok()?);
                let names: Vec<&str> = parts.collect();
                if size > MAX_COHORT_PLACES || lo + names.len() > size || !names.contains(&member.as_str()) {
                    return None;
                }
                let mut order = vec![String::new(); size];
                for (place, name) in order[lo..].iter_mut().zip(names) {
                    *place = name.to_owned();
                }
                Some(Move::Cohort { period, period_id, cohort, member, before, order, banned })
            }
            _ => None,
        }
    }
}

/// A crossing before it is an event: who, which, ranks (0-based), who passed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crossing {
    pub period: String,
    pub period_id: String,
    pub user_id: String,
    pub crossing: CrossingKind,
    pub rank_before: Option<u32>,
    pub rank_after: Option<u32>,
    pub by: Option<String>,
}

/// A name a move recorded as tied with its climber (prelude.lua `record_move`).
fn tied(name: &str) -> bool {
    name.starts_with(TIED)
}

/// Marks a tied name in a recorded move; no user id holds it (`ids`).
const TIED: char = '=';
/// Marks a cohort member with no score in a recorded cohort move (prelude_league.lua
/// `COHORT_UNSCORED`); no user id holds it either.
const UNSCORED: char = '!';

/// The crossings a move makes, movers first. `league` names the zones of cohort moves (none
/// without it).
pub fn crossings(m: &Move, league: Option<&League>) -> Vec<Crossing> {
    let mut out = Vec::new();
    match m {
        Move::Top { period, period_id, top, member, before, after, lo, names, banned } => {
            let mut push = |user: &str, crossing, rank_before: u32, rank_after: u32, by: Option<&str>| {
                out.push(Crossing {
                    period: period.clone(),
                    period_id: period_id.clone(),
                    user_id: user.to_owned(),
                    crossing,
                    rank_before: (rank_before != u32::MAX).then_some(rank_before),
                    rank_after: (rank_after != u32::MAX).then_some(rank_after),
                    by: by.map(str::to_owned),
                });
            };
            let (a, b, n) = (before.unwrap_or(u32::MAX), after.unwrap_or(u32::MAX), *top);
            if b < a {
                // Ties are not passes (docs/notifications.md): a name marked '=' holds the
                // climber's very composite, below them only by Redis's order of equal scores.
                let tied_at = |rank: u32| names.iter().enumerate().any(|(i, name)| lo + i as u32 == rank && tied(name));
                if b < n && a >= n && !tied_at(n) {
                    push(member, CrossingKind::EnteredTop, a, b, None);
                }
                if b == 0 && !tied_at(1) {
                    push(member, CrossingKind::TookFirst, a, b, None);
                }
                for (i, name) in names.iter().enumerate() {
                    if tied(name) {
                        continue;
                    }
                    let after = lo + i as u32;
                    let before = after - 1;
                    if before == 0 {
                        push(name, CrossingKind::LostFirst, before, after, Some(member));
                    }
                    if after >= n {
                        push(name, CrossingKind::LeftTop, before, after, Some(member));
                    } else if before != 0 {
                        push(name, CrossingKind::Overtaken, before, after, Some(member));
                    }
                }
            } else if a < b {
                if !banned {
                    if a == 0 {
                        push(member, CrossingKind::LostFirst, a, b, None);
                    }
                    if a < n && b >= n {
                        push(member, CrossingKind::LeftTop, a, b, None);
                    }
                }
                for (i, name) in names.iter().enumerate() {
                    let after = lo + i as u32;
                    if after == 0 {
                        push(name, CrossingKind::TookFirst, after + 1, after, None);
                    }
                    if after + 1 == n {
                        push(name, CrossingKind::EnteredTop, after + 1, after, None);
                    }
                }
            }
        }
        Move::Cohort { period, period_id, cohort, member, before, order, banned } => {
            if let Some(league) = league {
                cohort_crossings(league, (period, period_id), (cohort, member, *banned), *before, order, &mut out);
            }
        }
    }
    out
}

/// Zone crossings of one cohort move: every member's zone before and after (the zones scale
/// with the cohort's size, which a newcomer changes). Zones are of the members with a score (as
/// at the close): a name marked unscored is in none, and a mover who had no score before was
/// recorded as placed by the write. A banned mover is told nothing.
#[allow(clippy::too_many_arguments)]
fn cohort_crossings(
    league: &League,
    (period, period_id): (&str, &str),
    (cohort, member, banned): (&str, &str, bool),
    before: Option<u32>,
    order: &[String],
    out: &mut Vec<Crossing>,
) {
    let Some(tier) = cohort.split(':').next().and_then(|t| t.parse::<usize>().ok()) else { return };
    let clean = |name: &'_ str| -> String { name.trim_start_matches(TIED).trim_start_matches(UNSCORED).to_owned() };
    // Zones follow the cohort's order as the league route shows it and the close ranks it
    // (Redis's order of equal scores included); a name marked as holding the climber's very
    // composite was not passed, so its zone change names nobody (ties are not passes).
    let scored: Vec<&String> = order.iter().filter(|name| !name.starts_with(UNSCORED)).collect();
    let tied_names: Vec<String> = scored.iter().filter(|name| tied(name)).map(|name| clean(name)).collect();
    let after_list: Vec<String> = scored.iter().map(|name| clean(name)).collect();
    let mut prior: Vec<String> = after_list.iter().filter(|name| *name != member).cloned().collect();
    if let Some(at) = before {
        prior.insert((at as usize).min(prior.len()), member.to_owned());
    }
    let zones = |list: &[String]| {
        let size = list.len() as u32;
        let zones = Zones::of(league, tier, size);
        move |rank: usize| zones.zone(rank as u32 + 1, size)
    };
    let (zone_before, zone_after) = (zones(&prior), zones(&after_list));
    let place = |list: &[String], user: &str| list.iter().position(|name| name == user);
    let (mover_before, mover_after) = (place(&prior, member), place(&after_list, member));
    let users: Vec<&String> = after_list.iter().chain(&prior).collect();
    let mut seen = std::collections::HashSet::new();
    // An empty place (`LW`) is a member the move did not shift.
    for user in users.into_iter().filter(|user| !(user.is_empty() || banned && *user == member)) {
        if !seen.insert(user.as_str()) {
            continue;
        }
        let (b, a) = (place(&prior, user), place(&after_list, user));
        let (zb, za) = (b.map(&zone_before), a.map(&zone_after));
        // Passed by the mover: behind the user before (or not in the cohort), ahead after.
        let passed = user != member
            && !tied_names.contains(user)
            && b.is_some_and(|b| mover_before.is_none_or(|mb| mb > b))
            && a.is_some_and(|a| mover_after.is_some_and(|ma| ma < a));
        let by = passed.then(|| member.to_owned());
        let mut push = |crossing| {
            out.push(Crossing {
                period: period.to_owned(),
                period_id: period_id.to_owned(),
                user_id: user.clone(),
                crossing,
                rank_before: b.map(|b| b as u32),
                rank_after: a.map(|a| a as u32),
                by: by.clone(),
            });
        };
        let (was, now) = (|zone| zb == Some(zone), |zone| za == Some(zone));
        if now(Zone::Promote) && !was(Zone::Promote) {
            push(CrossingKind::EnteredPromotion);
        } else if !now(Zone::Promote) && was(Zone::Promote) {
            push(CrossingKind::LeftPromotion);
        }
        if now(Zone::Demote) && !was(Zone::Demote) {
            push(CrossingKind::EnteredDemotion);
        } else if !now(Zone::Demote) && was(Zone::Demote) {
            push(CrossingKind::LeftDemotion);
        }
    }
}

/// The events of one notification entry (stream id `entry_id` of `board`'s stream): its moves'
/// crossings, numbered in order, with 1-based ranks.
pub fn details(board: &str, entry_id: &str, event_id: Option<&str>, moves: &str, league: Option<&League>) -> Vec<Detail> {
    moves
        .lines()
        .filter_map(Move::parse)
        .flat_map(|m| crossings(&m, league))
        .enumerate()
        .map(|(n, c)| Detail {
            id: format!("{board}:{entry_id}:{n}"),
            board: board.to_owned(),
            period: c.period,
            period_id: c.period_id,
            user_id: c.user_id,
            crossing: c.crossing,
            rank_before: c.rank_before.map(|r| r + 1),
            rank_after: c.rank_after.map(|r| r + 1),
            by: c.by,
            event_id: event_id.map(str::to_owned),
        })
        .collect()
}
