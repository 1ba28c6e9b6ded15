//! Periods: which day / week / month / season an instant belongs to in a board's timezone,
//! when that period ends, and how long its keys live. Pure: every function takes the time.

mod cron;

pub use cron::{Cron, CronError};

use chrono::{DateTime, Datelike, Duration, Months, NaiveDate, TimeZone, Utc, Weekday};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeriodKind {
    Day,
    /// Seven days from the board's first day of the week (`week_start`, Monday by default: the
    /// ISO week). Named `2026-W48` by the ISO week of its fourth day, so a Monday week's id is
    /// its ISO week and every other start still gives consecutive weeks consecutive ids.
    Week(Weekday),
    Month,
    /// A calendar month that is archived when it ends.
    Season,
    /// All time: never resets, never expires.
    All,
    /// From one time a five-field schedule names to the next, in the board's timezone (a `cron`
    /// tournament's instances). Named `2026-11-30T1800` by the local minute it opens.
    Cron(Cron),
}

/// The kinds a configuration or a request names; a week starts on Monday until the board says
/// otherwise (`Board::period_kind` finds the board's own).
const NAMED: [PeriodKind; 5] = [PeriodKind::Day, PeriodKind::Week(Weekday::Mon), PeriodKind::Month, PeriodKind::Season, PeriodKind::All];

impl Serialize for PeriodKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for PeriodKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Self::parse(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown period {name:?}: expected one of day, week, month, season, all")))
    }
}

impl PeriodKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PeriodKind::Day => "day",
            PeriodKind::Week(_) => "week",
            PeriodKind::Month => "month",
            PeriodKind::Season => "season",
            PeriodKind::All => "all",
            PeriodKind::Cron(_) => "cron",
        }
    }

    /// The kind named `s`, a week starting on Monday (see `NAMED`).
    pub fn parse(s: &str) -> Option<Self> {
        NAMED.into_iter().find(|p| p.as_str() == s)
    }

    /// Whether every period of this kind contains the whole period of `inner` kind that shares
    /// an instant with it (a week contains its days, but no month contains its weeks).
    pub fn contains(self, inner: PeriodKind) -> bool {
        match (self, inner) {
            (PeriodKind::All, _) => true,
            (PeriodKind::Cron(_), inner) => inner == self,
            (PeriodKind::Month | PeriodKind::Season, PeriodKind::Month | PeriodKind::Season) => true,
            (_, PeriodKind::Day) => true,
            (outer, inner) => outer == inner,
        }
    }

    /// How long a period's board outlives the period's end (docs/keys.md).
    /// `None`: no expiry.
    pub fn retention(self) -> Option<Duration> {
        match self {
            // ~31 days of history for day boards, as the common hand-rolled design keeps.
            PeriodKind::Day => Some(Duration::days(30)),
            // Five weeks: this week and the four before it can be read, as a month board's
            // reader would expect of "last week".
            PeriodKind::Week(_) => Some(Duration::days(35)),
            // Seed 001 keeps month boards for a year.
            PeriodKind::Month => Some(Duration::days(365)),
            // Archived seasons are deleted by the archive job once verified; the expiry is only a
            // backstop far beyond the archive schedule and its retries.
            PeriodKind::Season => Some(Duration::days(90)),
            PeriodKind::All => None,
            // As long as a week's: a schedule's instances are its tournament's, whose results
            // the archive stores when each ends.
            PeriodKind::Cron(_) => Some(Duration::days(35)),
        }
    }
}

/// A period as the API reports it: ISO-8601 times with the board's offset; `null` for all-time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeriodInfo {
    pub period: &'static str,
    pub period_id: String,
    pub period_start: Option<String>,
    pub next_reset: Option<String>,
}

/// One concrete period of a board, e.g. the day 2026-11-22 in Asia/Shanghai.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    pub kind: PeriodKind,
    /// `2026-11-22` (day), `2026-W48` (week), `2026-11` (month, season), `all`.
    pub id: String,
    pub start: Option<DateTime<Tz>>,
    /// First instant of the next period (`None` for all-time).
    pub end: Option<DateTime<Tz>>,
}

impl Period {
    pub fn containing(kind: PeriodKind, at: DateTime<Utc>, tz: Tz) -> Self {
        let local = at.with_timezone(&tz);
        let (start, end, id) = match kind {
            PeriodKind::Day => {
                let day = local.date_naive();
                (day, day.succ_opt().unwrap_or(NaiveDate::MAX), day.format("%Y-%m-%d").to_string())
            }
            PeriodKind::Week(first_day) => {
                let day = local.date_naive();
                let back = (7 + day.weekday().num_days_from_monday() - first_day.num_days_from_monday()) % 7;
                let first = day.checked_sub_signed(Duration::days(i64::from(back))).unwrap_or(NaiveDate::MIN);
                (first, first.checked_add_signed(Duration::days(7)).unwrap_or(NaiveDate::MAX), week_id(first))
            }
            PeriodKind::Month | PeriodKind::Season => {
                let first = month_start(local.year(), local.month());
                (first, next_month(first), first.format("%Y-%m").to_string())
            }
            PeriodKind::All => return Self { kind, id: "all".into(), start: None, end: None },
            PeriodKind::Cron(cron) => {
                let (start, end) = cron.bounds(at, tz);
                let id = cron::id_of(start, tz);
                return Self { kind, id, start: Some(start.with_timezone(&tz)), end: Some(end.with_timezone(&tz)) };
            }
        };
        Self { kind, id, start: Some(local_midnight(start, tz)), end: Some(local_midnight(end, tz)) }
    }

