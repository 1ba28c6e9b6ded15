//! Leagues (docs/leagues.md): each league period a board's players compete in cohorts of about
//! `cohort_size` of their tier; when it ends, the top of each cohort moves a tier up and the
//! bottom a tier down. Pure: the configuration, its checks, and the rules of a close.
//!
//! Placement (done by the write scripts, atomically with a user's first write of the period):
//! a tier fills one cohort at a time, in order of first writes, and opens the next when it is
//! full, so every cohort but a tier's last is full. The last may be small: its zones shrink
//! with it (`Zones::of`), so a cohort of one or two moves nobody, and no cohort promotes or
//! demotes more than its share.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::period::PeriodKind;

/// The field of a period's results (`league_results`) set once every cohort is closed and the
/// next period's waiting players placed; the write scripts place directly from then on.
pub const CLOSED_FIELD: &str = "#closed";
/// The results' field that records how far the drop of idle players went (`Idle::Drop`): an
/// `HSCAN` cursor of the tiers, `done` once finished.
pub const IDLE_CURSOR_FIELD: &str = "#idle";

/// Prefix of the results' field that marks one cohort closed (`#c:<tier>:<cohort>`). No user
/// id contains `#` (`ids`).
pub const COHORT_CLOSED_PREFIX: &str = "#c:";

/// Tiers a league may have, and the largest cohort: a close ranks a cohort in one script call.
pub const MAX_TIERS: usize = 20;
pub const MAX_COHORT_SIZE: u32 = 500;

/// How many of a cohort move: a count out of a full cohort, or a fraction of the cohort.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ZoneSize {
    Count(u32),
    Fraction(f64),
}

impl ZoneSize {
    /// Of a cohort of `size` in a league of full cohorts of `full`: a count scales with the
    /// cohort (rounded down), a fraction is of the cohort (rounded down).
    pub fn of(self, size: u32, full: u32) -> u32 {
        match self {
            ZoneSize::Count(count) => count.min(full) * size / full.max(1),
            // Exact for the fractions people write (0.2 of 30 is 6, not 5.999…).
            ZoneSize::Fraction(share) => ((share * f64::from(size)) + 1e-9).floor() as u32,
        }
    }
}

/// A tier's own zone sizes (`per_tier = { gold = { promote = 3 } }`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TierZones {
    #[serde(default)]
    pub promote: Option<ZoneSize>,
    #[serde(default)]
    pub demote: Option<ZoneSize>,
}

/// `league = { period = "week", cohort_size = 30, tiers = [...], promote = 10, demote = 5 }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLeague {
    pub period: PeriodKind,
    pub cohort_size: u32,
    pub tiers: Vec<String>,
    pub promote: ZoneSize,
    pub demote: ZoneSize,
    #[serde(default)]
    pub per_tier: BTreeMap<String, TierZones>,
    #[serde(default)]
    pub idle: Idle,
}

/// What happens to the tier of a player who did not play a period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Idle {
    /// They keep it.
    #[default]
    Keep,
    /// They drop one tier (not below the lowest) at the period's close.
    Drop,
}

/// A board's league, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct League {
    /// The board's own period of that name (a week with the board's first day).
    pub period: PeriodKind,
    pub cohort_size: u32,
    /// Lowest first.
    pub tiers: Vec<String>,
    /// Per tier, lowest first: (promote, demote).
    pub zones: Vec<(ZoneSize, ZoneSize)>,
    pub idle: Idle,
}

/// Where a member of a closed cohort ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Zone {
    Promote,
    Stay,
    Demote,
    /// Did not play the period (sat it out, or ended it with no score): dropped a tier for it
    /// under `Idle::Drop`, kept it otherwise (results only).
    Idle,
}

impl Zone {
    pub fn as_str(self) -> &'static str {
        match self {
            Zone::Promote => "promote",
            Zone::Stay => "stay",
            Zone::Demote => "demote",
            Zone::Idle => "idle",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Zone::Promote, Zone::Stay, Zone::Demote, Zone::Idle].into_iter().find(|z| z.as_str() == text)
    }
}

/// How many of one cohort promote and demote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zones {
    pub promote: u32,
    pub demote: u32,
}

