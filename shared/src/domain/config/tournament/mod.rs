//! Tournaments (docs/tournaments.md): a score board open for a window, once or again on every
//! reset, with a size cap, a limit on attempts and prizes by rank. This module holds the rules,
//! pure, time passed in: what a definition may say, which instance is open at an instant,
//! a tournament's state and next reset, and the prize of a rank. An instance is a period of the
//! tournament's score board (`all` for a one-off, else the day, week or month of its reset in
//! its timezone), so its entries live in that period's sorted set and its id is the period's.

#[cfg(test)]
mod cron_tests;
mod definition;
mod edit;
#[cfg(test)]
mod edit_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use serde_json::Value;

use super::{Keep, Order};
use crate::domain::period::{Cron, Period, PeriodKind};
use crate::domain::tiebreak::{EXACT_BITS, MAX_SCORE};

pub use definition::{MAX_METADATA_BYTES, MAX_PRIZES, MAX_SIZE, MAX_TITLE_CHARS, TournamentError};
pub use edit::{EARLY_END_KEPT, EDITABLE, EditError, Edited, PRIZES_KEPT, PriorPrizes, prize_in};

/// The most heap a tournament's prizes and metadata may hold in a function's catalog
/// (`Tournament::without_details`).
pub const DETAILS_HELD_BYTES: usize = 1_024;

/// The heap `value` holds once parsed, as serde_json lays it out: 32 bytes a value in its
/// parent, a string's bytes, ~48 bytes a map's entry beside its key. JSON text undercounts it
/// (`[0,0,…]` is 2 bytes of text a value and 32 of heap).
fn heap_of(value: &Value) -> usize {
    32 + match value {
        Value::String(text) => text.len(),
        Value::Array(items) => items.iter().map(heap_of).sum(),
        Value::Object(map) => map.iter().map(|(key, value)| 48 + key.len() + heap_of(value)).sum(),
        _ => 0,
    }
}

