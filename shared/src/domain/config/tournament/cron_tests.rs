//! `cron` tournaments: an instance opens at every time the schedule names, in the tournament's
//! timezone, and runs `duration_secs` (never past the next one).

use serde_json::json;

use super::*;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// Friday evenings in Paris, two hours each, through the winter.
fn friday_nights() -> Value {
    json!({"title": "Friday night", "keep": "best", "order": "desc", "start": "2026-11-01T00:00:00Z",
        "end": "2027-03-01T00:00:00Z", "cron": "0 20 * * fri", "timezone": "Europe/Paris", "duration_secs": 7200,
        "join_required": false})
}

#[test]
fn an_instance_opens_at_each_time_the_schedule_names_in_its_timezone() {
    let cup = Tournament::parse("friday", &friday_nights()).unwrap();
    let open = cup.open_at(at("2026-12-04T20:30:00+01:00")).unwrap();
    assert_eq!(open.id, "2026-12-04T2000");
    assert_eq!((open.start, open.end), (at("2026-12-04T20:00:00+01:00"), at("2026-12-04T22:00:00+01:00")));
    assert_eq!(cup.state_at(at("2026-12-04T22:00:00+01:00")), State::Upcoming, "two hours, then closed until next Friday");
    assert_eq!(cup.next_after(at("2026-12-04T22:00:00+01:00")).unwrap().id, "2026-12-11T2000");
    assert_eq!(cup.instance_named(Some("2026-12-11T2000"), at("2027-01-01T00:00:00Z")).unwrap().start, at("2026-12-11T20:00:00+01:00"));
    assert_eq!(cup.instance_named(Some("2026-12-12T2000"), at("2027-01-01T00:00:00Z")), None, "a Saturday is no instance");
    assert_eq!(cup.results_instance(at("2026-12-05T12:00:00Z")).unwrap().id, "2026-12-04T2000", "the last that ran");
    let ended: Vec<String> = cup.ended_by(at("2026-12-19T12:00:00Z"), None, 3).into_iter().map(|i| i.id).collect();
    assert_eq!(ended, ["2026-12-18T2000", "2026-12-11T2000", "2026-12-04T2000"]);
    assert_eq!(cup.period_kind().as_str(), "cron");
    assert_eq!(cup.period_at(at("2026-12-05T12:00:00Z")).id, "2026-12-04T2000");
}

#[test]
fn a_schedule_is_checked_beside_reset_and_duration() {
    let field = |change: &dyn Fn(&mut Value)| {
        let mut body = friday_nights();
        change(&mut body);
        Tournament::parse("friday", &body).map(|_| ()).map_err(|error| (error.field, error.problem))
    };
    assert_eq!(field(&|b| b["reset"] = json!("day")).unwrap_err().0, "cron", "one schedule, not two");
    assert_eq!(field(&|b| b["cron"] = json!("0 20 * *")).unwrap_err().0, "cron");
    assert!(field(&|b| b["cron"] = json!("0 0 30 2 *")).unwrap_err().1.contains("never fires"));
    assert_eq!(
        field(&|b| {
            b.as_object_mut().unwrap().remove("duration_secs");
        })
        .unwrap_err()
        .0,
        "duration_secs"
    );
    assert_eq!(field(&|b| b["duration_secs"] = json!(31 * 86_400 + 3 * 3600 + 1)).unwrap_err().0, "duration_secs");
    field(&|b| b["duration_secs"] = json!(31 * 86_400 + 3 * 3600)).unwrap();
    // Past any span a duration can hold: refused as too long, not a panic.
    for secs in [i64::MAX, i64::MAX / 1000 + 1, i64::MIN, 0] {
        assert_eq!(field(&|b| b["duration_secs"] = json!(secs)).unwrap_err().0, "duration_secs", "{secs}");
    }
}

#[test]
fn an_instance_never_outlives_the_next_firing() {
    // Every six hours, but each declared a day long: each ends when the next opens.
    let mut body = friday_nights();
    body["cron"] = json!("0 */6 * * *");
    body["duration_secs"] = json!(86_400);
    let cup = Tournament::parse("quarters", &body).unwrap();
    let open = cup.open_at(at("2026-12-04T07:00:00+01:00")).unwrap();
    assert_eq!((open.id.as_str(), open.end), ("2026-12-04T0600", at("2026-12-04T12:00:00+01:00")));
}

#[test]
fn a_start_in_the_past_opens_the_current_instance_only() {
    let mut cup = Tournament::parse("friday", &friday_nights()).unwrap();
    cup.defined = Some(at("2026-12-10T12:00:00Z"));
    let ended: Vec<String> = cup.ended_by(at("2026-12-19T12:00:00Z"), None, 10).into_iter().map(|i| i.id).collect();
    assert_eq!(ended, ["2026-12-18T2000", "2026-12-11T2000"], "none before it was defined");
}

#[test]
fn a_deleted_schedule_of_every_quarter_hour_is_over_at_once() {
    // Ten years of instances a quarter of an hour each: the walk for the next one stops at the
    // deletion (it walked to the window's end, 350,000 periods, on the first version).
    let mut body = friday_nights();
    body["cron"] = json!("*/15 * * * *");
    body["duration_secs"] = json!(900);
    body["end"] = json!("2036-10-01T00:00:00Z");
    let mut cup = Tournament::parse("minutes", &body).unwrap();
    cup.deleted = Some(at("2026-12-01T00:00:30Z"));
    assert_eq!(cup.state_at(at("2026-12-01T00:20:00Z")), State::Ended);
    assert_eq!(cup.next_after(at("2026-12-01T00:00:10Z")), None);
    assert_eq!(cup.open_at(at("2026-12-01T00:00:10Z")).map(|i| i.end), Some(at("2026-12-01T00:00:30Z")), "cut at the deletion");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// The forward walk a prune takes (`ended_between`) finds the instances the archive's walk
    /// back from the end (`ended_by`) finds, oldest first, the `most` oldest of them: for
    /// schedules every 15 minutes, every six hours, Friday nights in Paris, daily and weekly
    /// resets, one deleted part-way.
    #[test]
    fn the_walk_forward_finds_the_instances_the_walk_back_finds(
        schedule in 0usize..5, deleted in proptest::bool::ANY, after_min in 0i64..20_000, span_min in 0i64..20_000, most in 1usize..40,
    ) {
        let mut body = friday_nights();
        body["start"] = json!("2026-11-01T00:07:00Z");
        match schedule {
            0 => { body["cron"] = json!("*/15 * * * *"); body["duration_secs"] = json!(600); }
            1 => { body["cron"] = json!("0 */6 * * *"); body["duration_secs"] = json!(3600); }
            2 => {}
            3 => { body.as_object_mut().unwrap().remove("cron"); body["reset"] = json!("day"); }
            _ => { body.as_object_mut().unwrap().remove("cron"); body["reset"] = json!("week"); body["duration_secs"] = json!(86_400); }
        }
        let mut cup = Tournament::parse("cup", &body).unwrap();
        let base = at("2026-11-01T00:00:00Z");
        if deleted {
            cup.deleted = Some(base + Duration::minutes(after_min + span_min / 2) + Duration::milliseconds(1));
        }
        let after = base + Duration::minutes(after_min);
        let through = after + Duration::minutes(span_min);
        let mut back: Vec<Instance> = cup.ended_by(through, Some(after), usize::MAX);
        back.reverse();
        proptest::prop_assert_eq!(&cup.ended_between(after, through, usize::MAX), &back);
        back.truncate(most);
        proptest::prop_assert_eq!(cup.ended_between(after, through, most), back);
    }
}