    /// The period named by a date in the board's timezone (the `at=` query parameter).
    pub fn on_date(kind: PeriodKind, date: NaiveDate, tz: Tz) -> Self {
        Self::containing(kind, local_midnight(date, tz).with_timezone(&Utc), tz)
    }

    /// The period of `kind` whose id is `id` (`2026-11-22`, `2026-W48`, `2026-11`, `all`) in `tz`.
    pub fn named(kind: PeriodKind, id: &str, tz: Tz) -> Result<Self, DateError> {
        let day = match kind {
            PeriodKind::Day => parse_day(id)?,
            // The ISO week's Thursday is the fourth day of exactly one week of any start.
            PeriodKind::Week(_) => parse_week(id)? + Duration::days(3),
            PeriodKind::Month | PeriodKind::Season => parse_month(id)?,
            PeriodKind::All if id == "all" => FIRST_DATE,
            PeriodKind::All => return Err(DateError::Malformed),
            PeriodKind::Cron(cron) => {
                in_range(parse_day(id.get(..10).ok_or(DateError::Malformed)?)?)?;
                let at = cron.fire_named(id, tz).ok_or(DateError::NotScheduled)?;
                return Ok(Self::containing(kind, at, tz));
            }
        };
        Ok(Self::on_date(kind, day, tz))
    }

    /// What clients show about the period: its id, when it started and when it resets.
    pub fn info(&self) -> PeriodInfo {
        PeriodInfo {
            period: self.kind.as_str(),
            period_id: self.id.clone(),
            period_start: self.start.map(|t| t.to_rfc3339()),
            next_reset: self.end.map(|t| t.to_rfc3339()),
        }
    }

    /// The period of the same kind just before this one (`None` for all-time).
    pub fn previous(&self) -> Option<Self> {
        let start = self.start?;
        // A cron period before the searched years is its own previous one: there is none.
        Some(Self::containing(self.kind, start.with_timezone(&Utc) - Duration::seconds(1), start.timezone()))
            .filter(|p| p.start < self.start)
    }

    /// The periods of the same kind before this one, the latest first.
    pub fn before(&self) -> impl Iterator<Item = Period> {
        std::iter::successors(self.previous(), Period::previous)
    }

    /// The period of the same kind just after this one (`None` for all-time).
    pub fn following(&self) -> Option<Self> {
        let end = self.end?;
        Some(Self::containing(self.kind, end.with_timezone(&Utc), end.timezone())).filter(|p| p.start > self.start)
    }

    /// Unix time at which this period's keys expire, if they do.
    pub fn expires_at(&self) -> Option<i64> {
        let end = self.end?.with_timezone(&Utc);
        Some(end.checked_add_signed(self.kind.retention()?).unwrap_or(DateTime::<Utc>::MAX_UTC).timestamp())
    }

    /// This period's keys' TTL from `now`, as the scripts take it (see `ttl_secs`).
    pub fn ttl_secs(&self, now: DateTime<Utc>) -> i64 {
        ttl_secs(self.expires_at(), now)
    }
}

/// Seconds from `now` until Unix time `expires_at`, as the scripts' `EXPIRE … NX` takes them:
/// 0 for a key that never expires, at least 1 otherwise. Keys get TTLs relative to the clock
/// that chose their period, never absolute times: a key's life is measured on one clock, so
/// a function's injected clock (tests) or a skewed one cannot make Redis delete a key the
/// moment it is written.
pub fn ttl_secs(expires_at: Option<i64>, now: DateTime<Utc>) -> i64 {
    expires_at.map_or(0, |at| (at - now.timestamp()).max(1))
}

/// The dates the API accepts: the days scores can be reached on (the tie-break composite's
/// range, see tiebreak.rs). Outside it no board has data, and period arithmetic stays far
/// from chrono's limits.
pub const FIRST_DATE: NaiveDate = NaiveDate::from_ymd_opt(2020, 1, 1).expect("a valid date");
pub const LAST_DATE: NaiveDate = NaiveDate::from_ymd_opt(2088, 1, 18).expect("a valid date");

/// Why a date or month the API was given is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DateError {
    #[error("must be a date written YYYY-MM-DD (a month: YYYY-MM)")]
    Malformed,
    #[error("must be between 2020-01-01 and 2088-01-18")]
    OutOfRange,
    /// A cron period's id names a local minute its schedule does not.
    #[error("must be a time the schedule opens an instance, written YYYY-MM-DDTHHMM in its timezone")]
    NotScheduled,
}

/// `date` when it is within `FIRST_DATE..=LAST_DATE`.
pub fn in_range(date: NaiveDate) -> Result<NaiveDate, DateError> {
    if (FIRST_DATE..=LAST_DATE).contains(&date) { Ok(date) } else { Err(DateError::OutOfRange) }
}

