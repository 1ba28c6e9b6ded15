use std::collections::BTreeMap;

use super::*;
use crate::domain::league::{Idle, ZoneSize};

fn kinds(line: &str) -> Vec<(String, CrossingKind, Option<String>)> {
    crossings(&Move::parse(line).expect("a move"), None).into_iter().map(|c| (c.user_id, c.crossing, c.by)).collect()
}

fn c(user: &str, kind: CrossingKind, by: Option<&str>) -> (String, CrossingKind, Option<String>) {
    (user.to_owned(), kind, by.map(str::to_owned))
}

#[test]
fn a_climb_into_first_place_names_everyone_it_passed() {
    // u from 5th (0-based 4, outside a top 3) to first: a, b, c now 2nd..4th.
    assert_eq!(
        kinds("T season s1 3 u 4 0 1 a b c"),
        vec![
            c("u", CrossingKind::EnteredTop, None),
            c("u", CrossingKind::TookFirst, None),
            c("a", CrossingKind::LostFirst, Some("u")),
            c("b", CrossingKind::Overtaken, Some("u")),
            c("c", CrossingKind::LeftTop, Some("u")),
        ]
    );
}

#[test]
fn a_fall_lets_the_next_ones_up_and_a_ban_says_nothing_to_the_banned() {
    assert_eq!(
        kinds("T day d 2 u 0 -1 0 a b"),
        vec![
            c("u", CrossingKind::LostFirst, None),
            c("u", CrossingKind::LeftTop, None),
            c("a", CrossingKind::TookFirst, None),
            c("b", CrossingKind::EnteredTop, None),
        ]
    );
    assert_eq!(kinds("BT day d 2 u 0 -1 0 a b"), vec![c("a", CrossingKind::TookFirst, None), c("b", CrossingKind::EnteredTop, None)]);
    assert_eq!(kinds("T day d 2 u 5 3 4"), vec![], "a move outside the top crosses nothing");
    assert_eq!(Move::parse("X day d"), None);
    assert_eq!(Move::parse("T day d x u 1 2 3"), None);
}

fn league() -> League {
    League {
        period: PeriodKind::Week(chrono::Weekday::Mon),
        cohort_size: 4,
        tiers: ["bronze", "silver", "gold"].map(str::to_owned).to_vec(),
        zones: vec![(ZoneSize::Count(1), ZoneSize::Count(1)); 3],
        idle: Idle::Keep,
    }
}

proptest::proptest! {
    /// A windowed cohort move (`LW`: only the names between the member's two places) names
    /// exactly the crossings of the same move over the whole cohort (`L`), for every size, tier,
    /// zone shape and pair of places.
    #[test]
    fn a_windowed_cohort_move_names_the_crossings_of_the_whole_cohort(
        size in 1usize..40,
        from in 0usize..40,
        to in 0usize..40,
        tier in 0usize..3,
        promote in 0u32..12,
        demote in 0u32..12,
        fraction in proptest::bool::ANY,
    ) {
        let (from, to) = (from % size, to % size);
        proptest::prop_assume!(from != to);
        let zone = |n: u32| if fraction { ZoneSize::Fraction(f64::from(n) / 12.0) } else { ZoneSize::Count(n) };
        let league = League { zones: vec![(zone(promote), zone(demote)); 3], ..league() };
        let after: Vec<String> = (0..size).map(|i| format!("u{i}")).collect();
        let member = &after[to];
        let (lo, hi) = (from.min(to), from.max(to));
        let full = format!("L week w {tier}:1 {member} {from} {}", after.join(" "));
        let window = format!("LW week w {tier}:1 {member} {from} {lo} {size} {}", after[lo..=hi].join(" "));
        proptest::prop_assert_eq!(
            crossings(&Move::parse(&full).unwrap(), Some(&league)),
            crossings(&Move::parse(&window).unwrap(), Some(&league))
        );
    }
}

