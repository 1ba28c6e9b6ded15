//! The arcade's daily league in the simulation's model, written from docs/leagues.md and
//! docs/notifications.md, sharing no code with `shared/`: cohorts of `COHORT` filled one at a
//! time per tier in the order players first write, players who write before the day before is
//! closed waiting for that close, bans, the close (a small last cohort ranked with the one
//! before it, members with no score idle), tiers moving, and the zones of each member as the
//! day would end now. Zones are of the members with a score: a member with none did not play,
//! now or at the close.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::crossings::{Crossing, Standing};

/// `league = { period = "day", cohort_size = 3, tiers = ["low", "mid", "high"], promote = 1, demote = 1 }`.
pub const COHORT: usize = 3;
pub const TIERS: [&str; 3] = ["low", "mid", "high"];
const PROMOTE: usize = 1;
const DEMOTE: usize = 1;
/// A day's league closes 30 minutes after the day (the grace window), once an archive run
/// comes, for as long as its day board is kept (30 days).
const GRACE_SECS: i64 = 30 * 60;
const KEPT_SECS: i64 = 30 * 86_400;
/// The league history route answers the 12 days before today.
pub const HISTORY_DAYS: i64 = 12;

/// What the close gave one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub tier: usize,
    pub rank: Option<u32>,
    pub size: u32,
    pub score: Option<i64>,
    pub zone: &'static str,
    pub next_tier: usize,
}

#[derive(Debug, Default, Clone)]
struct Day {
    /// Per tier, its cohorts in the order they opened (a ban leaves its place empty).
    cohorts: BTreeMap<usize, Vec<Vec<String>>>,
    /// Players who first wrote before the day before was closed, and when (ms): placed in that
    /// order, those of one millisecond by user id (the order of the waiting list's equal scores).
    waiting: Vec<(i64, String)>,
    closed: bool,
    results: HashMap<String, Outcome>,
}

impl Day {
    fn has_players(&self) -> bool {
        !self.waiting.is_empty() || self.cohorts.values().flatten().any(|c| !c.is_empty())
    }

    fn cohort_of(&self, user: &str) -> Option<(usize, usize)> {
        self.cohorts.iter().find_map(|(&tier, cohorts)| cohorts.iter().position(|c| c.iter().any(|u| u == user)).map(|n| (tier, n)))
    }
}

#[derive(Debug, Default, Clone)]
pub struct Ladder {
    /// A player's tier (absent: the lowest).
    tier: HashMap<String, usize>,
    /// Day number -> its league.
    days: BTreeMap<i64, Day>,
}

/// The zone of 1-based `rank` among `n` ranked members of `tier`: counts of a full cohort,
/// scaled down (rounded down), none up from the top tier nor down from the bottom one.
pub fn zone(tier: usize, rank: usize, n: usize) -> &'static str {
    let promote = if tier + 1 == TIERS.len() { 0 } else { PROMOTE * n / COHORT };
    let demote = if tier == 0 { 0 } else { (DEMOTE * n / COHORT).min(n - promote) };
    if rank <= promote {
        "promote"
    } else if rank > n - demote {
        "demote"
    } else {
        "stay"
    }
}

/// A cohort's members best first (as `standing` ranks the day), those with no score after
/// them by name; banned members left out.
fn members_in_order(cohort: &[String], standing: &Standing, banned: &HashSet<String>) -> (Vec<(String, i64)>, Vec<String>) {
    let present = |u: &String| cohort.contains(u) && !banned.contains(u);
    let scored: Vec<(String, i64)> = standing.iter().filter(|(u, _, _)| present(u)).map(|(u, s, _)| (u.clone(), *s)).collect();
    let mut unscored: Vec<String> =
        cohort.iter().filter(|u| !banned.contains(*u) && !scored.iter().any(|(s, _)| s == *u)).cloned().collect();
    unscored.sort();
    (scored, unscored)
}

