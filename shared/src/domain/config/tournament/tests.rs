use chrono::{Datelike, NaiveDate, TimeZone};
use proptest::prelude::*;
use serde_json::json;

use super::*;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn body() -> Value {
    json!({"title": "Winter cup", "keep": "best", "order": "desc", "start": "2026-12-01T00:00:00Z",
        "end": "2026-12-08T00:00:00Z", "join_required": true, "max_size": 100, "max_entries": 3,
        "prizes": [{"ranks": [1, 1], "reward": {"gems": 500}}, {"ranks": [2, 10], "reward": {"gems": 50}}]})
}

#[test]
fn a_definition_is_checked_field_by_field() {
    let cup = Tournament::parse("winter-cup", &body()).unwrap();
    assert_eq!((cup.keep, cup.order, cup.max_size, cup.max_entries), (Keep::Best, Order::Desc, Some(100), Some(3)));
    let field = |change: &dyn Fn(&mut Value)| {
        let mut body = body();
        change(&mut body);
        Tournament::parse("winter-cup", &body).unwrap_err().field
    };
    assert_eq!(field(&|b| b["end"] = json!("2026-11-30T00:00:00Z")), "end");
    assert_eq!(field(&|b| b["title"] = json!(" ")), "title");
    assert_eq!(field(&|b| b["max_size"] = json!(0)), "max_size");
    assert_eq!(field(&|b| b["max_entries"] = json!(0)), "max_entries");
    assert_eq!(field(&|b| b["keep"] = json!("most")), "keep");
    assert_eq!(field(&|b| b["start"] = json!("tomorrow")), "start");
    assert_eq!(field(&|b| b["colour"] = json!("red")), "colour");
    assert_eq!(field(&|b| b["prizes"][1]["ranks"] = json!([1, 3])), "prizes[1].ranks", "overlapping ranges");
    assert_eq!(field(&|b| b["prizes"][0]["ranks"] = json!([0, 1])), "prizes[0].ranks");
    assert_eq!(field(&|b| b["reset"] = json!("day")), "duration_secs", "a recurring tournament needs its duration");
    assert_eq!(field(&|b| b["duration_secs"] = json!(60)), "duration_secs", "a one-off has none");
    assert_eq!(
        field(&|b| {
            b["reset"] = json!("day");
            b["duration_secs"] = json!(86_400 + 3 * 3600 + 1);
        }),
        "duration_secs"
    );
    assert_eq!(field(&|b| b["category"] = json!("Weekly!")), "category");
    assert_eq!(field(&|b| b["metadata"] = json!({"blob": "x".repeat(5000)})), "metadata");
    assert_eq!(Tournament::parse("Winter Cup", &body()).unwrap_err().field, "tournament_id");
}

#[test]
fn prizes_go_by_rank_range() {
    let cup = Tournament::parse("winter-cup", &body()).unwrap();
    assert_eq!(cup.prize_of(cup.end, 1), Some(&json!({"gems": 500})));
    assert_eq!((cup.prize_of(cup.end, 2), cup.prize_of(cup.end, 10)), (Some(&json!({"gems": 50})), Some(&json!({"gems": 50}))));
    assert_eq!(cup.prize_of(cup.end, 11), None);
}

#[test]
fn a_one_off_is_open_from_its_start_until_its_end_exclusive() {
    let cup = Tournament::parse("winter-cup", &body()).unwrap();
    assert_eq!(cup.state_at(at("2026-11-30T23:59:59Z")), State::Upcoming);
    assert_eq!(cup.open_at(at("2026-12-01T00:00:00Z")).unwrap().id, "all");
    assert_eq!(cup.state_at(at("2026-12-07T23:59:59Z")), State::Open);
    assert_eq!(cup.state_at(at("2026-12-08T00:00:00Z")), State::Ended, "the end is not in the window");
    assert_eq!(cup.instance_named(None, at("2026-12-09T00:00:00Z")).unwrap().id, "all", "the last one that ran");
}