/// How often a recurring tournament opens again (midnight, Monday, the 1st, in its timezone).
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
    /// A recurring tournament's other schedule: an instance opens at every time a five-field
    /// crontab names (`cron`), in its timezone. At most one of `reset` and `cron`.
    pub cron: Option<Cron>,
    /// Where a recurring tournament's resets fall (local midnight, Monday, the 1st): UTC
    /// unless the definition names an IANA timezone.
    pub timezone: chrono_tz::Tz,
    /// How long each instance of a recurring tournament stays open from its reset.
    pub duration: Option<Duration>,
    pub max_size: Option<u32>,
    pub max_entries: Option<u32>,
    pub join_required: bool,
    pub prizes: Vec<Prize>,
    pub metadata: Option<Value>,
    /// Instances ended early (`POST /v1/admin/tournaments/{id}/end`): instance id -> when.
    pub closed: BTreeMap<String, DateTime<Utc>>,
    /// When the tournament was deleted (`DELETE /v1/admin/tournaments/{id}`): the instance
    /// open then ends then, and none opens after it. Its window (and so its scale) is unchanged.
    pub deleted: Option<DateTime<Utc>>,
    /// Deleted and its end done (keys freed, definition kept only to read its results): no
    /// run looks at it again.
    pub retired: bool,
    /// Once retired, the players its last instance had, as its tombstone kept them (`None`: a
    /// tombstone from before they were kept).
    pub players_kept: Option<u64>,
    /// When it was defined (`PUT /v1/admin/tournaments/{id}`; `None` before this was stored):
    /// an instance that ended by then never ran, so a `start` in the past opens the current
    /// instance only and nothing before the tournament existed is stored or announced.
    pub defined: Option<DateTime<Utc>>,
    /// The window the board's scale was made for, once a live edit moved a one-off's end
    /// (`Tournament::edit`): the composites already kept stay in the scale they were made in.
    pub scale_window: Option<Duration>,
    /// Prizes a live edit replaced, kept for the instances that ended before it (oldest first).
    pub prior_prizes: Vec<PriorPrizes>,
    /// Whether `prizes`, `metadata` and `prior_prizes` are held (`false`: left out by
    /// `without_details`, as a function's catalog holds every tournament).
    pub details_held: bool,
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
    /// This tournament without its prizes and metadata (those in force and those a live edit
    /// replaced) when they would hold more than `DETAILS_HELD_BYTES` of heap: up to ~14 KB of a
    /// definition that no rule reads, only the routes and the end that show them. A function's
    /// catalog holds every tournament so, and stays bounded whatever the definitions hold
    /// (docs/runtime-boards.md); what shows them reads them (`with_details_of`). Smaller ones (a
    /// few prizes) are kept (`None`: nothing to leave out): the reads that show them then cost
    /// no more round trips.
    pub fn without_details(&self) -> Option<Self> {
        let prizes = |prizes: &[Prize]| prizes.iter().map(|prize| 16 + heap_of(&prize.reward)).sum::<usize>();
        let held = prizes(&self.prizes)
            + self.metadata.as_ref().map_or(0, heap_of)
            + self.prior_prizes.iter().map(|prior| 16 + prizes(&prior.prizes)).sum::<usize>();
        (held > DETAILS_HELD_BYTES).then(|| Self {
            prizes: Vec::new(),
            metadata: None,
            prior_prizes: Vec::new(),
            details_held: false,
            ..self.clone()
        })
    }

    /// This tournament with the prizes and metadata of `whole`, its definition as stored (read
    /// on demand), everything else as held.
    pub fn with_details_of(&self, whole: &Tournament) -> Self {
        Self {
            prizes: whole.prizes.clone(),
            metadata: whole.metadata.clone(),
            prior_prizes: whole.prior_prizes.clone(),
            details_held: true,
            ..self.clone()
        }
    }

    /// The kind of the score board's period that holds one instance.
    pub fn period_kind(&self) -> PeriodKind {
        self.recurrence().unwrap_or(PeriodKind::All)
    }

    /// A recurring tournament's period kind: one instance each (`None`: a one-off).
    fn recurrence(&self) -> Option<PeriodKind> {
        self.cron.map(PeriodKind::Cron).or(self.reset.map(Reset::period_kind))
    }

    /// The board period (the instance's) containing `at`, in the tournament's timezone.
    pub fn period_at(&self, at: DateTime<Utc>) -> Period {
        Period::containing(self.period_kind(), at, self.timezone)
    }

    /// The board period of instance `id` (`all`, `2027-01-08`, `2027-W02`, `2027-01`).
    pub fn period_named(&self, id: &str) -> Result<Period, crate::domain::period::DateError> {
        Period::named(self.period_kind(), id, self.timezone)
    }

    /// The instance whose period contains `at`, open or not (`None` outside `[start, end)`):
    /// a one-off's single instance, or the run of `at`'s day, week or month, cut to the
    /// tournament's window.
    fn instance_of_period(&self, at: DateTime<Utc>) -> Option<Instance> {
        if at < self.start || at >= self.end {
            return None;
        }
        let instance = match self.recurrence() {
            None => Instance { id: "all".into(), start: self.start, end: self.end },
            Some(kind) => {
                let period = Period::containing(kind, at, self.timezone);
                let opens = period.start.expect("a reset period starts").with_timezone(&Utc);
                let period_end = period.end.expect("a reset period ends").with_timezone(&Utc);
                let closes = (opens + self.duration.expect("a recurring tournament has a duration")).min(period_end);
                Instance { id: period.id, start: opens.max(self.start), end: closes.min(self.end) }
            }
        };
        // One ended early was open then, so after its definition (were that the same instant).
        let ran_since = |i: &Instance| self.defined.is_none_or(|defined| i.end > defined) || self.closed.contains_key(&i.id);
        Some(self.cut(instance)).filter(ran_since)
    }

    /// `instance` as it ran: ended when it was ended early or the tournament deleted, if it was
    /// (never before it opened: an instance after the deletion never runs).
    fn cut(&self, mut instance: Instance) -> Instance {
        for cut in [self.closed.get(&instance.id).copied(), self.deleted].into_iter().flatten() {
            instance.end = instance.end.min(cut.max(instance.start));
        }
        instance
    }

    /// Whether `instance` ran: it was open for a while, or it was ended early (only an open
    /// instance is), were that in the millisecond it opened.
    fn ran(&self, instance: &Instance) -> bool {
        instance.start < instance.end || self.closed.contains_key(&instance.id)
    }

    /// Whether `instance` opened after the tournament was deleted (it never ran), were that in
    /// the very millisecond of the deletion.
    fn after_deletion(&self, instance: &Instance) -> bool {
        // An instance ended early was open (a deletion ends the open one first).
        !self.closed.contains_key(&instance.id) && self.deleted.is_some_and(|deleted| instance.start >= deleted)
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
        let kind = self.recurrence()?;
        let from = at.max(self.start);
        let mut probe = Period::containing(kind, from, self.timezone).end.expect("a reset period ends").with_timezone(&Utc);
        // Nothing opens after a deletion: the walk stops there, not at the window's end (ten
        // years of a schedule naming every minute would be five million periods).
        let last = self.deleted.map_or(self.end, |deleted| deleted.min(self.end));
        while probe < last {
            if let Some(instance) = self.instance_of_period(probe).filter(|i| i.start < i.end) {
                return Some(instance);
            }
            probe = Period::containing(kind, probe, self.timezone).end.expect("a reset period ends").with_timezone(&Utc);
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

    /// The instance a tournament shows at `at` (its view, its list entry): the open one, else
    /// the next, else the last.
    pub fn shown_at(&self, at: DateTime<Utc>) -> Option<Instance> {
        self.open_at(at).or_else(|| self.next_after(at)).or_else(|| self.instance_named(None, at))
    }

    /// The instance a read names (`instance=`), or the open one, or the last one that ran.
    pub fn instance_named(&self, id: Option<&str>, at: DateTime<Utc>) -> Option<Instance> {
        match id {
            Some("all") if self.recurrence().is_none() => self.instance_of_period(self.start),
            Some(_) if self.recurrence().is_none() => None,
            Some(id) => {
                let kind = self.recurrence()?;
                let period = Period::named(kind, id, self.timezone).ok()?;
                let opens = period.start?.with_timezone(&Utc);
                self.instance_of_period(opens.max(self.start)).filter(|instance| instance.id == id)
            }
            None => self.open_at(at).or_else(|| self.last_before(at)),
        }
    }

    /// The instance whose results a read names when it names none (issue 59's "results by
    /// default"): a one-off's only one (`all`), else the open one, else the last that ran.
    pub fn results_instance(&self, at: DateTime<Utc>) -> Option<Instance> {
        if self.recurrence().is_none() {
            return self.instance_of_period(self.start);
        }
        self.instance_named(None, at)
    }

    /// The last instance that opened by `at` (the open one's read is `open_at`'s).
    fn last_before(&self, at: DateTime<Utc>) -> Option<Instance> {
        let probe = at.min(self.end - Duration::seconds(1));
        let instance = self.instance_of_period(probe)?;
        if instance.start <= at && self.ran(&instance) {
            return Some(instance);
        }
        // `at`'s period has not opened yet: the one before it.
        let kind = self.recurrence()?;
        let opens = Period::containing(kind, probe, self.timezone).start?.with_timezone(&Utc);
        self.instance_of_period(opens - Duration::seconds(1)).filter(|i| self.ran(i))
    }

    /// The longest an instance runs (`[start, end)` of a one-off, `duration_secs` of a
    /// recurring one).
    pub fn window(&self) -> Duration {
        self.duration.unwrap_or(self.end - self.start)
    }

    /// The window the board's scale is made for: `window`'s, unless a live edit moved it.
    fn scale_made_for(&self) -> Duration {
        self.scale_window.unwrap_or_else(|| self.window())
    }

    /// The highest score the tournament takes: every second of its window keeps its own time
    /// part beside it in one exact double (`tiebreak::time_span_for`), so equal scores rank by
    /// who reached them first to the second. `MAX_SCORE` up to a window of 2^23 s (97 days).
    pub fn max_score(&self) -> i64 {
        let secs = self.scale_made_for().num_seconds().max(1);
        let time_bits = 64 - (secs - 1).leading_zeros();
        MAX_SCORE.min((1i64 << (EXACT_BITS - time_bits)) - 1)
    }

    /// Where the time parts of `period` (one of the tournament's instances) count from: the
    /// instance's opening.
    pub fn origin_of(&self, period: &Period) -> i64 {
        period.start.map_or(self.start, |start| start.with_timezone(&Utc).max(self.start)).timestamp()
    }

    /// The `most` recent instances that ended by `now`, and after `after` (an instance ending
    /// then or before is finished), latest first: their results are due.
    pub fn ended_by(&self, now: DateTime<Utc>, after: Option<DateTime<Utc>>, most: usize) -> Vec<Instance> {
        let mut ended = Vec::new();
        // Nothing runs after a deletion: the walk back starts there.
        let mut at = self.deleted.map_or(now, |deleted| now.min(deleted));
        while ended.len() < most && at >= self.start {
            let Some(instance) = self.instance_named(None, at) else { break };
            if after.is_some_and(|after| instance.end <= after) {
                break;
            }
            if instance.end <= now && ended.last() != Some(&instance) && !self.after_deletion(&instance) {
                ended.push(instance.clone());
            }
            at = instance.start - Duration::seconds(1);
        }
        ended
    }

    /// `ended_by`'s instances walked forward: those that ended after `after` and by `through`,
    /// the `most` oldest, oldest first (where a prune of their records goes on from).
    pub fn ended_between(&self, after: DateTime<Utc>, through: DateTime<Utc>, most: usize) -> Vec<Instance> {
        let mut ended: Vec<Instance> = Vec::new();
        let mut next = self.instance_of_period(after).or_else(|| self.next_after(after));
        while let Some(instance) = next {
            if ended.len() >= most || instance.end > through {
                break;
            }
            if instance.end > after && !self.after_deletion(&instance) {
                ended.push(instance.clone());
            }
            next = self.next_after(instance.start);
        }
        ended
    }
}

/// Where a tournament's watermark of ended instances moves after a run: past its oldest
/// instances that are finished, up to the first that is not. `instances` are every one after
/// the watermark (in any order), each with whether it is finished; when the walk back did not
/// reach the watermark (`complete` false) older ones are unseen, and it stays.
pub fn ended_through(instances: &[Instance], finished: &[bool], complete: bool) -> Option<DateTime<Utc>> {
    if !complete {
        return None;
    }
    // An instance not looked at (the run's deadline came first) is not finished.
    let mut oldest_first: Vec<(&Instance, bool)> =
        instances.iter().enumerate().map(|(i, instance)| (instance, finished.get(i).copied().unwrap_or(false))).collect();
    oldest_first.sort_by_key(|(instance, _)| instance.end);
    oldest_first.iter().take_while(|(_, finished)| *finished).last().map(|(instance, _)| instance.end)
}