#[test]
fn a_windowed_cohort_move_that_does_not_hold_its_member_or_fit_its_size_is_no_move() {
    assert!(Move::parse("LW week w 1:1 d 3 1 4 a b c").is_none(), "d is not among the names");
    assert!(Move::parse("LW week w 1:1 d 3 2 4 b c d").is_none(), "places 2..5 of 4");
    assert!(Move::parse("LW week w 1:1 d 3 0 4000000 d").is_none(), "a size past any cohort");
    assert!(Move::parse("LW week w 1:1 d 3 1 4 d a b").is_some());
}

#[test]
fn a_cohort_move_names_zone_crossings_with_the_zones_of_each_size() {
    let league = league();
    let of = |line: &str| {
        crossings(&Move::parse(line).unwrap(), Some(&league)).into_iter().map(|c| (c.user_id, c.crossing, c.by)).collect::<Vec<_>>()
    };
    // Silver (tier 1) cohort of 4: promote 1, demote 1. d passes a into first place.
    assert_eq!(
        of("L week w 1:1 d 3 d a b c"),
        vec![
            c("d", CrossingKind::EnteredPromotion, None),
            c("d", CrossingKind::LeftDemotion, None),
            c("a", CrossingKind::LeftPromotion, Some("d")),
            c("c", CrossingKind::EnteredDemotion, Some("d")),
        ]
    );
    // A fourth member joins last: the zones grow from none (3 of 4) to one each.
    assert_eq!(
        of("L week w 1:1 d -1 a b c d"),
        vec![c("a", CrossingKind::EnteredPromotion, None), c("d", CrossingKind::EnteredDemotion, None)]
    );
    // Without the league's rules, a cohort move names nothing.
    assert!(crossings(&Move::parse("L week w 1:1 d 3 d a b c").unwrap(), None).is_empty());
}

#[test]
fn a_tie_is_no_zone_pass_and_a_member_with_no_score_is_in_no_zone() {
    let league = league();
    let of = |line: &str| {
        crossings(&Move::parse(line).unwrap(), Some(&league)).into_iter().map(|c| (c.user_id, c.crossing, c.by)).collect::<Vec<_>>()
    };
    // d reaches a's very composite from last; Redis's order puts d first, as the league route
    // shows it and the close ranks it: d takes the promotion, but a, only tied, was not passed
    // (no `by`); c was.
    assert_eq!(
        of("L week w 1:1 d 3 d =a b c"),
        vec![
            c("d", CrossingKind::EnteredPromotion, None),
            c("d", CrossingKind::LeftDemotion, None),
            c("a", CrossingKind::LeftPromotion, None),
            c("c", CrossingKind::EnteredDemotion, Some("d")),
        ]
    );
    assert_eq!(of("LW week w 1:1 d 3 0 4 d =a b c"), of("L week w 1:1 d 3 d =a b c"));
    // A fourth member is placed with no score: zones are of the three with one (none in
    // silver at 3 of 4), so nobody's zone moves.
    assert_eq!(of("L week w 1:1 d -1 a b c !d"), vec![]);
    // d's score is removed: the zones shrink to those of three, so a and d leave theirs.
    assert_eq!(of("L week w 1:1 d 3 a b c !d"), vec![c("a", CrossingKind::LeftPromotion, None), c("d", CrossingKind::LeftDemotion, None)]);
}

fn detail(user: &str, crossing: CrossingKind, before: Option<u32>, after: Option<u32>, id: &str) -> Detail {
    Detail {
        id: id.to_owned(),
        board: "b".to_owned(),
        period: "season".to_owned(),
        period_id: "s1".to_owned(),
        user_id: user.to_owned(),
        crossing,
        rank_before: before,
        rank_after: after,
        by: Some("x".to_owned()),
        event_id: None,
    }
}

