//! Leagues in tests: the close run of a harness, and a plain-Rust model of a league written
//! from docs/leagues.md (not from the scripts) for the model-based test.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use archive::LeagueCloser;
use chrono::{DateTime, Utc};
use standings::domain::config::Config;
use standings::redis::keys::Keys;
use standings::redis::store::Store;
use standings::services::leagues::Leagues;

use crate::{ArchiveHarness, TestApp, clock_of};

/// The `archive` function's league closes on these boards, keys and clock, with its grace.
fn closer(config: &Arc<Config>, keys: &Keys, store: &Store, now: &Arc<Mutex<DateTime<Utc>>>) -> LeagueCloser {
    LeagueCloser {
        config: config.clone(),
        leagues: Leagues::new(keys.clone(), store.clone()),
        clock: clock_of(now),
        grace: ArchiveHarness::settings().grace,
    }
}

impl ArchiveHarness {
    /// The league closes of the harness's archive job: its keys, boards and clock.
    pub fn closer(&self) -> LeagueCloser {
        closer(&self.config, &self.keys, &self.store, &self.now)
    }
}

impl TestApp {
    /// The `archive` function's league closes on this app's keys, boards and clock.
    pub fn closer(&self) -> LeagueCloser {
        closer(&self.config, &self.keys, &self.store, &self.now)
    }

    /// The same on `store`: a container of its own, whose layout probes are its own.
    pub fn closer_on(&self, store: &Store) -> LeagueCloser {
        closer(&self.config, &self.keys, store, &self.now)
    }
}

/// What the model says one member of a closed cohort got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelResult {
    pub tier: usize,
    /// The other members of the cohort and the member, sorted.
    pub cohort: Vec<String>,
    pub rank: u32,
    pub zone: &'static str,
    pub next_tier: usize,
    pub points: i64,
}

/// A league as its documentation describes it: a tier fills one cohort at a time; a full
/// cohort (`size` members) makes the next first writer open another; at the close a cohort is
/// ranked by points, then by who reached them first, then (equal to the second) by user id
/// descending as Redis orders equal scores; `promote` and `demote` are counts of a full cohort,
/// scaled down (rounded down) for a smaller one, never from the top or the bottom tier.
#[derive(Debug, Clone)]
pub struct LeagueModel {
    pub size: usize,
    pub tiers: usize,
    pub promote: usize,
    pub demote: usize,
    pub tier: HashMap<String, usize>,
    pub banned: HashSet<String>,
    /// This period: per tier, its cohorts in the order they were opened.
    pub cohorts: BTreeMap<usize, Vec<Vec<String>>>,
    /// This period: points and the second they were last reached.
    pub points: HashMap<String, (i64, i64)>,
}

impl LeagueModel {
    pub fn new(size: usize, tiers: usize, promote: usize, demote: usize) -> Self {
        Self {
            size,
            tiers,
            promote,
            demote,
            tier: HashMap::new(),
            banned: HashSet::new(),
            cohorts: BTreeMap::new(),
            points: HashMap::new(),
        }
    }

    pub fn tier_of(&self, user: &str) -> usize {
        self.tier.get(user).copied().unwrap_or(0)
    }

    pub fn placed(&self, user: &str) -> bool {
        self.cohorts.values().flatten().any(|cohort| cohort.iter().any(|u| u == user))
    }

    /// A write of `points` at second `now`: false when refused (banned).
    pub fn write(&mut self, user: &str, points: i64, now: i64) -> bool {
        if self.banned.contains(user) {
            return false;
        }
        let entry = self.points.entry(user.to_owned()).or_insert((0, now));
        *entry = (entry.0 + points, now);
        if !self.placed(user) {
            let size = self.size;
            let cohorts = self.cohorts.entry(self.tier_of(user)).or_default();
            match cohorts.last_mut() {
                Some(open) if open.len() < size => open.push(user.to_owned()),
                _ => cohorts.push(vec![user.to_owned()]),
            }
        }
        true
    }

