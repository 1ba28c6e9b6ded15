//! Which periods an admin action reaches at a time (docs/moderation.md): the live ones an
//! event could still land in, the current ones, and a ban's, which reach a tournament's
//! instances not frozen yet.

use chrono::{DateTime, Utc};

use crate::domain::config::Board;
use crate::domain::period::{EventWindow, Period};

/// The periods of `board` an event could still land in at `now`: those containing any instant
/// from `now - grace` (late events) to `now + max_future` (clock skew). Usually one per
/// period kind; two around a boundary (e.g. yesterday's day board for 15 minutes after
/// midnight). Older periods are history: no correction rewrites them, and a ban only a
/// tournament's instances the archive has not frozen (`ended_instances`).
pub fn live_periods(board: &Board, now: DateTime<Utc>, window: &EventWindow) -> Vec<Period> {
    let mut live: Vec<Period> = Vec::new();
    for &kind in &board.periods {
        for at in [now - window.grace, now, now + window.max_future] {
            let period = Period::containing(kind, at, board.timezone);
            if !live.contains(&period) {
                live.push(period);
            }
        }
    }
    live
}

/// The periods a ban takes `board`'s user off at `now`: the live ones (`live_periods`), and a
/// tournament's last instance once its window has ended, which stays not frozen until the
/// archive stores its results (docs/tournaments.md#bans; the ban script leaves it alone once
/// frozen).
pub fn ban_periods(board: &Board, now: DateTime<Utc>, window: &EventWindow) -> Vec<Period> {
    let mut periods = live_periods(board, now, window);
    if let Some(tournament) = board.tournament.as_ref().filter(|tournament| now >= tournament.end) {
        let last_instant = tournament.end - chrono::Duration::seconds(1);
        for &kind in &board.periods {
            let last = Period::containing(kind, last_instant, board.timezone);
            if !periods.contains(&last) {
                periods.push(last);
            }
        }
    }
    periods
}

/// Instances of a tournament walked back from a ban at most (a month of a daily one, a day of
/// one every 15 minutes): those the archive has not frozen are what its lag leaves unstored.
pub const BAN_REACH_INSTANCES: usize = 100;
/// An instance whose sets expire sooner than this after a ban is left alone: they could expire
/// while the ban is on its way, and its script would take a set gone before the expiry its
/// guard records, on the function's clock, for a loss.
pub const BAN_EXPIRY_MARGIN_MINUTES: i64 = 5;

/// The instances of a tournament's board that ended before `ban_periods`' reach and whose sets
/// may still hold results the archive has not stored (docs/tournaments.md#bans): every one ended
/// whose sets expire more than `BAN_EXPIRY_MARGIN_MINUTES` after `now`, latest first, at most
/// `BAN_REACH_INSTANCES`, none of `reached` (the ban's own periods, `ban_periods`). A ban takes
/// the user off those where it finds them.
pub fn ended_instances(board: &Board, now: DateTime<Utc>, window: &EventWindow, reached: &[Period]) -> Vec<Period> {
    let Some(tournament) = board.tournament.as_ref() else { return Vec::new() };
    let expire_after = (now + chrono::Duration::minutes(BAN_EXPIRY_MARGIN_MINUTES)).timestamp();
    // Instances ended before the longest retention are gone: the walk back stops there.
    let longest = board.periods.iter().map(|kind| kind.retention()).collect::<Option<Vec<_>>>().and_then(|all| all.into_iter().max());
    let mut ended = Vec::new();
    for instance in tournament.ended_by(now - window.grace, longest.map(|retention| now - retention), BAN_REACH_INSTANCES) {
        for &kind in &board.periods {
            let period = Period::containing(kind, instance.end - chrono::Duration::seconds(1), board.timezone);
            let kept = period.expires_at().is_none_or(|at| at > expire_after);
            if kept && !reached.contains(&period) && !ended.contains(&period) {
                ended.push(period);
            }
        }
    }
    ended
}

/// The periods of `board` that contain `now`.
pub fn current_periods(board: &Board, now: DateTime<Utc>) -> Vec<Period> {
    board.periods.iter().map(|&kind| Period::containing(kind, now, board.timezone)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::Config;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn ids(periods: &[Period]) -> Vec<&str> {
        periods.iter().map(|p| p.id.as_str()).collect()
    }

    #[test]
    fn live_periods_cover_the_event_window_around_boundaries() {
        let config = Config::default_boards();
        let activity = config.board("activity").unwrap();
        let window = EventWindow::default();
        assert_eq!(ids(&live_periods(activity, at("2026-11-22T10:00:00+08:00"), &window)), ["2026-11-22", "2026-11"]);
        // Ten minutes into December: late events can still land on November 30 and November.
        assert_eq!(
            ids(&live_periods(activity, at("2026-12-01T00:10:00+08:00"), &window)),
            ["2026-11-30", "2026-12-01", "2026-11", "2026-12"]
        );
        // Thirty seconds before midnight: a client a minute ahead already writes tomorrow.
        assert_eq!(ids(&live_periods(activity, at("2026-11-22T23:59:30+08:00"), &window)), ["2026-11-22", "2026-11-23", "2026-11"]);
        assert_eq!(ids(&current_periods(activity, at("2026-12-01T00:10:00+08:00"))), ["2026-12-01", "2026-12"]);
    }

    fn tournament(extra: serde_json::Value) -> Board {
        let mut body = serde_json::json!({"title": "Cup", "keep": "best", "order": "desc",
            "start": "2026-01-01T00:00:00Z", "end": "2026-12-31T00:00:00Z", "join_required": false});
        for (key, value) in extra.as_object().unwrap() {
            body[key] = value.clone();
        }
        crate::domain::config::Definition::tournament("cup", &body, at("2025-12-01T00:00:00Z")).unwrap().board
    }

    /// A ban mid-tournament reaches back over the instances ended before its live ones, latest
    /// first, within their retention and at most `BAN_REACH_INSTANCES`; none before the first.
    #[test]
    fn ended_instances_reach_back_within_retention_and_the_cap() {
        let window = EventWindow::default();
        let daily = tournament(serde_json::json!({"reset": "day", "duration_secs": 86_400}));
        let noon = at("2026-06-10T12:00:00Z");
        let ended_at = |board: &Board, now| ended_instances(board, now, &window, &ban_periods(board, now, &window));
        let ended = ended_at(&daily, noon);
        assert_eq!(ended.len(), 30, "a day's retention: 30 days back");
        assert_eq!((ended[0].id.as_str(), ended[29].id.as_str()), ("2026-06-09", "2026-05-11"));
        assert!(!ended.iter().any(|p| ban_periods(&daily, noon, &window).contains(p)), "the live ones are not repeated");
        // Five minutes after midnight, yesterday is live still (the grace): not listed twice.
        assert_eq!(ended_at(&daily, at("2026-06-10T00:05:00Z"))[0].id, "2026-06-08");
        assert_eq!(ended_at(&daily, at("2026-01-01T12:00:00Z")), Vec::<Period>::new());
        let often = tournament(serde_json::json!({"cron": "*/15 * * * *", "duration_secs": 900}));
        assert_eq!(ended_at(&often, noon).len(), BAN_REACH_INSTANCES);
        let one_off = tournament(serde_json::json!({}));
        assert_eq!(ended_at(&one_off, noon), Vec::<Period>::new(), "its one instance is live");
        let config = Config::default_boards();
        assert_eq!(ended_at(config.board("activity").unwrap(), noon), Vec::<Period>::new());
    }
}
