use super::*;
use crate::domain::config::Config;

#[test]
fn percentile_is_the_share_strictly_below() {
    assert_eq!(percentile(0, 1), 0.0);
    assert_eq!(percentile(9, 10), 90.0);
    assert_eq!(percentile(1, 3), 33.33);
    assert_eq!(percentile(0, 0), 0.0);
}

#[test]
fn only_single_rule_boards_report_a_count() {
    let config = Config::default_boards();
    assert_eq!(count_field(config.board("invites").unwrap()), Some(("invite_count".into(), 100)));
    assert_eq!(count_field(config.board("activity").unwrap()), None);
}

fn place(position: u64, points: i64, above: u64) -> Option<MemberPlace> {
    let composite = (points * crate::domain::tiebreak::TIME_SPAN + position as i64) as f64;
    Some(MemberPlace { position, composite, above })
}

#[test]
fn a_listing_is_in_board_order_with_the_absent_last() {
    let members = ["c", "gone", "a", "b", "also-gone"];
    let places = vec![place(9, 5, 8), None, place(1, 20, 1), place(4, 20, 1), None];
    let unique = order_listing(&members, places.clone(), &Scale::POINTS, RankMode::Unique);
    let summary: Vec<_> = unique.iter().map(|(m, p, r)| (*m, p.as_ref().map(|p| p.position), *r)).collect();
    assert_eq!(
        summary,
        [("a", Some(1), Some(1)), ("b", Some(4), Some(2)), ("c", Some(9), Some(3)), ("gone", None, None), ("also-gone", None, None)]
    );
    let competition = order_listing(&members, places, &Scale::POINTS, RankMode::Competition);
    let relative: Vec<_> = competition.iter().map(|(_, _, r)| *r).collect();
    assert_eq!(relative, [Some(1), Some(1), Some(3), None, None]);
}

#[test]
fn rank_modes_parse() {
    assert_eq!(RankMode::parse("competition"), Some(RankMode::Competition));
    assert_eq!(RankMode::parse("dense"), None);
}