impl Ladder {
    /// Every day the league saw a player.
    pub fn days(&self) -> impl Iterator<Item = i64> + '_ {
        self.days.keys().copied()
    }

    pub fn tier_of(&self, user: &str) -> usize {
        self.tier.get(user).copied().unwrap_or(0)
    }

    /// A write left `user` on `day`'s board: their first of the day places them in their tier's
    /// open cohort, or makes them wait when the day before had players and is not closed.
    pub fn played(&mut self, user: &str, day: i64, now_ms: i64) {
        let before_open = self.days.get(&(day - 1)).is_some_and(|d| d.has_players() && !d.closed);
        let tier = self.tier_of(user);
        let today = self.days.entry(day).or_default();
        if today.cohort_of(user).is_some() || today.waiting.iter().any(|(_, u)| u == user) {
            return;
        }
        if before_open {
            today.waiting.push((now_ms, user.to_owned()));
        } else {
            join(today, tier, user);
        }
    }

    /// A ban takes `user` out of their cohort and the waiting list of each of `live` days.
    pub fn ban(&mut self, user: &str, live: &[i64]) {
        for day in live {
            if let Some(d) = self.days.get_mut(day) {
                for cohort in d.cohorts.values_mut().flatten() {
                    cohort.retain(|u| u != user);
                }
                d.waiting.retain(|(_, u)| u != user);
            }
        }
    }

    pub fn is_waiting(&self, user: &str, day: i64) -> bool {
        self.days.get(&day).is_some_and(|d| d.waiting.iter().any(|(_, u)| u == user))
    }

    /// `user`'s cohort of `day` (its members, banned ones too), and its tier.
    pub fn cohort(&self, user: &str, day: i64) -> Option<(usize, Vec<String>)> {
        let d = self.days.get(&day)?;
        let (tier, n) = d.cohort_of(user)?;
        Some((tier, d.cohorts[&tier][n].clone()))
    }

    /// The league route's entries of `user`'s cohort on `day`: (user, score, zone) best first,
    /// as the day would end now.
    pub fn entries(&self, user: &str, day: i64, standing: &Standing, banned: &HashSet<String>) -> Vec<(String, Option<i64>, &'static str)> {
        let Some((tier, cohort)) = self.cohort(user, day) else { return Vec::new() };
        let (scored, unscored) = members_in_order(&cohort, standing, banned);
        let n = scored.len();
        let mut out: Vec<_> = scored.into_iter().enumerate().map(|(i, (u, s))| (u, Some(s), zone(tier, i + 1, n))).collect();
        out.extend(unscored.into_iter().map(|u| (u, None, "idle")));
        out
    }

    /// The zone crossings of one write of `mover` on `day` (a ban's user is told nothing):
    /// every member of the mover's cohort, their zone before and after, from the day's
    /// standings before and after.
    #[allow(clippy::too_many_arguments)]
    pub fn zone_crossings(
        &self,
        before_ladder: &Ladder,
        day: i64,
        period_id: &str,
        mover: &str,
        (before, after): (&Standing, &Standing),
        banned_before: &HashSet<String>,
        banned_after: &HashSet<String>,
    ) -> Vec<Crossing> {
        let (tier, members_before, members_after) = match (before_ladder.cohort(mover, day), self.cohort(mover, day)) {
            (None, None) => return Vec::new(),
            (Some((tier, b)), Some((_, a))) => (tier, b, a),
            (None, Some((tier, a))) => (tier, a.iter().filter(|u| *u != mover).cloned().collect(), a),
            (Some((tier, b)), None) => (tier, b.clone(), b.into_iter().filter(|u| u != mover).collect()),
        };
        let only = |list: &Standing, members: &[String], banned: &HashSet<String>| -> Standing {
            list.iter().filter(|(u, _, _)| members.contains(u) && !banned.contains(u)).cloned().collect()
        };
        // A ban's removals are the cohorts it left (live days); a member of a day past its window
        // stays, left out by the reads but moving nobody by a notification.
        let (b, a) = (only(before, &members_before, banned_before), only(after, &members_after, banned_before));
        // Zones follow the cohort's order (Redis's order of equal scores included), as the route
        // shows them and the close ranks them; a member holding the mover's very standing after
        // the write was only tied, not passed: their zone change names nobody.
        let names = |list: &Standing| list.iter().map(|(u, _, _)| u.clone()).collect::<Vec<_>>();
        let (order_before, order_after) = (names(&b), names(&a));
        let mine = a.iter().find(|(u, _, _)| u == mover).map(|&(_, s, t)| (s, t));
        let tied = |user: &str| a.iter().any(|(u, s, t)| u == user && Some((*s, *t)) == mine);
        let zones = |order: &[String]| -> HashMap<String, &'static str> {
            order.iter().enumerate().map(|(i, u)| (u.clone(), zone(tier, i + 1, order.len()))).collect()
        };
        let (zb, za) = (zones(&order_before), zones(&order_after));
        let place = |order: &[String], u: &str| order.iter().position(|x| x == u);
        let (mb, ma) = (place(&order_before, mover), place(&order_after, mover));
        let mut out = Vec::new();
        let mut users: Vec<&String> = order_before.iter().chain(&order_after).collect();
        users.sort();
        users.dedup();
        for user in users {
            // The banned user is told nothing, nor is one who left the cohort.
            if !members_after.contains(user) || banned_after.contains(user) {
                continue;
            }
            let (pb, pa) = (place(&order_before, user), place(&order_after, user));
            let passed = user != mover
                && !tied(user)
                && pb.is_some_and(|pb| mb.is_none_or(|mb| mb > pb))
                && pa.is_some_and(|pa| ma.is_some_and(|ma| ma < pa));
            let by = passed.then(|| mover.to_owned());
            let (was, now) = (zb.get(user).copied(), za.get(user).copied());
            for (zone, entered, left) in
                [("promote", "entered_promotion", "left_promotion"), ("demote", "entered_demotion", "left_demotion")]
            {
                let kind = match (was == Some(zone), now == Some(zone)) {
                    (false, true) => entered,
                    (true, false) => left,
                    _ => continue,
                };
                out.push(Crossing { period_id: period_id.to_owned(), user: user.clone(), kind, by: by.clone() });
            }
        }
        out
    }

    /// Whether `day` is due to close at `now`: it ended its grace ago, is still kept, is not
    /// closed, and had players (or players waiting for it to close).
    fn due(&self, day: i64, now: i64, day_end: &impl Fn(i64) -> i64) -> bool {
        let end = day_end(day);
        let next_waits = self.days.get(&(day + 1)).is_some_and(|d| !d.waiting.is_empty());
        self.days
            .get(&day)
            .is_some_and(|d| !d.closed && end + GRACE_SECS <= now && end >= now - KEPT_SECS && (d.has_players() || next_waits))
    }

    /// An archive run at `now` (`day_end`: when a day ends): every day due closes, oldest
    /// first, from `standing_of(day)`; each close places the next day's waiting players.
    pub fn close_due(&mut self, now: i64, day_end: impl Fn(i64) -> i64, standing_of: impl Fn(i64) -> Standing, banned: &HashSet<String>) {
        let days: Vec<i64> = self.days.keys().copied().collect();
        for day in days {
            if self.due(day, now, &day_end) {
                self.close(day, &standing_of(day), banned);
            }
        }
    }

    /// An operator's close of `day` at `now` (the archive function's `{"league": …}`): refused
    /// (false) before the day's end and grace, or while an earlier day is due; a day closed
    /// already, or that nobody played, changes nothing.
    pub fn close_by_hand(
        &mut self,
        day: i64,
        now: i64,
        day_end: impl Fn(i64) -> i64,
        standing: &Standing,
        banned: &HashSet<String>,
    ) -> bool {
        if day_end(day) + GRACE_SECS > now || self.days.keys().any(|&earlier| earlier < day && self.due(earlier, now, &day_end)) {
            return false;
        }
        if self.due(day, now, &day_end) {
            self.close(day, standing, banned);
        }
        true
    }

    fn close(&mut self, day: i64, standing: &Standing, banned: &HashSet<String>) {
        let d = self.days.get_mut(&day).expect("a day with players");
        let mut results = HashMap::new();
        for (&tier, cohorts) in &d.cohorts {
            let present: Vec<Vec<String>> = cohorts.iter().map(|c| c.iter().filter(|u| !banned.contains(*u)).cloned().collect()).collect();
            let mut groups: Vec<Vec<String>> = present.clone();
            if groups.len() >= 2 && 2 * present[present.len() - 1].len() < COHORT {
                let last = groups.pop().expect("two");
                groups.last_mut().expect("one").extend(last);
            }
            for group in groups {
                let (scored, unscored) = members_in_order(&group, standing, &HashSet::new());
                let n = scored.len();
                for (i, (user, score)) in scored.into_iter().enumerate() {
                    let zone = zone(tier, i + 1, n);
                    let next_tier = match zone {
                        "promote" => tier + 1,
                        "demote" => tier - 1,
                        _ => tier,
                    };
                    let outcome = Outcome { tier, rank: Some(i as u32 + 1), size: n as u32, score: Some(score), zone, next_tier };
                    results.insert(user, outcome);
                }
                for user in unscored {
                    results.insert(user, Outcome { tier, rank: None, size: n as u32, score: None, zone: "idle", next_tier: tier });
                }
            }
        }
        for (user, outcome) in &results {
            self.tier.insert(user.clone(), outcome.next_tier);
        }
        d.results = results;
        d.closed = true;
        if let Some(next) = self.days.get_mut(&(day + 1)) {
            let mut waiting = std::mem::take(&mut next.waiting);
            waiting.sort();
            for (_, user) in waiting {
                if !banned.contains(&user) {
                    let tier = self.tier.get(&user).copied().unwrap_or(0);
                    join(next, tier, &user);
                }
            }
        }
    }

    /// `user`'s results of the `HISTORY_DAYS` days before `today`, newest first.
    pub fn history(&self, user: &str, today: i64) -> Vec<(i64, Outcome)> {
        (today - HISTORY_DAYS..today)
            .rev()
            .filter_map(|day| self.days.get(&day).and_then(|d| d.results.get(user)).map(|o| (day, o.clone())))
            .collect()
    }
}

