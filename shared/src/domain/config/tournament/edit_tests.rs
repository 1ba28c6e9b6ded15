use chrono::TimeZone;
use proptest::prelude::*;
use serde_json::json;

use super::*;

const BASE: i64 = 1_798_761_600; // 2027-01-01T00:00:00Z
const DAY: i64 = 86_400;

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(secs, 0).unwrap()
}

fn body(start: i64, end: i64, recurring: bool) -> Value {
    let mut body = json!({"title": "Cup", "keep": "best", "start": at(start).to_rfc3339(), "end": at(end).to_rfc3339(),
        "join_required": false, "max_size": 10, "prizes": [{"ranks": [1, 1], "reward": "gold"}]});
    if recurring {
        body["reset"] = json!("day");
        body["duration_secs"] = json!(DAY);
    }
    body
}

/// The tournament as a function loads it after `edited` is stored.
fn stored(edited: &Edited) -> Tournament {
    let mut after = Tournament::parse("cup", &edited.body).unwrap();
    after.scale_window = edited.scale_secs.map(Duration::seconds);
    after.prior_prizes = edited.prior_prizes.clone();
    after
}

fn field(error: EditError) -> String {
    match error {
        EditError::Invalid(invalid) => invalid.field,
        EditError::Closed => "closed".into(),
    }
}

#[test]
fn an_edit_names_only_what_may_change_and_checks_it() {
    let cup = Tournament::parse("cup", &body(BASE, BASE + 7 * DAY, false)).unwrap();
    let b = body(BASE, BASE + 7 * DAY, false);
    let now = at(BASE + DAY);
    let refused = |patch: Value| field(cup.edit(&b, &patch, now).unwrap_err());
    assert_eq!(refused(json!({})), "body");
    assert_eq!(refused(json!([])), "body");
    assert_eq!(refused(json!({"start": at(BASE).to_rfc3339()})), "start");
    assert_eq!(refused(json!({"max_entries": 3})), "max_entries");
    assert_eq!(refused(json!({"title": " "})), "title");
    assert_eq!(refused(json!({"title": null})), "title");
    assert_eq!(refused(json!({"max_size": 9})), "max_size", "lowered");
    assert_eq!(refused(json!({"end": at(BASE + DAY - 1).to_rfc3339()})), "end", "before now");
    assert_eq!(refused(json!({"end": at(BASE + DAY + 59).to_rfc3339()})), "end", "shortened within the notice");
    assert!(cup.edit(&b, &json!({"end": at(BASE + DAY + 60).to_rfc3339()}), now).is_ok(), "shortened with the notice");
    let edited = cup.edit(&b, &json!({"title": "Big cup", "max_size": 20, "metadata": {"x": 1}}), now).unwrap();
    assert_eq!((edited.body["title"].clone(), edited.body["max_size"].clone()), (json!("Big cup"), json!(20)));
    let removed = stored(&edited).edit(&edited.body, &json!({"metadata": null}), now).unwrap();
    assert!(removed.body.get("metadata").is_none());
    let uncapped = Tournament::parse("cup", &{
        let mut b = b.clone();
        b.as_object_mut().unwrap().remove("max_size");
        b
    })
    .unwrap();
    assert_eq!(field(uncapped.edit(&b, &json!({"max_size": 5}), now).unwrap_err()), "max_size", "a cap cannot be added");
    assert_eq!(field(cup.edit(&b, &json!({"title": "Late"}), at(BASE + 7 * DAY)).unwrap_err()), "closed");
}