impl Zones {
    /// The zones of a cohort of `size` in `tier`: none promote from the top tier or demote from
    /// the bottom, and the two zones never overlap.
    pub fn of(league: &League, tier: usize, size: u32) -> Self {
        let Some((promote, demote)) = league.zones.get(tier) else {
            return Self { promote: 0, demote: 0 };
        };
        let top = tier + 1 >= league.tiers.len();
        let promote = if top { 0 } else { promote.of(size, league.cohort_size) };
        let demote = if tier == 0 { 0 } else { demote.of(size, league.cohort_size) };
        Self { promote: promote.min(size), demote: demote.min(size - promote.min(size)) }
    }

    /// The zone of the member at 1-based `rank` of a cohort of `size`.
    pub fn zone(self, rank: u32, size: u32) -> Zone {
        if rank <= self.promote {
            Zone::Promote
        } else if rank + self.demote > size {
            Zone::Demote
        } else {
            Zone::Stay
        }
    }
}

/// The tier after a period ending in `zone`, in a league of `tiers` tiers.
pub fn next_tier(tier: usize, zone: Zone, tiers: usize) -> usize {
    match zone {
        Zone::Promote => (tier + 1).min(tiers.saturating_sub(1)),
        Zone::Stay => tier,
        Zone::Demote | Zone::Idle => tier.saturating_sub(1),
    }
}

/// The result of a player who did not play a period and dropped from `tier` for it.
pub fn idle_outcome(tier: usize) -> Outcome {
    Outcome { tier, cohort: 0, rank: 0, zone: Zone::Idle, next_tier: next_tier(tier, Zone::Idle, usize::MAX), points: None }
}

/// What one member of a closed cohort got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub tier: usize,
    pub cohort: u32,
    pub rank: u32,
    pub zone: Zone,
    pub next_tier: usize,
    /// `None` for a member with no score (on a score board, where 0 is a score like any
    /// other), and for a player who sat the period out.
    pub points: Option<i64>,
}

impl Outcome {
    /// As a close stores it (`league_results`): `tier,cohort,rank,zone,next_tier,points`, the
    /// points empty for none.
    pub fn encode(&self) -> String {
        let points = self.points.map_or_else(String::new, |p| p.to_string());
        format!("{},{},{},{},{},{points}", self.tier, self.cohort, self.rank, self.zone.as_str(), self.next_tier)
    }

    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.split(',');
        let mut next = || parts.next();
        Some(Self {
            tier: next()?.parse().ok()?,
            cohort: next()?.parse().ok()?,
            rank: next()?.parse().ok()?,
            zone: Zone::parse(next()?)?,
            next_tier: next()?.parse().ok()?,
            points: match next()? {
                "" => None,
                points => Some(points.parse().ok()?),
            },
        })
    }
}

/// Closes one cohort of `tier`: `standings` are its members best first (board order, ties
/// already broken by who reached the score first), with their points (`None`: no score). A
/// member with no score at the close (corrected or voided to nothing, an entry removed) did not
/// play the period: not ranked (zone `Idle`), keeping their tier, or dropping one under
/// `Idle::Drop`, as one who never played; the zones are those of the members ranked.
pub fn close_cohort(league: &League, tier: usize, cohort: u32, standings: &[(String, Option<i64>)]) -> Vec<(String, Outcome)> {
    let size = u32::try_from(standings.iter().filter(|(_, points)| points.is_some()).count()).unwrap_or(u32::MAX);
    let zones = Zones::of(league, tier, size);
    let idle_tier = if league.idle == Idle::Drop { tier.saturating_sub(1) } else { tier };
    let mut rank = 0;
    standings
        .iter()
        .map(|(user, points)| {
            let outcome = match points {
                None => Outcome { tier, cohort, rank: 0, zone: Zone::Idle, next_tier: idle_tier, points: None },
                Some(_) => {
                    rank += 1;
                    let zone = zones.zone(rank, size);
                    Outcome { tier, cohort, rank, zone, next_tier: next_tier(tier, zone, league.tiers.len()), points: *points }
                }
            };
            (user.clone(), outcome)
        })
        .collect()
}

/// Whether a tier's last cohort, holding `last_size` players, is ranked with the cohort before
/// it at the close (docs/leagues.md#fair-ends): fewer than half a cohort can hardly move
/// anyone on its own (a late starter alone in a cohort of one could never be promoted).
pub fn joins_the_cohort_before(last_size: usize, cohort_size: u32) -> bool {
    2 * last_size < cohort_size as usize
}