    /// The sizes of the cohorts `joiners` first writers of one tier fill, in order.
    pub fn sizes_after(&self, tier: usize, joiners: usize) -> Vec<usize> {
        let mut sizes: Vec<usize> = self.cohorts.get(&tier).map(|c| c.iter().map(Vec::len).collect()).unwrap_or_default();
        for _ in 0..joiners {
            match sizes.last_mut() {
                Some(open) if *open < self.size => *open += 1,
                _ => sizes.push(1),
            }
        }
        sizes
    }

    /// Takes the cohorts as they are (concurrent first writes may join in any order).
    pub fn adopt(&mut self, tier: usize, cohorts: Vec<Vec<String>>) {
        self.cohorts.insert(tier, cohorts);
    }

    pub fn ban(&mut self, user: &str) {
        self.banned.insert(user.to_owned());
        self.points.remove(user);
        for cohorts in self.cohorts.values_mut() {
            for cohort in cohorts.iter_mut() {
                cohort.retain(|u| u != user);
            }
        }
    }

    /// A cohort best first: (user, points).
    pub fn ranking(&self, cohort: &[String]) -> Vec<(String, i64)> {
        let mut members: Vec<(String, (i64, i64))> = cohort.iter().map(|u| (u.clone(), self.points[u])).collect();
        members.sort_by(|(a, (pa, ta)), (b, (pb, tb))| pb.cmp(pa).then(ta.cmp(tb)).then(b.cmp(a)));
        members.into_iter().map(|(u, (p, _))| (u, p)).collect()
    }

    /// The zone of 1-based `rank` in a cohort of `n` of `tier`.
    pub fn zone(&self, tier: usize, rank: usize, n: usize) -> &'static str {
        let promote = if tier + 1 == self.tiers { 0 } else { self.promote * n / self.size };
        let demote = if tier == 0 { 0 } else { (self.demote * n / self.size).min(n - promote) };
        if rank <= promote {
            "promote"
        } else if rank > n - demote {
            "demote"
        } else {
            "stay"
        }
    }

    /// Closes the period: every member's result; tiers move; the next period starts empty.
    pub fn close(&mut self) -> HashMap<String, ModelResult> {
        let mut results = HashMap::new();
        for (&tier, cohorts) in &self.cohorts {
            // A last cohort holding fewer than half a cohort is ranked with the one before it.
            let mut groups: Vec<Vec<&Vec<String>>> = cohorts.iter().map(|cohort| vec![cohort]).collect();
            if groups.len() >= 2 && 2 * cohorts[cohorts.len() - 1].len() < self.size {
                let last = groups.pop().unwrap();
                groups.last_mut().unwrap().extend(last);
            }
            for group in groups {
                let everyone: Vec<String> = group.iter().flat_map(|cohort| cohort.iter().cloned()).collect();
                if everyone.is_empty() {
                    continue;
                }
                let own = |user: &str| {
                    let mut sorted = group.iter().find(|cohort| cohort.iter().any(|u| u == user)).map(|c| (*c).clone()).unwrap_or_default();
                    sorted.sort();
                    sorted
                };
                let ranking = self.ranking(&everyone);
                for (i, (user, points)) in ranking.iter().enumerate() {
                    let sorted = own(user);
                    let zone = self.zone(tier, i + 1, ranking.len());
                    let next_tier = match zone {
                        "promote" => tier + 1,
                        "demote" => tier - 1,
                        _ => tier,
                    };
                    let result = ModelResult { tier, cohort: sorted.clone(), rank: i as u32 + 1, zone, next_tier, points: *points };
                    results.insert(user.clone(), result);
                }
            }
        }
        for (user, result) in &results {
            self.tier.insert(user.clone(), result.next_tier);
        }
        self.cohorts.clear();
        self.points.clear();
        results
    }
}