#[test]
fn a_quiet_time_merges_a_users_crossings_and_the_last_state_wins() {
    let mut pending = BTreeMap::new();
    for (i, at) in [0, 10_000, 20_000, 30_000, 59_999].into_iter().enumerate() {
        let rank = i as u32 + 2;
        merge(&mut pending, detail("u", CrossingKind::Overtaken, Some(rank), Some(rank + 1), &format!("o{i}")), at, 60_000);
    }
    merge(&mut pending, detail("v", CrossingKind::EnteredTop, Some(11), Some(9), "e"), 1_000, 60_000);
    merge(&mut pending, detail("v", CrossingKind::LeftTop, Some(9), Some(11), "l"), 2_000, 60_000);
    assert!(due(&mut pending, 59_999).is_empty(), "nothing is due before the quiet time ends");
    let sent = due(&mut pending, 61_000);
    assert_eq!(sent.len(), 1, "v entered and left: nothing to tell; u overtaken five times: one event");
    assert_eq!((sent[0].id.as_str(), sent[0].rank_before, sent[0].rank_after), ("o4", Some(2), Some(7)));
    assert!(pending.is_empty());
    // A crossing after the window's end opens another.
    merge(&mut pending, detail("u", CrossingKind::Overtaken, Some(7), Some(8), "p"), 60_000, 60_000);
    assert_eq!(due(&mut pending, 120_000).len(), 1);
}

#[test]
fn notify_is_validated_against_the_boards_periods() {
    let periods = [PeriodKind::Day, PeriodKind::Season];
    let raw = |toml: &str| toml::from_str::<RawNotify>(toml).unwrap();
    let ok = validate(raw("top = 10"), &periods).unwrap();
    assert_eq!((ok.top, ok.quiet_secs, ok.top_of(PeriodKind::Day)), (10, 0, 10));
    let some = validate(
        raw(r#"top = 3
periods = ["season"]"#),
        &periods,
    )
    .unwrap();
    assert_eq!((some.top_of(PeriodKind::Day), some.top_of(PeriodKind::Season)), (0, 3));
    assert_eq!(validate(raw("top = 0"), &periods).unwrap_err().0, "top");
    assert_eq!(validate(raw("top = 101"), &periods).unwrap_err().0, "top");
    assert_eq!(validate(raw("top = 1\nquiet_secs = 86401"), &periods).unwrap_err().0, "quiet_secs");
    assert_eq!(validate(raw("top = 1\nperiods = [\"month\"]"), &periods).unwrap_err().0, "periods[0]");
    assert_eq!(validate(raw("top = 1\nperiods = []"), &periods).unwrap_err().0, "periods");
}

#[test]
fn events_a_bus_refused_go_out_first_in_their_order_and_take_no_later_crossing() {
    let event = |user: &str, n: u32| Detail {
        id: format!("b:1-0:{n}"),
        board: "b".into(),
        period: "all".into(),
        period_id: "all".into(),
        user_id: user.into(),
        crossing: CrossingKind::Overtaken,
        rank_before: Some(2),
        rank_after: Some(3),
        by: Some("z".into()),
        event_id: None,
    };
    let mut held = BTreeMap::new();
    // A quiet time's window of "a", due later.
    merge(&mut held, event("a", 9), 1_000, 60_000);
    hold_unsent(&mut held, [event("c", 0), event("a", 1), event("b", 2)], 500);
    // Due from when they were written: the lag counts from there, not from 1970.
    assert_eq!(held.values().flatten().map(|w| w.due_ms).min(), Some(500));
    // A later crossing of "a" merges into the quiet window, not into the refused event.
    merge(&mut held, event("a", 7), 2_000, 60_000);
    let out: Vec<String> = due(&mut held, 10_000).into_iter().map(|d| d.id).collect();
    assert_eq!(out, ["b:1-0:0", "b:1-0:1", "b:1-0:2"]);
    let later: Vec<String> = due(&mut held, i64::MAX).into_iter().map(|d| d.id).collect();
    assert_eq!(later, ["b:1-0:7"]);
}
