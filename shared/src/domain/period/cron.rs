//! Five-field crontab schedules (crontab(5)) as period boundaries: a `cron` tournament's
//! instance opens at each time its schedule names, in the tournament's timezone. Pure: every
//! function takes the time.
//!
//! Fire times are local wall-clock minutes. A local minute a clock change skips (02:30 the night
//! the clocks go forward) fires when the clocks land (03:00); one that happens twice (01:30 the
//! night they go back) fires the first time only. Both rules keep fire times in the order of
//! their local minutes, which is what lets every search below walk local time.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

/// A parsed schedule: the minutes, hours, days, months and weekdays it names, as bit sets, so a
/// period kind holding it stays `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    /// Bits 1..=31.
    days: u32,
    /// Bits 1..=12.
    months: u16,
    /// Bits 0..=6, Sunday 0.
    weekdays: u8,
    /// Both the day of the month and the day of the week are restricted (neither field starts
    /// with `*`): a day matches either, as crontab(5) says; otherwise it must match both.
    either_day: bool,
}

/// The closest two instances of one schedule open: a tournament's ends are stored and announced
/// instance by instance, and the archive walks at most 10,000 of a backlog (104 days of these).
pub const MIN_SPACING_MINUTES: u32 = 15;

/// Why a schedule is refused: the field and what it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CronError(String);

/// How far a search for a fire time walks, either way: past every date the API accepts, and
/// far enough that a schedule firing once in 28 years (a weekday's 29th of February) is found.
const FIRST_SEARCHED: NaiveDate = NaiveDate::from_ymd_opt(2014, 1, 1).expect("a valid date");
const LAST_SEARCHED: NaiveDate = NaiveDate::from_ymd_opt(2094, 1, 1).expect("a valid date");

const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// One field's allowed values and names.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

impl Field {
    fn value(&self, text: &str) -> Result<u32, CronError> {
        let named = self.names.iter().position(|name| name.eq_ignore_ascii_case(text)).map(|i| i as u32 + self.min);
        let value = named.or_else(|| text.parse().ok().filter(|_| text.bytes().all(|b| b.is_ascii_digit())));
        // Day of week 7 is Sunday too.
        let top = if self.name == "day of week" { 7 } else { self.max };
        value.filter(|v| (self.min..=top).contains(v)).ok_or_else(|| self.error(&format!("{text:?} is not within {}-{top}", self.min)))
    }

    fn error(&self, problem: &str) -> CronError {
        CronError(format!("{}: {problem}", self.name))
    }

    /// The bit set of `text`: a comma-separated list of `*`, `n`, `a-b`, each with an optional
    /// `/step`.
    fn bits(&self, text: &str) -> Result<u64, CronError> {
        let mut bits = 0u64;
        for item in text.split(',') {
            let (range, step) = match item.split_once('/') {
                Some((range, step)) => {
                    let digits = !step.is_empty() && step.bytes().all(|b| b.is_ascii_digit());
                    let step: u32 = step
                        .parse()
                        .ok()
                        .filter(|s| digits && *s >= 1)
                        .ok_or_else(|| self.error(&format!("step {step:?} must be a number from 1")))?;
                    (range, Some(step))
                }
                None => (item, None),
            };
            let (from, to) = match range {
                "*" => (self.min, self.max),
                _ => match range.split_once('-') {
                    Some((a, b)) => (self.value(a)?, self.value(b)?),
                    // `5/15` runs from 5 to the field's end, as in most crons.
                    None if step.is_some() => (self.value(range)?, self.max),
                    None => (self.value(range)?, self.value(range)?),
                },
            };
            if from > to {
                return Err(self.error(&format!("range {range:?} runs backwards")));
            }
            for v in (from..=to).step_by(step.unwrap_or(1) as usize) {
                // Day of week 7 is Sunday, 0.
                bits |= 1 << if self.name == "day of week" { v % 7 } else { v };
            }
        }
        Ok(bits)
    }
}

const FIELDS: [Field; 5] = [
    Field { name: "minute", min: 0, max: 59, names: &[] },
    Field { name: "hour", min: 0, max: 23, names: &[] },
    Field { name: "day of month", min: 1, max: 31, names: &[] },
    Field { name: "month", min: 1, max: 12, names: &MONTHS },
    Field { name: "day of week", min: 0, max: 6, names: &WEEKDAYS },
];