#[test]
fn a_one_off_keeps_its_scale_when_its_end_moves_and_cannot_outgrow_it() {
    let b = body(BASE, BASE + 7 * DAY, false);
    let cup = Tournament::parse("cup", &b).unwrap();
    let now = at(BASE + DAY);
    // A window up to 97 days takes scores up to 2^30 - 1 beside 2^23 one-second time parts:
    // the room the scores were kept in.
    let span = 1 << 23;
    let longer = cup.edit(&b, &json!({"end": at(BASE + span).to_rfc3339()}), now).unwrap();
    assert_eq!(longer.scale_secs, Some(7 * DAY));
    assert_eq!(stored(&longer).max_score(), cup.max_score(), "the scale is unchanged");
    assert_eq!(stored(&longer).open_at(at(BASE + span - 1)).map(|i| i.end), Some(at(BASE + span)));
    assert_eq!(field(cup.edit(&b, &json!({"end": at(BASE + span + 1).to_rfc3339()}), now).unwrap_err()), "end");
    let shorter = cup.edit(&b, &json!({"end": at(BASE + 2 * DAY).to_rfc3339()}), now).unwrap();
    assert_eq!(stored(&shorter).max_score(), cup.max_score(), "a shorter window keeps the scale too");
    let back = stored(&shorter).edit(&shorter.body, &json!({"end": at(BASE + 7 * DAY).to_rfc3339()}), now).unwrap();
    assert_eq!(back.scale_secs, None, "back to the window it was made for");
    // Not open yet: nothing is kept, the new window makes its own scale.
    let early = cup.edit(&b, &json!({"end": at(BASE + 200 * DAY).to_rfc3339()}), at(BASE - DAY)).unwrap();
    assert_eq!(early.scale_secs, None);
    // Opening within the notice: a function a few seconds behind may already score in it.
    let soon = cup.edit(&b, &json!({"end": at(BASE + 60 * DAY).to_rfc3339()}), at(BASE - 30)).unwrap();
    assert_eq!(soon.scale_secs, Some(7 * DAY));
    // Ending within a minute: too late to move (the archive's run may be ending it).
    let last = at(BASE + 7 * DAY - 30);
    assert_eq!(field(cup.edit(&b, &json!({"end": at(BASE + 8 * DAY).to_rfc3339()}), last).unwrap_err()), "end");
    assert!(cup.edit(&b, &json!({"title": "Still"}), last).is_ok(), "other fields still change");
}

#[test]
fn prizes_of_an_open_one_off_are_replaced_with_nothing_kept() {
    let b = body(BASE, BASE + 7 * DAY, false);
    let cup = Tournament::parse("cup", &b).unwrap();
    let edited = cup.edit(&b, &json!({"prizes": [{"ranks": [1, 3], "reward": "silver"}]}), at(BASE + DAY)).unwrap();
    assert!(edited.prior_prizes.is_empty());
    assert_eq!(stored(&edited).prize_of(at(BASE + 7 * DAY), 3), Some(&json!("silver")));
}

proptest! {
    /// Model: the prizes in force at an instant are those of the last change made before it;
    /// an instance keeps the prizes in force when it ended. Daily instances end at midnights.
    /// The definition prices those that ended less than `PRIZES_KEPT` before the last edit
    /// (older ones are priced by what the archive recorded with their results), and keeps no
    /// replaced prizes older than that but for the instance shown.
    #[test]
    fn every_ended_instance_keeps_the_prizes_it_ended_with(
        edits in prop::collection::vec((1..20 * DAY, 1u64..50), 0..12),
    ) {
        let mut b = body(BASE, BASE + 30 * DAY, true);
        let mut cup = Tournament::parse("cup", &b).unwrap();
        let mut edits = edits;
        edits.sort_by_key(|(t, _)| *t);
        edits.dedup_by_key(|(t, _)| *t);
        let mut changes: Vec<(i64, u64)> = vec![];
        for (t, reward) in edits {
            let edited = cup.edit(&b, &json!({"prizes": [{"ranks": [1, 1], "reward": reward}]}), at(BASE + t)).unwrap();
            cup = stored(&edited);
            b = edited.body;
            changes.push((BASE + t, reward));
        }
        let last = changes.last().map_or(BASE, |(t, _)| *t);
        for day in 1..=30 {
            let ends = BASE + day * DAY;
            if ends + PRIZES_KEPT.num_seconds() <= last {
                continue;
            }
            let expected = changes.iter().rev().find(|(t, _)| *t < ends).map_or(json!("gold"), |(_, reward)| json!(reward));
            prop_assert_eq!(cup.prize_of(at(ends), 1), Some(&expected), "the instance ending on day {}", day);
        }
        // The first replaced prizes price every instance before them: kept.
        let shown = cup.instance_named(None, at(last)).map(|instance| instance.end);
        for kept in cup.prior_prizes.iter().skip(1) {
            prop_assert!(kept.until + PRIZES_KEPT > at(last) || shown.is_some_and(|end| end <= kept.until), "{:?} kept", kept);
        }
    }
}