/// A `YYYY-MM-DD` day within the accepted range. Strict: chrono alone also takes `+262142-12-31`.
pub fn parse_day(text: &str) -> Result<NaiveDate, DateError> {
    let date = NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| DateError::Malformed)?;
    in_range(date)?;
    // In range, so four digits of year: anything longer has a sign or a one-digit field.
    if text.len() == 10 { Ok(date) } else { Err(DateError::Malformed) }
}

/// A `YYYY-MM` month within the accepted range: its first day.
pub fn parse_month(text: &str) -> Result<NaiveDate, DateError> {
    parse_day(&format!("{text}-01"))
}

/// A `YYYY-Www` ISO week (`2026-W48`) within the accepted range: its Monday.
pub fn parse_week(text: &str) -> Result<NaiveDate, DateError> {
    let (year, week) = text.split_once("-W").ok_or(DateError::Malformed)?;
    let well_formed = year.len() == 4 && week.len() == 2 && (year.bytes().chain(week.bytes())).all(|b| b.is_ascii_digit());
    if !well_formed {
        return Err(DateError::Malformed);
    }
    let (year, week) = (year.parse().map_err(|_| DateError::Malformed)?, week.parse().map_err(|_| DateError::Malformed)?);
    let monday = NaiveDate::from_isoywd_opt(year, week, Weekday::Mon).ok_or(DateError::Malformed)?;
    in_range(monday)
}

/// The id of the week that starts on `first`: the ISO week of its fourth day.
fn week_id(first: NaiveDate) -> String {
    let fourth = first.checked_add_signed(Duration::days(3)).unwrap_or(NaiveDate::MAX).iso_week();
    format!("{:04}-W{:02}", fourth.year(), fourth.week())
}

/// The first day of a month. Period code never panics: at chrono's own limits (far outside
/// what the API accepts, see `parse_day`) it saturates instead.
fn month_start(year: i32, month: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(year, month, 1).unwrap_or(if year < 0 { NaiveDate::MIN } else { NaiveDate::MAX })
}

fn next_month(first: NaiveDate) -> NaiveDate {
    if first.month() == 12 { month_start(first.year().saturating_add(1), 1) } else { month_start(first.year(), first.month() + 1) }
}

/// `2026-11` for any day of November 2026.
pub fn month_id(date: NaiveDate) -> String {
    date.format("%Y-%m").to_string()
}

pub fn first_of_month(date: NaiveDate) -> NaiveDate {
    date.with_day(1).expect("day 1 exists in every month")
}

pub fn days_in_month(date: NaiveDate) -> u32 {
    let first = first_of_month(date);
    let next = first + Months::new(1);
    u32::try_from((next - first).num_days()).expect("a month has 28-31 days")
}

pub fn previous_month(date: NaiveDate) -> NaiveDate {
    first_of_month(date) - Months::new(1)
}

/// The first instant of `date` in `tz` (a DST gap at midnight moves it to the first valid time).
fn local_midnight(date: NaiveDate, tz: Tz) -> DateTime<Tz> {
    let mut time = date.and_time(chrono::NaiveTime::MIN);
    loop {
        if let Some(t) = tz.from_local_datetime(&time).earliest() {
            return t;
        }
        match time.checked_add_signed(Duration::minutes(15)) {
            Some(later) => time = later,
            // Only at chrono's last representable day: fall back to UTC midnight.
            None => return Utc.from_utc_datetime(&date.and_time(chrono::NaiveTime::MIN)).with_timezone(&tz),
        }
    }
}

/// Why an event's time is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EventTimeError {
    #[error("occurred_at is older than the {0}-second grace window")]
    TooLate(i64),
    #[error("occurred_at is more than {0} seconds in the future")]
    InFuture(i64),
    /// A tournament's instance is not open at the write's time (docs/tournaments.md); a retry
    /// of a write applied while it was open is still answered as the duplicate it is.
    #[error("the tournament is not open at this write's time")]
    Closed,
}

impl EventTimeError {
    pub fn code(self) -> &'static str {
        match self {
            EventTimeError::TooLate(_) => "too_late",
            EventTimeError::InFuture(_) => "in_future",
            EventTimeError::Closed => "tournament_closed",
        }
    }
}

/// Accepted lateness and clock skew for `occurred_at`.
#[derive(Debug, Clone, Copy)]
pub struct EventWindow {
    pub grace: Duration,
    pub max_future: Duration,
}

impl Default for EventWindow {
    fn default() -> Self {
        Self { grace: Duration::minutes(15), max_future: Duration::minutes(1) }
    }
}

impl EventWindow {
    pub fn check(&self, occurred_at: DateTime<Utc>, now: DateTime<Utc>) -> Result<(), EventTimeError> {
        if occurred_at < now - self.grace {
            return Err(EventTimeError::TooLate(self.grace.num_seconds()));
        }
        if occurred_at > now + self.max_future {
            return Err(EventTimeError::InFuture(self.max_future.num_seconds()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod cron_tests;
#[cfg(test)]
mod tests;