impl Cron {
    /// `minute hour day-of-month month day-of-week`, or one of `@hourly`, `@daily`
    /// (`@midnight`), `@weekly`, `@monthly`, `@yearly` (`@annually`). Refused when it can never
    /// fire (`0 0 30 2 *`).
    pub fn parse(text: &str) -> Result<Self, CronError> {
        let expanded = match text.trim() {
            "@hourly" => "0 * * * *",
            "@daily" | "@midnight" => "0 0 * * *",
            "@weekly" => "0 0 * * 0",
            "@monthly" => "0 0 1 * *",
            "@yearly" | "@annually" => "0 0 1 1 *",
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(CronError(format!("five fields (minute hour day-of-month month day-of-week), not {}", fields.len())));
        }
        let mut bits = [0u64; 5];
        for ((field, text), bits) in FIELDS.iter().zip(&fields).zip(&mut bits) {
            *bits = field.bits(text)?;
        }
        let cron = Self {
            minutes: bits[0],
            hours: bits[1] as u32,
            days: bits[2] as u32,
            months: bits[3] as u16,
            weekdays: bits[4] as u8,
            either_day: !fields[2].starts_with('*') && !fields[4].starts_with('*'),
        };
        // Every day of the week comes in every month; a day of the month only in long enough ones.
        let longest = |month: u32| if month == 2 { 29 } else { 30 + u32::from(month != 4 && month != 6 && month != 9 && month != 11) };
        let a_day = (1..=12).filter(|m| cron.months & (1 << m) != 0).any(|m| (1..=longest(m)).any(|d| cron.days & (1 << d) != 0));
        if !a_day && !cron.either_day {
            return Err(CronError("the day of month is in none of the months named: the schedule never fires".into()));
        }
        if cron.first_fire_after(NaiveDate::from_ymd_opt(2020, 1, 1).expect("a valid date").and_time(NaiveTime::MIN)).is_none() {
            return Err(CronError("the schedule never fires (searched up to 2094)".into()));
        }
        if cron.closest_minutes() < MIN_SPACING_MINUTES {
            return Err(CronError(format!(
                "minute: instances open at most every {MIN_SPACING_MINUTES} minutes (name minutes at least {MIN_SPACING_MINUTES} apart)"
            )));
        }
        Ok(cron)
    }

    /// The fewest minutes between two minutes the schedule names, across the hour too (59 and 1
    /// are two apart): the closest two fire times can be.
    fn closest_minutes(&self) -> u32 {
        let named: Vec<u32> = (0..60).filter(|m| self.minutes & (1 << m) != 0).collect();
        let wrap = named.first().zip(named.last()).map_or(60, |(first, last)| 60 - last + first);
        named.windows(2).map(|pair| pair[1] - pair[0]).fold(wrap, u32::min)
    }

    fn day_matches(&self, date: NaiveDate) -> bool {
        let by_month_day = self.days & (1 << date.day()) != 0;
        let by_weekday = self.weekdays & (1 << date.weekday().num_days_from_sunday()) != 0;
        let by_day = if self.either_day { by_month_day || by_weekday } else { by_month_day && by_weekday };
        by_day && self.months & (1 << date.month()) != 0
    }

    /// The first minute of `date` at or after minute-of-day `from` the schedule names.
    fn first_minute(&self, from: u32) -> Option<u32> {
        (from / 60..24).filter(|h| self.hours & (1 << h) != 0).find_map(|h| {
            let first = if h == from / 60 { from % 60 } else { 0 };
            (first..60).find(|m| self.minutes & (1 << m) != 0).map(|m| h * 60 + m)
        })
    }

    /// The last minute of `date` at or before minute-of-day `to` the schedule names.
    fn last_minute(&self, to: u32) -> Option<u32> {
        (0..=to / 60).rev().filter(|h| self.hours & (1 << h) != 0).find_map(|h| {
            let last = if h == to / 60 { to % 60 } else { 59 };
            (0..=last).rev().find(|m| self.minutes & (1 << m) != 0).map(|m| h * 60 + m)
        })
    }

    /// The first local minute at or after `from` (its seconds rounded up) the schedule names.
    fn first_fire_after(&self, from: NaiveDateTime) -> Option<NaiveDateTime> {
        let floor = from.with_second(0)?.with_nanosecond(0)?;
        let rounded = if floor == from { floor } else { floor + Duration::minutes(1) };
        let mut date = rounded.date();
        let mut from_minute = rounded.hour() * 60 + rounded.minute();
        while date <= LAST_SEARCHED {
            if self.day_matches(date)
                && let Some(minute) = self.first_minute(from_minute)
            {
                return Some(at_minute(date, minute));
            }
            date = date.succ_opt()?;
            from_minute = 0;
        }
        None
    }