fn join(day: &mut Day, tier: usize, user: &str) {
    let cohorts = day.cohorts.entry(tier).or_default();
    match cohorts.last_mut() {
        Some(open) if open.len() < COHORT => open.push(user.to_owned()),
        _ => cohorts.push(vec![user.to_owned()]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standing(list: &[(&str, i64)]) -> Standing {
        list.iter().map(|&(u, s)| (u.to_owned(), s, 0)).collect()
    }

    #[test]
    fn cohorts_fill_in_order_a_late_player_waits_and_a_small_last_cohort_closes_with_the_one_before() {
        let mut ladder = Ladder::default();
        for user in ["a", "b", "c", "d"] {
            ladder.played(user, 0, 0);
        }
        assert_eq!(ladder.cohort("c", 0), Some((0, vec!["a".into(), "b".into(), "c".into()])));
        assert_eq!(ladder.cohort("d", 0), Some((0, vec!["d".into()])));
        // Day 1 before day 0 is closed: e waits.
        ladder.played("e", 1, 86_400_000);
        assert!(ladder.is_waiting("e", 1) && ladder.cohort("e", 1).is_none());
        let board = standing(&[("d", 9), ("a", 5), ("b", 4), ("c", 1)]);
        ladder.close_due(86_400 + 1_800, |day| (day + 1) * 86_400, |_| board.clone(), &HashSet::new());
        // d, alone in the tier's last cohort (1 < 3 / 2), is ranked with a, b and c: first of 4.
        assert_eq!(ladder.history("d", 2)[0].1.rank, Some(1));
        assert_eq!(ladder.tier_of("d"), 1, "one of four promoted");
        assert_eq!(ladder.tier_of("a"), 0);
        // e is placed at the close, in their tier.
        assert_eq!(ladder.cohort("e", 1), Some((0, vec!["e".into()])));
    }

    #[test]
    fn a_close_by_hand_waits_for_the_grace_and_for_the_days_before() {
        let mut ladder = Ladder::default();
        let end = |day: i64| (day + 1) * 86_400;
        let none = HashSet::new();
        ladder.played("a", 0, 0);
        ladder.played("b", 1, 86_400_000);
        let board = standing(&[("a", 5), ("b", 3)]);
        // Day 0 within its grace: refused.
        assert!(!ladder.close_by_hand(0, 86_400 + 60, end, &board, &none));
        // Day 1 while day 0 is open: refused; day 0 closes and places b in day 1.
        let later = 2 * 86_400 + 1_800;
        assert!(!ladder.close_by_hand(1, later, end, &board, &none));
        assert!(ladder.close_by_hand(0, later, end, &board, &none));
        assert!(ladder.history("a", 1).len() == 1 && ladder.cohort("b", 1).is_some());
        // Day 1 now; again, nothing more.
        assert!(ladder.close_by_hand(1, later, end, &board, &none));
        assert!(ladder.close_by_hand(1, later, end, &board, &none));
        assert_eq!(ladder.history("b", 2).len(), 1);
    }

    #[test]
    fn zones_are_of_the_members_with_a_score() {
        let mut ladder = Ladder::default();
        ladder.tier.insert("a".into(), 1);
        ladder.tier.insert("b".into(), 1);
        ladder.tier.insert("c".into(), 1);
        for user in ["a", "b", "c"] {
            ladder.played(user, 0, 0);
        }
        let full = ladder.entries("a", 0, &standing(&[("a", 3), ("b", 2), ("c", 1)]), &HashSet::new());
        assert_eq!(full.iter().map(|e| e.2).collect::<Vec<_>>(), ["promote", "stay", "demote"]);
        let one_removed = ladder.entries("a", 0, &standing(&[("a", 3), ("b", 2)]), &HashSet::new());
        assert_eq!(one_removed.iter().map(|e| (e.0.as_str(), e.2)).collect::<Vec<_>>(), [("a", "stay"), ("b", "stay"), ("c", "idle")]);
    }
}