/// Prizes changed every day for years: what is kept beside the definition stays a week's.
#[test]
fn prizes_changed_every_day_for_years_keep_a_week_of_replaced_ones() {
    let mut b = body(BASE, BASE + 1000 * DAY, true);
    let mut cup = Tournament::parse("cup", &b).unwrap();
    for day in 0..800 {
        let edited = cup.edit(&b, &json!({"prizes": [{"ranks": [1, 1], "reward": day}]}), at(BASE + day * DAY + DAY / 2)).unwrap();
        cup = stored(&edited);
        b = edited.body;
        assert!(cup.prior_prizes.len() <= 9, "day {day}: {} kept", cup.prior_prizes.len());
    }
    assert_eq!(cup.prior_prizes[0].prizes[0].reward, json!(0), "the first replaced prizes kept: they price every instance before");
    assert_eq!(cup.prize_of(at(BASE + 799 * DAY), 1), Some(&json!(798)), "yesterday's instance: the prizes it ended with");
    assert_eq!(cup.prize_of(at(BASE + 800 * DAY), 1), Some(&json!(799)), "today's: the new ones");
}

/// Replaced prizes kept by a release that did not record prizes with results price instances
/// whose results have none: never left out, nor the first replaced after them (it prices the
/// instances that ended before it, some archived by that release).
#[test]
fn prizes_replaced_before_the_release_that_records_them_are_kept() {
    let mut b = body(BASE, BASE + 1000 * DAY, true);
    let mut cup = Tournament::parse("cup", &b).unwrap();
    let legacy = |day: i64| PriorPrizes { until: at(BASE + day * DAY + DAY / 2), prizes: Vec::new(), recorded_after: false };
    cup.prior_prizes = vec![legacy(0), legacy(1)];
    for day in 2..100 {
        let edited = cup.edit(&b, &json!({"prizes": [{"ranks": [1, 1], "reward": day}]}), at(BASE + day * DAY + DAY / 2)).unwrap();
        cup = stored(&edited);
        b = edited.body;
    }
    assert_eq!(&cup.prior_prizes[..2], &[legacy(0), legacy(1)]);
    assert_eq!(cup.prior_prizes[2].until, at(BASE + 2 * DAY + DAY / 2), "the first replaced by this release");
    assert!(cup.prior_prizes.len() <= 11, "{} kept", cup.prior_prizes.len());
}

/// Early ends leave once their instance's scheduled end is `EARLY_END_KEPT` behind, unless the
/// instance is the one shown, or a prize change between its early and its scheduled end would
/// give its rows other prizes without the record.
#[test]
fn early_ends_leave_a_day_after_their_scheduled_end_unless_a_read_still_needs_them() {
    let mut b = body(BASE, BASE + 30 * DAY, true);
    b["duration_secs"] = json!(DAY / 2);
    let mut cup = Tournament::parse("cup", &b).unwrap();
    for d in 0..3 {
        cup.closed.insert(at(BASE + d * DAY).format("%Y-%m-%d").to_string(), at(BASE + d * DAY + 3_600));
    }
    cup.prior_prizes = vec![PriorPrizes { until: at(BASE + DAY + 7_200), prizes: Vec::new(), recorded_after: true }];
    assert_eq!(
        cup.early_ends_done(at(BASE + 5 * DAY)),
        ["2027-01-01", "2027-01-03"],
        "2027-01-02's prizes changed between its early and its scheduled end"
    );
    // 2027-01-03's is the last that ran; 2027-01-01's scheduled end is a day and 17 hours back.
    assert_eq!(cup.early_ends_done(at(BASE + 2 * DAY + 5 * 3_600)), ["2027-01-01"]);
    assert!(cup.early_ends_done(at(BASE + DAY + 11 * 3_600)).is_empty(), "2027-01-01's scheduled end is not a day back yet");
    cup.prior_prizes.clear();
    assert_eq!(cup.early_ends_done(at(BASE + 5 * DAY)), ["2027-01-01", "2027-01-02", "2027-01-03"]);
}