    /// The last local minute at or before `to` the schedule names.
    fn last_fire_before(&self, to: NaiveDateTime) -> Option<NaiveDateTime> {
        let mut date = to.date();
        let mut to_minute = to.hour() * 60 + to.minute();
        while date >= FIRST_SEARCHED {
            if self.day_matches(date)
                && let Some(minute) = self.last_minute(to_minute)
            {
                return Some(at_minute(date, minute));
            }
            date = date.pred_opt()?;
            to_minute = 24 * 60 - 1;
        }
        None
    }

    /// The period of the schedule containing `at` in `tz`: from the latest fire time at or
    /// before it to the first after it (past the searched years, their ends).
    pub fn bounds(&self, at: DateTime<Utc>, tz: Tz) -> (DateTime<Utc>, DateTime<Utc>) {
        let (start, end) = self.around(at, tz);
        let midnight = |date: NaiveDate| instant(date.and_time(NaiveTime::MIN), tz);
        (start.unwrap_or_else(|| midnight(FIRST_SEARCHED)), end.unwrap_or_else(|| midnight(LAST_SEARCHED)))
    }

    /// The latest fire time at or before `at` and the first after it, in `tz` (`None` past the
    /// searched years).
    fn around(&self, at: DateTime<Utc>, tz: Tz) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
        let local = at.with_timezone(&tz).naive_local();
        // Near a clock change a local minute later than `at`'s can fire before it (the first
        // 01:50 of a night that repeats 01:00-02:00 comes before the second 01:10): walk from
        // the local time the change could reach.
        let margin = if near_change(at, tz) { Duration::hours(3) } else { Duration::zero() };
        let mut before = self.last_fire_before(local + margin);
        while let Some(fire) = before.filter(|fire| instant(*fire, tz) > at) {
            before = self.last_fire_before(fire - Duration::minutes(1));
        }
        let mut after = self.first_fire_after(local - margin);
        while let Some(fire) = after.filter(|fire| instant(*fire, tz) <= at) {
            after = self.first_fire_after(fire + Duration::minutes(1));
        }
        (before.map(|fire| instant(fire, tz)), after.map(|fire| instant(fire, tz)))
    }

    /// The fire time named by `id` (a period id: the local minute it fires, `ID_FORMAT`), if
    /// the schedule names it.
    pub fn fire_named(&self, id: &str, tz: Tz) -> Option<DateTime<Utc>> {
        let local = NaiveDateTime::parse_from_str(id, ID_FORMAT).ok().filter(|_| id.len() == 15)?;
        let at = instant(local, tz);
        self.around(at, tz).0.filter(|fire| *fire == at && id_of(at, tz) == id)
    }
}

/// A cron period's id: the local minute it opens, `2026-11-30T1800` (no `:`, which separates a
/// key's parts).
const ID_FORMAT: &str = "%Y-%m-%dT%H%M";

pub(super) fn id_of(start: DateTime<Utc>, tz: Tz) -> String {
    start.with_timezone(&tz).format(ID_FORMAT).to_string()
}

fn at_minute(date: NaiveDate, minute: u32) -> NaiveDateTime {
    date.and_time(NaiveTime::from_hms_opt(minute / 60, minute % 60, 0).expect("a minute of the day"))
}

/// Whether `tz`'s offset changes within three hours of `at`.
fn near_change(at: DateTime<Utc>, tz: Tz) -> bool {
    let offset = |t: DateTime<Utc>| tz.offset_from_utc_datetime(&t.naive_utc()).fix();
    offset(at - Duration::hours(3)) != offset(at + Duration::hours(3))
}

/// When local minute `local` happens in `tz`: its first occurrence, or for a minute the clocks
/// skip, the instant they land.
fn instant(local: NaiveDateTime, tz: Tz) -> DateTime<Utc> {
    let mut time = local;
    for _ in 0..24 * 60 {
        if let Some(t) = tz.from_local_datetime(&time).earliest() {
            return t.with_timezone(&Utc);
        }
        time += Duration::minutes(1);
    }
    Utc.from_utc_datetime(&local)
}
