//! Cron periods against a model written from crontab(5) and docs/tournaments.md's clock-change
//! rules alone: it walks real time a minute at a time and asks each minute's local time whether
//! the schedule names it, with no search, no bit sets and no local-time arithmetic.

use std::collections::BTreeSet;

use chrono::{DateTime, Datelike, Duration, NaiveDateTime, Timelike, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;

use super::{Cron, DateError, Period, PeriodKind};

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn period(schedule: &str, at: &str, tz: Tz) -> Period {
    Period::containing(PeriodKind::Cron(Cron::parse(schedule).unwrap()), utc(at), tz)
}

#[test]
fn a_weekly_evening_schedule_runs_friday_to_friday_in_its_timezone() {
    let friday = period("0 18 * * fri", "2026-12-01T09:00:00Z", chrono_tz::Europe::Paris);
    assert_eq!(friday.id, "2026-11-27T1800");
    assert_eq!(friday.start.unwrap().to_rfc3339(), "2026-11-27T18:00:00+01:00");
    assert_eq!(friday.end.unwrap().to_rfc3339(), "2026-12-04T18:00:00+01:00");
    assert_eq!(friday.following().unwrap().id, "2026-12-04T1800");
    assert_eq!(friday.previous().unwrap().id, "2026-11-20T1800");
    let named = Period::named(friday.kind, "2026-12-04T1800", chrono_tz::Europe::Paris).unwrap();
    assert_eq!(named, friday.following().unwrap());
    assert_eq!(Period::named(friday.kind, "2026-12-05T1800", chrono_tz::Europe::Paris), Err(DateError::NotScheduled), "a Saturday");
    assert_eq!(Period::named(friday.kind, "2026-12-04T18:00", chrono_tz::Europe::Paris), Err(DateError::NotScheduled));
    assert_eq!(Period::named(friday.kind, "2019-12-06T1800", chrono_tz::Europe::Paris), Err(DateError::OutOfRange));
}

#[test]
fn day_of_month_and_weekday_both_named_match_either() {
    // crontab(5): the 1st and every Monday.
    let kind = PeriodKind::Cron(Cron::parse("30 9 1 * mon").unwrap());
    let ids: Vec<String> =
        std::iter::successors(Some(Period::containing(kind, utc("2026-11-30T10:00:00Z"), chrono_tz::UTC)), Period::following)
            .take(4)
            .map(|p| p.id)
            .collect();
    assert_eq!(ids, ["2026-11-30T0930", "2026-12-01T0930", "2026-12-07T0930", "2026-12-14T0930"]);
    // A field starting with `*` is not restricted: every other day that is also a Monday.
    let odd_mondays = PeriodKind::Cron(Cron::parse("0 0 */2 * 1").unwrap());
    assert_eq!(Period::containing(odd_mondays, utc("2026-11-30T10:00:00Z"), chrono_tz::UTC).id, "2026-11-23T0000");
}

#[test]
fn schedules_are_refused_with_the_field_and_why() {
    for (text, names) in [
        ("0 18 * *", "five fields"),
        ("60 * * * *", "minute"),
        ("0 24 * * *", "hour"),
        ("0 0 0 * *", "day of month"),
        ("0 0 * 13 *", "month"),
        ("0 0 * * 8", "day of week"),
        ("0 5-2 * * *", "backwards"),
        ("*/0 * * * *", "step"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6 *", "never fires"),
        ("a b c d e", "minute"),
        ("@reboot", "five fields"),
        ("5/1 * * * *", "every 15 minutes"),
    ] {
        let error = Cron::parse(text).unwrap_err().to_string();
        assert!(error.contains(names), "{text:?}: {error}");
    }
    for (text, names) in [("*/10 * * * *", "every 15 minutes"), ("0,55 * * * *", "every 15 minutes"), ("*/+5 * * * *", "step")] {
        let error = Cron::parse(text).unwrap_err().to_string();
        assert!(error.contains(names), "{text:?}: {error}");
    }
    assert_eq!(Cron::parse("5/30 1 * * *").unwrap(), Cron::parse("5,35 1 * * *").unwrap(), "a/step runs to the field's end");
    for text in [
        "@daily",
        "@hourly",
        "@weekly",
        "@monthly",
        "@yearly",
        "0 0 29 2 *",
        "15,45 8-17/3 * jan-mar,DEC sun,7",
        "5/20 * * * *",
        "*/15 * * * *",
    ] {
        Cron::parse(text).unwrap_or_else(|error| panic!("{text:?}: {error}"));
    }
    assert_eq!(Cron::parse("@weekly").unwrap(), Cron::parse("0 0 * * 7").unwrap(), "Sunday is 0 and 7");
}

#[test]
fn a_leap_day_schedule_spans_four_years() {
    let leap = period("0 12 29 2 *", "2026-06-01T00:00:00Z", chrono_tz::UTC);
    assert_eq!((leap.id.as_str(), leap.end.unwrap().to_rfc3339().as_str()), ("2024-02-29T1200", "2028-02-29T12:00:00+00:00"));
}

/// A schedule as the model holds it: each field's values, `None` for `*`.
#[derive(Debug, Clone)]
struct Schedule {
    minutes: Option<BTreeSet<u32>>,
    hours: Option<BTreeSet<u32>>,
    days: Option<BTreeSet<u32>>,
    months: Option<BTreeSet<u32>>,
    weekdays: Option<BTreeSet<u32>>,
}

impl Schedule {
    fn text(&self) -> String {
        let field = |values: &Option<BTreeSet<u32>>| {
            values.as_ref().map_or_else(|| "*".to_owned(), |v| v.iter().map(u32::to_string).collect::<Vec<_>>().join(","))
        };
        [&self.minutes, &self.hours, &self.days, &self.months, &self.weekdays].map(field).join(" ")
    }

    /// crontab(5), read literally.
    fn names(&self, local: NaiveDateTime) -> bool {
        let has = |values: &Option<BTreeSet<u32>>, v: u32| values.as_ref().is_none_or(|values| values.contains(&v));
        let weekday = local.weekday().num_days_from_sunday();
        let day = if self.days.is_some() && self.weekdays.is_some() {
            has(&self.days, local.day()) || has(&self.weekdays, weekday)
        } else {
            has(&self.days, local.day()) && has(&self.weekdays, weekday)
        };
        day && has(&self.minutes, local.minute()) && has(&self.hours, local.hour()) && has(&self.months, local.month())
    }

    /// Whether the schedule opens an instance at minute `t`: its local minute is named and
    /// happens for the first time, or the clocks just jumped over a named one.
    fn fires_at(&self, t: DateTime<Utc>, tz: Tz) -> bool {
        let local = |t: DateTime<Utc>| t.with_timezone(&tz).naive_local();
        let now = local(t);
        let seen_before = [30, 60, 90, 120, 180].iter().any(|m| local(t - Duration::minutes(*m)) == now);
        if self.names(now) && !seen_before {
            return true;
        }
        let mut skipped = local(t - Duration::minutes(1)) + Duration::minutes(1);
        while skipped < now {
            if self.names(skipped) {
                return true;
            }
            skipped += Duration::minutes(1);
        }
        false
    }
}

/// A field: `*` as often as `unrestricted` says against once a set, so that enough schedules
/// fire on the nights the clocks change.
fn values(range: std::ops::RangeInclusive<u32>, most: usize, unrestricted: u32) -> impl Strategy<Value = Option<BTreeSet<u32>>> {
    prop_oneof![unrestricted => Just(None), 1 => proptest::collection::btree_set(range, 1..=most).prop_map(Some)]
}

fn schedules() -> impl Strategy<Value = Schedule> {
    (
        // One to four minutes an hour, 15 apart (`MIN_SPACING_MINUTES`).
        (0u32..15, proptest::collection::btree_set(0u32..4, 1..=4))
            .prop_map(|(first, quarters)| Some(quarters.iter().map(|q| first + 15 * q).collect())),
        values(0..=23, 6, 1),
        values(1..=31, 10, 3),
        values(1..=12, 8, 3),
        values(0..=6, 4, 3),
    )
        .prop_map(|(minutes, hours, days, months, weekdays)| Schedule { minutes, hours, days, months, weekdays })
}

/// Zones with clock changes of an hour and of half an hour, one without, and nights they change.
const ZONES: [(&str, &str); 6] = [
    ("Europe/Paris", "2026-03-29T00:00:00Z"),
    ("Europe/Paris", "2026-10-25T00:00:00Z"),
    ("America/New_York", "2026-11-01T04:00:00Z"),
    ("America/New_York", "2026-03-08T05:00:00Z"),
    ("Australia/Lord_Howe", "2026-04-04T13:00:00Z"),
    ("Asia/Kolkata", "2026-02-28T12:00:00Z"),
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Every instant's period starts at the model's last firing at or before it and ends at its
    /// first after, across clock changes both ways (half the instants within hours of one).
    #[test]
    fn periods_run_from_one_firing_to_the_next(
        schedule in schedules(),
        zone in 0..ZONES.len(),
        ats in proptest::collection::vec(prop_oneof![0i64..2 * 24 * 60 * 60, 22 * 60 * 60i64..29 * 60 * 60], 12),
    ) {
        let Ok(cron) = Cron::parse(&schedule.text()) else { return Ok(()) };
        let (name, night) = ZONES[zone];
        let tz: Tz = name.parse().unwrap();
        let from = utc(night) - Duration::days(2);
        let fires: Vec<DateTime<Utc>> =
            (0..6 * 24 * 60).map(|m| from + Duration::minutes(m)).filter(|t| schedule.fires_at(*t, tz)).collect();
        for offset in ats {
            let at = utc(night) - Duration::days(1) + Duration::seconds(offset);
            let period = Period::containing(PeriodKind::Cron(cron), at, tz);
            let (start, end) = (period.start.unwrap().with_timezone(&Utc), period.end.unwrap().with_timezone(&Utc));
            match fires.iter().rev().find(|t| **t <= at) {
                Some(fire) => prop_assert_eq!(start, *fire, "{} at {} in {}", schedule.text(), at, name),
                None => prop_assert!(start < from, "{} at {}: starts {} in a window with no firing", schedule.text(), at, start),
            }
            match fires.iter().find(|t| **t > at) {
                Some(fire) => prop_assert_eq!(end, *fire, "{} at {} in {}", schedule.text(), at, name),
                None => prop_assert!(end >= from + Duration::days(6), "{} at {}: ends {}", schedule.text(), at, end),
            }
            prop_assert_eq!(Period::named(period.kind, &period.id, tz), Ok(period.clone()));
        }
    }
}

#[test]
fn a_time_the_clocks_repeat_opens_the_first_time_and_one_they_skip_when_they_land() {
    let ny = chrono_tz::America::New_York;
    // 2026-11-01: 02:00 EDT goes back to 01:00 EST; 01:30 happens at 05:30Z and again at 06:30Z.
    let repeated = period("30 1 * * *", "2026-11-01T06:45:00Z", ny);
    assert_eq!((repeated.id.as_str(), repeated.start.unwrap().with_timezone(&Utc)), ("2026-11-01T0130", utc("2026-11-01T05:30:00Z")));
    // 2026-03-08: 02:00 EST goes forward to 03:00 EDT; 02:30 never happens, so it opens at 03:00.
    let skipped = period("30 2 * * *", "2026-03-08T07:10:00Z", ny);
    assert_eq!((skipped.id.as_str(), skipped.start.unwrap().with_timezone(&Utc)), ("2026-03-08T0300", utc("2026-03-08T07:00:00Z")));
    assert_eq!(Period::named(skipped.kind, "2026-03-08T0300", ny), Ok(skipped.clone()));
}