#[test]
fn a_daily_tournament_opens_at_each_midnight_for_its_duration() {
    let mut daily = body();
    daily["reset"] = json!("day");
    daily["duration_secs"] = json!(3600);
    let daily = Tournament::parse("daily", &daily).unwrap();
    let open = daily.open_at(at("2026-12-03T00:30:00Z")).unwrap();
    assert_eq!((open.id.as_str(), open.start, open.end), ("2026-12-03", at("2026-12-03T00:00:00Z"), at("2026-12-03T01:00:00Z")));
    assert_eq!(daily.state_at(at("2026-12-03T01:00:00Z")), State::Upcoming);
    assert_eq!(daily.next_after(at("2026-12-03T01:00:00Z")).unwrap().start, at("2026-12-04T00:00:00Z"));
    assert_eq!(daily.next_after(at("2026-12-07T00:10:00Z")), None, "the last day's instance is the last");
    assert_eq!(daily.state_at(at("2026-12-07T01:00:00Z")), State::Ended);
    assert_eq!(daily.instance_named(Some("2026-12-05"), at("2026-12-07T00:00:00Z")).unwrap().end, at("2026-12-05T01:00:00Z"));
    assert_eq!(daily.instance_named(Some("2026-12-09"), at("2026-12-07T00:00:00Z")), None, "after the window");
    assert_eq!(daily.instance_named(None, at("2026-12-05T12:00:00Z")).unwrap().id, "2026-12-05", "the last one that ran");
}

/// The model: plain arithmetic on seconds since the reset's boundary, written apart from the
/// periods the code uses.
struct Model {
    start: i64,
    end: i64,
    reset: Option<Reset>,
    duration: i64,
    /// The timezone's offset from UTC (fixed: the zones the test picks have no DST).
    offset: i64,
}

impl Model {
    /// Seconds since the start of `t`'s day, week (Monday) or month, UTC.
    fn since_reset(reset: Reset, t: i64) -> i64 {
        match reset {
            Reset::Day => t.rem_euclid(86_400),
            // 1970-01-05 was a Monday.
            Reset::Week => (t - 4 * 86_400).rem_euclid(7 * 86_400),
            Reset::Month => {
                let date = Utc.timestamp_opt(t, 0).unwrap();
                let first = NaiveDate::from_ymd_opt(date.year(), date.month(), 1).unwrap().and_hms_opt(0, 0, 0).unwrap().and_utc();
                t - first.timestamp()
            }
        }
    }

    fn open(&self, t: i64) -> bool {
        self.start <= t && t < self.end && self.reset.is_none_or(|reset| Self::since_reset(reset, t + self.offset) < self.duration)
    }

    fn id(&self, t: i64) -> String {
        let date = Utc.timestamp_opt(t + self.offset, 0).unwrap();
        match self.reset {
            None => "all".into(),
            Some(Reset::Day) => date.format("%Y-%m-%d").to_string(),
            Some(Reset::Week) => date.format("%G-W%V").to_string(),
            Some(Reset::Month) => date.format("%Y-%m").to_string(),
        }
    }

    /// The first minute after `t` at which an instance opens (minutes suffice: every time in
    /// the test is a whole minute).
    fn next_start(&self, t: i64) -> Option<i64> {
        let mut m = t + 60;
        while m < self.end {
            if self.open(m) && (!self.open(m - 60) || self.id(m - 60) != self.id(m)) {
                return Some(m);
            }
            m += 60;
        }
        None
    }
}

fn tournament(start: i64, length: i64, reset: Option<Reset>, duration: i64) -> Tournament {
    tournament_in(start, length, reset, duration, "UTC")
}

fn tournament_in(start: i64, length: i64, reset: Option<Reset>, duration: i64, timezone: &str) -> Tournament {
    let mut body = body();
    body["timezone"] = json!(timezone);
    body["start"] = json!(Utc.timestamp_opt(start, 0).unwrap().to_rfc3339());
    body["end"] = json!(Utc.timestamp_opt(start + length, 0).unwrap().to_rfc3339());
    if let Some(reset) = reset {
        body["reset"] = json!(reset);
        body["duration_secs"] = json!(duration);
    }
    Tournament::parse("t", &body).unwrap()
}