/// Why a league section is refused: the field and the problem.
pub fn validate(raw: RawLeague, periods: &[PeriodKind]) -> Result<League, (String, String)> {
    let bad = |field: &str, problem: &str| Err((field.to_owned(), problem.to_owned()));
    let Some(period) = periods.iter().copied().find(|p| p.as_str() == raw.period.as_str()) else {
        return bad("period", "must be one of the board's periods");
    };
    if matches!(period, PeriodKind::All) {
        return bad("period", "an all-time period never ends, so it never closes");
    }
    if !(2..=MAX_COHORT_SIZE).contains(&raw.cohort_size) {
        return bad("cohort_size", &format!("must be 2..={MAX_COHORT_SIZE}"));
    }
    if !(2..=MAX_TIERS).contains(&raw.tiers.len()) {
        return bad("tiers", &format!("a league needs 2..={MAX_TIERS} tiers"));
    }
    for (i, tier) in raw.tiers.iter().enumerate() {
        if super::ids::validate_board_name(tier).is_err() {
            return bad(&format!("tiers[{i}]"), "must be 1-32 characters of a-z, 0-9 and '-'");
        }
        if raw.tiers[..i].contains(tier) {
            return bad(&format!("tiers[{i}]"), "listed twice");
        }
    }
    if let Some(unknown) = raw.per_tier.keys().find(|name| !raw.tiers.contains(name)) {
        return bad(&format!("per_tier.{unknown}"), "is not one of the tiers");
    }
    let size = raw.cohort_size;
    let mut zones = Vec::with_capacity(raw.tiers.len());
    for tier in &raw.tiers {
        let own = raw.per_tier.get(tier).copied().unwrap_or_default();
        let (promote, demote) = (own.promote.unwrap_or(raw.promote), own.demote.unwrap_or(raw.demote));
        let at = |field: &str| if raw.per_tier.contains_key(tier) { format!("per_tier.{tier}.{field}") } else { field.to_owned() };
        for (field, zone) in [("promote", promote), ("demote", demote)] {
            let fits = match zone {
                ZoneSize::Count(count) => count <= size,
                ZoneSize::Fraction(share) => share.is_finite() && (0.0..=1.0).contains(&share),
            };
            if !fits {
                return bad(&at(field), "must be a count of at most cohort_size or a fraction within 0..=1");
            }
        }
        if promote.of(size, size) + demote.of(size, size) > size {
            return bad(&at("demote"), "promote and demote together exceed a full cohort");
        }
        zones.push((promote, demote));
    }
    Ok(League { period, cohort_size: size, tiers: raw.tiers, zones, idle: raw.idle })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn league(promote: ZoneSize, demote: ZoneSize) -> League {
        League {
            period: PeriodKind::Week(chrono::Weekday::Mon),
            cohort_size: 30,
            tiers: ["bronze", "silver", "gold"].map(str::to_owned).to_vec(),
            zones: vec![(promote, demote); 3],
            idle: Idle::Keep,
        }
    }

    #[test]
    fn zones_shrink_with_the_cohort_and_the_ends_of_the_ladder_do_not_move() {
        let counts = league(ZoneSize::Count(10), ZoneSize::Count(5));
        assert_eq!(Zones::of(&counts, 1, 30), Zones { promote: 10, demote: 5 });
        assert_eq!(Zones::of(&counts, 1, 15), Zones { promote: 5, demote: 2 });
        assert_eq!(Zones::of(&counts, 1, 2), Zones { promote: 0, demote: 0 }, "a cohort of two is hardly a league");
        assert_eq!(Zones::of(&counts, 0, 30), Zones { promote: 10, demote: 0 });
        assert_eq!(Zones::of(&counts, 2, 30), Zones { promote: 0, demote: 5 });
        let shares = league(ZoneSize::Fraction(0.2), ZoneSize::Fraction(0.1));
        assert_eq!(Zones::of(&shares, 1, 30), Zones { promote: 6, demote: 3 });
        assert_eq!(Zones::of(&shares, 1, 9), Zones { promote: 1, demote: 0 });
        let zones = Zones { promote: 2, demote: 1 };
        assert_eq!((1..=4).map(|r| zones.zone(r, 4)).collect::<Vec<_>>(), [Zone::Promote, Zone::Promote, Zone::Stay, Zone::Demote]);
    }

    #[test]
    fn a_member_with_no_score_at_the_close_did_not_play() {
        let mut counts = league(ZoneSize::Count(10), ZoneSize::Count(10));
        let standings = vec![("a".to_owned(), Some(9)), ("b".to_owned(), Some(5)), ("c".to_owned(), None)];
        let summary = |results: Vec<(String, Outcome)>| -> Vec<(String, u32, Zone, usize)> {
            results.into_iter().map(|(u, r)| (u, r.rank, r.zone, r.next_tier)).collect()
        };
        // Zones of the two ranked: 10 of 30 is 0 of 2.
        assert_eq!(
            summary(close_cohort(&counts, 1, 1, &standings)),
            [("a".into(), 1, Zone::Stay, 1), ("b".into(), 2, Zone::Stay, 1), ("c".into(), 0, Zone::Idle, 1)]
        );
        counts.idle = Idle::Drop;
        assert_eq!(summary(close_cohort(&counts, 1, 1, &standings))[2], ("c".into(), 0, Zone::Idle, 0));
    }

    #[test]
    fn a_close_ranks_the_cohort_in_board_order_and_moves_tiers() {
        let counts = league(ZoneSize::Count(10), ZoneSize::Count(10));
        let standings: Vec<(String, Option<i64>)> = (0..6).map(|i| (format!("u{i}"), Some(60 - i * 10))).collect();
        let results = close_cohort(&counts, 1, 4, &standings);
        let summary: Vec<_> = results.iter().map(|(u, r)| (u.as_str(), r.rank, r.zone, r.next_tier)).collect();
        assert_eq!(
            summary,
            [
                ("u0", 1, Zone::Promote, 2),
                ("u1", 2, Zone::Promote, 2),
                ("u2", 3, Zone::Stay, 1),
                ("u3", 4, Zone::Stay, 1),
                ("u4", 5, Zone::Demote, 0),
                ("u5", 6, Zone::Demote, 0)
            ]
        );
        // drop_idle.lua writes this line itself.
        assert_eq!(idle_outcome(2).encode(), "2,0,0,idle,1,");
        // An earlier release stored an idle period's score as 0, and a score board's absent
        // member's too: both read as they were stored.
        assert_eq!(Outcome::decode("2,0,0,idle,1,0").map(|o| o.points), Some(Some(0)));
        let absent = Outcome { points: None, ..results[5].1.clone() };
        assert_eq!(Outcome::decode(&absent.encode()), Some(absent));
        let encoded = results[0].1.encode();
        assert_eq!(encoded, "1,4,1,promote,2,60");
        assert_eq!(Outcome::decode(&encoded), Some(results[0].1.clone()));
    }

    #[test]
    fn bad_sections_name_their_field() {
        let week = [PeriodKind::Week(chrono::Weekday::Sun)];
        let raw = || RawLeague {
            period: PeriodKind::Week(chrono::Weekday::Mon),
            cohort_size: 30,
            tiers: vec!["bronze".into(), "silver".into()],
            promote: ZoneSize::Count(10),
            demote: ZoneSize::Fraction(0.2),
            per_tier: BTreeMap::new(),
            idle: Idle::Keep,
        };
        let ok = validate(raw(), &week).unwrap();
        assert_eq!(ok.period, week[0], "the board's own week");
        let field = |change: fn(&mut RawLeague), periods: &[PeriodKind]| {
            let mut r = raw();
            change(&mut r);
            validate(r, periods).unwrap_err().0
        };
        assert_eq!(field(|_| {}, &[PeriodKind::Day]), "period");
        assert_eq!(field(|r| r.period = PeriodKind::All, &[PeriodKind::All]), "period");
        assert_eq!(field(|r| r.cohort_size = 1, &week), "cohort_size");
        assert_eq!(field(|r| r.tiers.truncate(1), &week), "tiers");
        assert_eq!(field(|r| r.tiers[1] = "bronze".into(), &week), "tiers[1]");
        assert_eq!(field(|r| r.tiers[1] = "Gold!".into(), &week), "tiers[1]");
        assert_eq!(field(|r| r.promote = ZoneSize::Count(31), &week), "promote");
        assert_eq!(field(|r| r.demote = ZoneSize::Fraction(1.5), &week), "demote");
        assert_eq!(field(|r| r.promote = ZoneSize::Count(25), &week), "demote");
        assert_eq!(field(|r| _ = r.per_tier.insert("gold".into(), TierZones::default()), &week), "per_tier.gold");
        let own =
            |r: &mut RawLeague| _ = r.per_tier.insert("silver".into(), TierZones { promote: None, demote: Some(ZoneSize::Count(29)) });
        assert_eq!(field(own, &week), "per_tier.silver.demote");
    }
}
