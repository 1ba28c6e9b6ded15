use super::*;
use chrono_tz::{America::Sao_Paulo, Asia::Kolkata, Asia::Shanghai};

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

#[test]
fn a_second_either_side_of_shanghai_midnight_is_two_days() {
    let before = Period::containing(PeriodKind::Day, utc("2026-11-22T23:59:59+08:00"), Shanghai);
    let after = Period::containing(PeriodKind::Day, utc("2026-11-23T00:00:01+08:00"), Shanghai);
    assert_eq!(before.id, "2026-11-22");
    assert_eq!(after.id, "2026-11-23");
    assert_eq!(before.end, after.start);
    assert_eq!(before.end.unwrap().to_rfc3339(), "2026-11-23T00:00:00+08:00");
}

#[test]
fn months_roll_over_at_local_midnight_including_year_end() {
    let last = Period::containing(PeriodKind::Month, utc("2026-12-31T16:00:00Z"), Shanghai);
    assert_eq!(last.id, "2027-01", "16:00Z is already Jan 1st in Shanghai");
    let dec = Period::containing(PeriodKind::Season, utc("2026-12-31T15:59:59Z"), Shanghai);
    assert_eq!(dec.id, "2026-12");
    assert_eq!(dec.end.unwrap().to_rfc3339(), "2027-01-01T00:00:00+08:00");
    let feb = Period::containing(PeriodKind::Month, utc("2028-02-29T12:00:00Z"), Kolkata);
    assert_eq!(feb.end.unwrap().to_rfc3339(), "2028-03-01T00:00:00+05:30");
}

#[test]
fn a_midnight_lost_to_dst_starts_the_day_at_the_first_valid_time() {
    // Brazil skipped 2018-11-04 00:00-01:00.
    let day = Period::on_date(PeriodKind::Day, NaiveDate::from_ymd_opt(2018, 11, 4).unwrap(), Sao_Paulo);
    assert_eq!(day.start.unwrap().to_rfc3339(), "2018-11-04T01:00:00-02:00");
}

#[test]
fn resets_are_reported_with_the_boards_offset() {
    let leap = Period::containing(PeriodKind::Day, utc("2028-02-28T20:00:00Z"), Kolkata).info();
    assert_eq!(leap.period_id, "2028-02-29", "20:00Z is 01:30 the next day in Kolkata");
    assert_eq!(leap.period_start.as_deref(), Some("2028-02-29T00:00:00+05:30"));
    assert_eq!(leap.next_reset.as_deref(), Some("2028-03-01T00:00:00+05:30"));
    let all = Period::containing(PeriodKind::All, utc("2028-02-28T20:00:00Z"), Kolkata).info();
    assert_eq!((all.period_id.as_str(), all.period_start, all.next_reset), ("all", None, None));
}

#[test]
fn expiry_follows_period_end_plus_retention() {
    let day = Period::containing(PeriodKind::Day, utc("2026-11-22T10:00:00Z"), Shanghai);
    assert_eq!(day.expires_at(), Some(utc("2026-12-23T00:00:00+08:00").timestamp()));
    assert_eq!(Period::containing(PeriodKind::All, utc("2026-11-22T10:00:00Z"), Shanghai).expires_at(), None);
}

#[test]
fn dates_parse_strictly_within_the_documented_range() {
    assert_eq!(parse_day("2026-11-22"), Ok(NaiveDate::from_ymd_opt(2026, 11, 22).unwrap()));
    assert_eq!(parse_month("2026-11"), Ok(NaiveDate::from_ymd_opt(2026, 11, 1).unwrap()));
    assert_eq!(parse_day("2020-01-01"), Ok(FIRST_DATE));
    assert_eq!(parse_day("2088-01-18"), Ok(LAST_DATE));
    for out in ["+262142-12-31", "-262143-01-01", "9999-12-31", "2019-12-31", "2088-01-19"] {
        assert_eq!(parse_day(out), Err(DateError::OutOfRange), "{out}");
    }
    for bad in ["2026-11", "2026-13-01", "2026-02-30", "20261122", "today", "", "+2026-11-22", "2026-1-01"] {
        assert_eq!(parse_day(bad), Err(DateError::Malformed), "{bad}");
    }
    assert_eq!(parse_month("+262142-12"), Err(DateError::OutOfRange));
    assert_eq!(parse_month("2026-11-01"), Err(DateError::Malformed));
}