const BASE: i64 = 1_798_761_600; // 2027-01-01T00:00:00Z

#[test]
fn the_watermark_moves_past_the_oldest_finished_instances_only() {
    let day = |d: i64| Instance {
        id: format!("d{d}"),
        start: Utc.timestamp_opt(BASE + d * 86_400, 0).unwrap(),
        end: Utc.timestamp_opt(BASE + d * 86_400 + 7200, 0).unwrap(),
    };
    // As a run orders them: the latest, then the backlog oldest first.
    let instances = [day(4), day(1), day(2), day(3)];
    assert_eq!(ended_through(&instances, &[true, true, true, true], true), Some(day(4).end));
    assert_eq!(ended_through(&instances, &[true, true, false, true], true), Some(day(1).end), "a failing one holds it");
    assert_eq!(ended_through(&instances, &[true, false, true, true], true), None, "the oldest failing: nowhere");
    assert_eq!(ended_through(&instances, &[true, true], true), Some(day(1).end), "not looked at: not finished");
    assert_eq!(ended_through(&instances, &[true, true, true, true], false), None, "older ones unseen: it stays");
    assert_eq!(ended_through(&[], &[], true), None);
}

#[test]
fn a_deleted_tournament_ends_its_open_instance_then_and_opens_none_after() {
    // Daily from BASE, two hours an instance, for thirty days; deleted on the third day at 01:00.
    let mut daily = tournament(BASE, 30 * 86_400, Some(Reset::Day), 7200);
    let deleted = Utc.timestamp_opt(BASE + 2 * 86_400 + 3600, 0).unwrap();
    daily.deleted = Some(deleted);
    let third = daily.instance_named(Some("2027-01-03"), deleted).unwrap();
    assert_eq!((third.start.timestamp(), third.end), (BASE + 2 * 86_400, deleted), "cut at the deletion");
    assert!(daily.open_at(deleted).is_none() && daily.open_at(deleted - chrono::Duration::seconds(1)).is_some());
    let later = Utc.timestamp_opt(BASE + 10 * 86_400, 0).unwrap();
    assert_eq!(daily.state_at(later), State::Ended, "none opens after it");
    assert_eq!(daily.next_after(deleted), None);
    let ended: Vec<String> = daily.ended_by(later, None, 100).into_iter().map(|instance| instance.id).collect();
    assert_eq!(ended, ["2027-01-03", "2027-01-02", "2027-01-01"], "the instances that ran, latest first");
    let window = daily.max_score();
    assert_eq!(window, tournament(BASE, 30 * 86_400, Some(Reset::Day), 7200).max_score(), "the scale is unchanged");
    // Deleted before it started: nothing ever runs.
    let mut early = tournament(BASE, 86_400, None, 0);
    early.deleted = Some(Utc.timestamp_opt(BASE - 60, 0).unwrap());
    assert!(early.ended_by(later, None, 100).is_empty() && early.open_at(Utc.timestamp_opt(BASE + 60, 0).unwrap()).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn the_open_instance_its_id_the_state_and_the_next_reset_match_the_model(
        start in 0..(40 * 1440i64),
        length in 1..(40 * 1440i64),
        reset in prop_oneof![Just(None), Just(Some(Reset::Day)), Just(Some(Reset::Week)), Just(Some(Reset::Month))],
        duration in 1..(31 * 1440i64),
        probes in proptest::collection::vec(-(2 * 1440i64)..(85 * 1440i64), 6),
        (timezone, offset) in prop_oneof![Just(("UTC", 0)), Just(("Etc/GMT-5", 5 * 3600)), Just(("Etc/GMT+7", -7 * 3600)), Just(("Asia/Kolkata", 19_800))],
    ) {
        let (start, length) = (BASE + start * 60, length * 60);
        let duration = match reset {
            Some(Reset::Day) => (duration % 1440 + 1) * 60,
            Some(Reset::Week) => (duration % (7 * 1440) + 1) * 60,
            _ => duration * 60,
        };
        let model = Model { start, end: start + length, reset, duration, offset };
        let cup = tournament_in(start, length, reset, duration, timezone);
        // Random minutes, and every edge: the window's, and the first instance's open and close.
        let first = model.next_start(start - 60).unwrap_or(start);
        let edges = [start - 60, start, start + length - 60, start + length, first, first + duration - 60, first + duration];
        for t in probes.into_iter().map(|probe| BASE + probe * 60).chain(edges) {
            let now = Utc.timestamp_opt(t, 0).unwrap();
            let open = cup.open_at(now);
            prop_assert_eq!(open.is_some(), model.open(t), "open at {}", now);
            if let Some(instance) = &open {
                prop_assert_eq!(&instance.id, &model.id(t));
                prop_assert!(instance.start <= now && now < instance.end);
            }
            let next = model.next_start(t);
            prop_assert_eq!(cup.next_after(now).map(|i| i.start.timestamp()), next, "next after {}", now);
            let state = if model.open(t) { State::Open } else if next.is_some() { State::Upcoming } else { State::Ended };
            prop_assert_eq!(cup.state_at(now), state);
        }
    }
}

#[test]
fn an_instance_ended_early_in_the_second_it_opened_still_ran() {
    let mut cup = Tournament::parse("winter-cup", &body()).unwrap();
    let opened = at("2026-12-01T00:00:00Z");
    cup.closed.insert("all".into(), opened);
    let later = at("2026-12-02T00:00:00Z");
    assert_eq!(cup.state_at(later), State::Ended);
    let last = cup.instance_named(None, later).expect("the instance it ended is the last one that ran");
    assert_eq!((last.id.as_str(), last.start, last.end), ("all", opened, opened));
    assert_eq!(cup.ended_by(later, None, 10), vec![last], "its results are due");
}

#[test]
fn an_instance_deleted_in_the_second_it_opened_still_ran_once_ended_early() {
    let mut cup = Tournament::parse("winter-cup", &body()).unwrap();
    let opened = at("2026-12-01T00:00:00Z");
    // A deletion ends the open instance first (its early end), then deletes.
    cup.closed.insert("all".into(), opened);
    cup.deleted = Some(opened);
    let later = at("2026-12-02T00:00:00Z");
    let ended = cup.ended_by(later, None, 10);
    assert_eq!(ended.iter().map(|i| (i.id.as_str(), i.start, i.end)).collect::<Vec<_>>(), vec![("all", opened, opened)]);
    // Deleted before it opened (no early end): it never ran.
    let mut early = Tournament::parse("winter-cup", &body()).unwrap();
    early.deleted = Some(opened - chrono::Duration::hours(1));
    assert_eq!(early.ended_by(later, None, 10), vec![]);
}

#[test]
fn a_monthly_instance_of_31_days_covers_every_month_whole() {
    let mut monthly = body();
    monthly["start"] = json!("2027-01-01T00:00:00Z");
    monthly["end"] = json!("2028-01-01T00:00:00Z");
    monthly["reset"] = json!("month");
    monthly["duration_secs"] = json!(31 * 86_400);
    let cup = Tournament::parse("monthly", &monthly).unwrap();
    let february = cup.open_at(at("2027-02-28T23:59:59Z")).expect("open to February's last second");
    assert_eq!((february.id.as_str(), february.start, february.end), ("2027-02", at("2027-02-01T00:00:00Z"), at("2027-03-01T00:00:00Z")));
    assert_eq!(cup.open_at(at("2027-03-01T00:00:00Z")).map(|i| i.id), Some("2027-03".to_owned()));
    assert_eq!(cup.open_at(at("2027-01-31T23:59:59Z")).map(|i| i.id), Some("2027-01".to_owned()), "31 days: January whole");
    assert_eq!(cup.next_after(at("2027-02-10T00:00:00Z")).map(|i| i.start), Some(at("2027-03-01T00:00:00Z")));
    monthly["duration_secs"] = json!(31 * 86_400 + 3 * 3600 + 1);
    assert_eq!(Tournament::parse("monthly", &monthly).unwrap_err().field, "duration_secs");
}

/// Resets fall at local midnight: on the day New York moves its clocks forward (23 hours), a
/// daily instance of 24 hours is cut at the next local midnight; the day after opens then.
#[test]
fn a_daily_tournament_in_new_york_resets_at_local_midnight_across_the_clock_change() {
    let start = at("2027-03-01T05:00:00Z").timestamp();
    let daily = tournament_in(start, 30 * 86_400, Some(Reset::Day), 86_400, "America/New_York");
    let short = daily.open_at(at("2027-03-14T12:00:00Z")).unwrap();
    assert_eq!((short.id.as_str(), short.start, short.end), ("2027-03-14", at("2027-03-14T05:00:00Z"), at("2027-03-15T04:00:00Z")));
    let next = daily.open_at(at("2027-03-15T04:00:00Z")).unwrap();
    assert_eq!((next.id.as_str(), next.start), ("2027-03-15", at("2027-03-15T04:00:00Z")));
    assert_eq!(daily.period_named("2027-03-15").unwrap().start.map(|s| s.with_timezone(&Utc)), Some(next.start));
    let unknown = tournament_in(start, 86_400, Some(Reset::Day), 3600, "UTC");
    let mut bad = body();
    bad["timezone"] = json!("Mars/Olympus");
    assert_eq!(Tournament::parse("t", &bad).unwrap_err().field, "timezone");
    assert_eq!(unknown.timezone, chrono_tz::UTC);
}

/// Where the clocks go back (New York, 2027-11-07: 25 hours), a daily instance of 25 hours covers
/// the whole local day, and the next opens at the next local midnight.
#[test]
fn a_daily_tournament_covers_a_25_hour_day_whole() {
    let start = at("2027-11-01T04:00:00Z").timestamp();
    let daily = tournament_in(start, 30 * 86_400, Some(Reset::Day), 90_000, "America/New_York");
    let long = daily.open_at(at("2027-11-08T04:30:00Z")).unwrap();
    assert_eq!((long.id.as_str(), long.start, long.end), ("2027-11-07", at("2027-11-07T04:00:00Z"), at("2027-11-08T05:00:00Z")));
    assert_eq!(daily.open_at(at("2027-11-08T05:00:00Z")).unwrap().id, "2027-11-08");
    assert_eq!(daily.max_score(), tournament_in(start, 30 * 86_400, Some(Reset::Day), 86_400, "UTC").max_score(), "the same scale");
}

/// What a function's catalog holds of a tournament's details goes by the heap they take, not
/// their text: a kilobyte of zeros is 16 KB parsed.
#[test]
fn details_are_left_out_by_the_heap_they_hold() {
    let held = |extra: Value| {
        let mut body = body();
        for (field, value) in extra.as_object().unwrap() {
            body[field] = value.clone();
        }
        let cup = Tournament::parse("winter-cup", &body).unwrap();
        let light = cup.without_details().unwrap_or_else(|| cup.clone());
        assert_eq!(light.clone().with_details_of(&cup), Tournament { details_held: true, ..cup.clone() }, "details read back");
        (light.details_held, light.prizes.len(), light.metadata.is_some())
    };
    assert_eq!(held(json!({"prizes": [{"ranks": [1, 1], "reward": "gold"}], "metadata": {"season": 7}})), (true, 1, true));
    let zeros = Value::Array(vec![json!(0); 400]);
    assert!(zeros.to_string().len() + body()["prizes"].to_string().len() <= DETAILS_HELD_BYTES, "under a kilobyte of text");
    assert_eq!(held(json!({"metadata": {"zeros": zeros}})), (false, 0, false));
    let long = json!([{"ranks": [1, 1], "reward": "x".repeat(DETAILS_HELD_BYTES)}]);
    assert_eq!(held(json!({"prizes": long})), (false, 0, false));
}
