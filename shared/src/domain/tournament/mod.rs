//! Tournaments (docs/tournaments.md): a score board open for a window, once or again on every
//! reset, with a size cap, a limit on attempts and prizes by rank. This module holds the rules,
//! pure, time passed in: what a definition may say, which instance is open at an instant,
//! a tournament's state and next reset, and the prize of a rank. An instance is a period of the
//! tournament's score board (UTC: `all` for a one-off, else the day, week or month of its
//! reset), so its entries live in that period's sorted set and its id is the period's.

mod definition;
#[cfg(test)]
mod tests;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::domain::config::{Keep, Order};
use crate::domain::period::{Period, PeriodKind};

pub use definition::{MAX_METADATA_BYTES, MAX_PRIZES, MAX_SIZE, MAX_TITLE_CHARS, TournamentError};

/// How often a recurring tournament opens again (UTC boundaries: midnight, Monday, the 1st).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reset {
    Day,
    Week,
    Month,
}

impl Reset {
    pub fn period_kind(self) -> PeriodKind {
        match self {
            Reset::Day => PeriodKind::Day,
            Reset::Week => PeriodKind::Week(chrono::Weekday::Mon),
            Reset::Month => PeriodKind::Month,
        }
    }
}

/// A prize: the ranks `from..=to` (1-based) get `reward` (any JSON the operator chose).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prize {
    pub ranks: [u64; 2],
    pub reward: Value,
}

/// A validated tournament (`Tournament::parse`).
#[derive(Debug, Clone, PartialEq)]
pub struct Tournament {
    pub id: String,
    pub title: String,
    pub description: Option<String>,
    pub category: Option<String>,
    pub keep: Keep,
    pub order: Order,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub reset: Option<Reset>,
    /// How long each instance of a recurring tournament stays open from its reset.
    pub duration: Option<Duration>,
    pub max_size: Option<u32>,
    pub max_entries: Option<u32>,
    pub join_required: bool,
    pub prizes: Vec<Prize>,
    pub metadata: Option<Value>,
}

/// Where a tournament stands at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Not open now; an instance opens later.
    Upcoming,
    Open,
    /// No instance opens again.
    Ended,
}

/// One run of a tournament: `[start, end)`, named by its period's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub id: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl Tournament {
    /// The kind of the score board's period that holds one instance.
    pub fn period_kind(&self) -> PeriodKind {
        self.reset.map_or(PeriodKind::All, Reset::period_kind)
    }

    /// The instance whose period contains `at`, open or not (`None` outside `[start, end)`):
    /// a one-off's single instance, or the run of `at`'s day, week or month, cut to the
    /// tournament's window.
    fn instance_of_period(&self, at: DateTime<Utc>) -> Option<Instance> {
        if at < self.start || at >= self.end {
            return None;
        }
        let Some(reset) = self.reset else {
            return Some(Instance { id: "all".into(), start: self.start, end: self.end });
        };
        let period = Period::containing(reset.period_kind(), at, chrono_tz::UTC);
        let opens = period.start.expect("a reset period starts").with_timezone(&Utc);
        let closes = opens + self.duration.expect("a recurring tournament has a duration");
        Some(Instance { id: period.id, start: opens.max(self.start), end: closes.min(self.end) })
    }

    /// The instance open at `at`: a write's own time decides where it lands, or that it is
    /// refused (`tournament_closed`).
    pub fn open_at(&self, at: DateTime<Utc>) -> Option<Instance> {
        self.instance_of_period(at).filter(|instance| instance.start <= at && at < instance.end)
    }

    /// The first instance that opens after `at` (`None`: none does).
    pub fn next_after(&self, at: DateTime<Utc>) -> Option<Instance> {
        if at < self.start
            && let Some(first) = self.instance_of_period(self.start).filter(|i| i.start < i.end)
        {
            return Some(first);
        }
        let reset = self.reset?;
        let from = at.max(self.start);
        let mut probe = Period::containing(reset.period_kind(), from, chrono_tz::UTC).end.expect("a reset period ends").with_timezone(&Utc);
        while probe < self.end {
            if let Some(instance) = self.instance_of_period(probe).filter(|i| i.start < i.end) {
                return Some(instance);
            }
            probe = Period::containing(reset.period_kind(), probe, chrono_tz::UTC).end.expect("a reset period ends").with_timezone(&Utc);
        }
        None
    }

    pub fn state_at(&self, at: DateTime<Utc>) -> State {
        if self.open_at(at).is_some() {
            State::Open
        } else if self.next_after(at).is_some() {
            State::Upcoming
        } else {
            State::Ended
        }
    }

    /// The instance a read names (`instance=`), or the open one, or the last one that ran.
    pub fn instance_named(&self, id: Option<&str>, at: DateTime<Utc>) -> Option<Instance> {
        match id {
            Some("all") if self.reset.is_none() => self.instance_of_period(self.start),
            Some(_) if self.reset.is_none() => None,
            Some(id) => {
                let kind = self.reset?.period_kind();
                let period = Period::named(kind, id, chrono_tz::UTC).ok()?;
                let opens = period.start?.with_timezone(&Utc);
                self.instance_of_period(opens.max(self.start)).filter(|instance| instance.id == id)
            }
            None => self.open_at(at).or_else(|| self.last_before(at)),
        }
    }

    /// The last instance that opened by `at` (the open one's read is `open_at`'s).
    fn last_before(&self, at: DateTime<Utc>) -> Option<Instance> {
        let probe = at.min(self.end - Duration::seconds(1));
        let instance = self.instance_of_period(probe)?;
        if instance.start <= at && instance.start < instance.end {
            return Some(instance);
        }
        // `at`'s period has not opened yet: the one before it.
        let kind = self.reset?.period_kind();
        let opens = Period::containing(kind, probe, chrono_tz::UTC).start?.with_timezone(&Utc);
        self.instance_of_period(opens - Duration::seconds(1)).filter(|i| i.start < i.end)
    }

    /// The reward of `rank` (1-based), if a prize covers it.
    pub fn prize_of(&self, rank: u64) -> Option<&Value> {
        self.prizes.iter().find(|prize| prize.ranks[0] <= rank && rank <= prize.ranks[1]).map(|prize| &prize.reward)
    }
}