#[test]
fn period_code_never_panics_even_at_chrono_s_limits() {
    for date in [NaiveDate::MAX, NaiveDate::MIN] {
        for kind in NAMED.into_iter().chain([PeriodKind::Week(Weekday::Sun)]) {
            let period = Period::on_date(kind, date, Shanghai);
            let _ = (period.expires_at(), period.info());
        }
    }
}

#[test]
fn weeks_start_on_the_boards_first_day_at_local_midnight_and_are_named_by_iso_week() {
    // Thursday 2026-11-26 in Shanghai.
    let at = utc("2026-11-26T10:00:00+08:00");
    let iso = Period::containing(PeriodKind::Week(Weekday::Mon), at, Shanghai);
    assert_eq!(iso.id, "2026-W48");
    assert_eq!(iso.start.unwrap().to_rfc3339(), "2026-11-23T00:00:00+08:00");
    assert_eq!(iso.end.unwrap().to_rfc3339(), "2026-11-30T00:00:00+08:00");
    let sunday = Period::containing(PeriodKind::Week(Weekday::Sun), at, Shanghai);
    assert_eq!((sunday.id.as_str(), sunday.start.unwrap().to_rfc3339()), ("2026-W48", "2026-11-22T00:00:00+08:00".into()));
    // A second before Monday midnight in Shanghai is still last week; the year's last ISO
    // week may belong to the next year.
    assert_eq!(Period::containing(PeriodKind::Week(Weekday::Mon), utc("2026-11-22T15:59:59Z"), Shanghai).id, "2026-W47");
    assert_eq!(Period::containing(PeriodKind::Week(Weekday::Mon), utc("2026-12-31T12:00:00Z"), Shanghai).id, "2026-W53");
    assert_eq!(Period::containing(PeriodKind::Week(Weekday::Mon), utc("2027-12-31T12:00:00Z"), Shanghai).id, "2027-W52");
    assert_eq!(Period::containing(PeriodKind::Week(Weekday::Mon), utc("2025-12-30T12:00:00Z"), Shanghai).id, "2026-W01");
    for start in [Weekday::Mon, Weekday::Wed, Weekday::Sat, Weekday::Sun] {
        let kind = PeriodKind::Week(start);
        let week = Period::containing(kind, at, Shanghai);
        assert_eq!(Period::named(kind, &week.id, Shanghai).unwrap(), week, "{start}");
        let next = Period::containing(kind, week.end.unwrap().with_timezone(&Utc), Shanghai);
        assert_eq!(Period::named(kind, &next.id, Shanghai).unwrap(), next, "{start}");
        assert_ne!(next.id, week.id);
    }
    for bad in ["2026-48", "2026-W5", "2026-W54", "2026-W00", "+2026-W48", "2026-w48", "2026-W4x"] {
        assert_eq!(parse_week(bad), Err(DateError::Malformed), "{bad}");
    }
    assert_eq!(parse_week("2019-W01"), Err(DateError::OutOfRange));
}

#[test]
fn a_week_contains_its_days_and_no_month_contains_a_week() {
    let week = PeriodKind::Week(Weekday::Mon);
    assert!(week.contains(PeriodKind::Day) && PeriodKind::All.contains(week) && week.contains(week));
    assert!(!PeriodKind::Month.contains(week) && !week.contains(PeriodKind::Month) && !PeriodKind::Day.contains(week));
    assert_eq!(PeriodKind::parse("week"), Some(week));
    assert_eq!(serde_json::to_string(&PeriodKind::Week(Weekday::Sun)).unwrap(), "\"week\"");
}

#[test]
fn the_event_window_refuses_late_and_future_events() {
    let now = utc("2026-11-22T10:00:00Z");
    let window = EventWindow::default();
    assert_eq!(window.check(now - Duration::minutes(15), now), Ok(()));
    assert_eq!(window.check(now - Duration::minutes(15) - Duration::seconds(1), now), Err(EventTimeError::TooLate(900)));
    assert_eq!(window.check(now + Duration::minutes(1), now), Ok(()));
    assert_eq!(window.check(now + Duration::seconds(61), now), Err(EventTimeError::InFuture(60)));
}

#[test]
fn month_helpers_know_leap_years_and_year_ends() {
    let date = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
    assert_eq!(days_in_month(date("2028-02-10")), 29);
    assert_eq!(days_in_month(date("2026-12-31")), 31);
    assert_eq!(previous_month(date("2026-01-15")), date("2025-12-01"));
    assert_eq!(month_id(date("2026-11-24")), "2026-11");
}
