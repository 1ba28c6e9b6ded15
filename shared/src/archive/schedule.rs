//! When the archive job works: which seasons are due, how close to the deadline it stops, and
//! how it backs off from DynamoDB. Pure; time is passed in.

use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};

use crate::domain::config::Board;
use crate::domain::period::{Period, PeriodKind};

/// Retries of the items DynamoDB leaves unprocessed: exponential, capped, with jitter.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: StdDuration,
    pub cap: StdDuration,
    /// BatchWriteItem calls per batch before giving up (the next invocation resumes).
    pub max_attempts: u32,
}

impl Backoff {
    /// The wait after failed attempt `attempt` (1-based), given `unit` drawn from `0.0..1.0`:
    /// half of `min(cap, base · 2^(attempt-1))` plus a random share of the other half ("equal
    /// jitter"), so retries of concurrent batches spread out but never hammer.
    pub fn delay(&self, attempt: u32, unit: f64) -> StdDuration {
        let ceiling = self.base.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1))).min(self.cap);
        ceiling / 2 + (ceiling / 2).mul_f64(unit.clamp(0.0, 1.0))
    }
}

/// The season that most recently ended at least `grace` before `now` in the board's timezone.
pub fn last_finished_season(board: &Board, now: DateTime<Utc>, grace: Duration) -> Period {
    let current = Period::containing(PeriodKind::Season, now - grace, board.timezone);
    let start = current.start.expect("a season has a start").with_timezone(&Utc);
    Period::containing(PeriodKind::Season, start - Duration::seconds(1), board.timezone)
}

/// Every season a scheduled run looks at, oldest first: each one that ended at least `grace`
/// before `now` and recently enough that its live board may still exist (a season board
/// outlives its season by `PeriodKind::Season`'s retention).
pub fn unarchived_candidates(board: &Board, now: DateTime<Utc>, grace: Duration) -> Vec<Period> {
    let retention = PeriodKind::Season.retention().expect("season boards expire");
    let mut seasons = vec![last_finished_season(board, now, grace)];
    loop {
        let oldest = seasons.last().expect("one season at least");
        let start = oldest.start.expect("a season has a start").with_timezone(&Utc);
        let before = Period::containing(PeriodKind::Season, start - Duration::seconds(1), board.timezone);
        if before.end.expect("a season ends").with_timezone(&Utc) + retention <= now {
            break;
        }
        seasons.push(before);
    }
    seasons.reverse();
    seasons
}

/// How close to `deadline` work stops, for an invocation that has `remaining` time left.
pub fn stopping_margin(configured: Duration, remaining: Duration) -> Duration {
    configured.min(remaining / 4).max(Duration::zero())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::Config;

    fn points_board() -> Board {
        Config::default_boards().board("points").unwrap().clone()
    }

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn the_due_season_is_the_one_that_ended_at_least_grace_ago_in_the_board_timezone() {
        let board = points_board();
        let grace = Duration::minutes(30);
        // October ends at 2026-11-01T00:00+08:00.
        assert_eq!(last_finished_season(&board, utc("2026-11-01T00:29:59+08:00"), grace).id, "2026-09");
        assert_eq!(last_finished_season(&board, utc("2026-11-01T00:30:00+08:00"), grace).id, "2026-10");
        assert_eq!(last_finished_season(&board, utc("2026-11-30T23:59:59+08:00"), grace).id, "2026-10");
        assert_eq!(last_finished_season(&board, utc("2027-01-01T01:00:00+08:00"), grace).id, "2026-12");
    }

    #[test]
    fn a_scheduled_run_looks_at_every_season_whose_live_board_may_still_exist() {
        let board = points_board();
        let grace = Duration::minutes(30);
        let ids = |now| unarchived_candidates(&board, utc(now), grace).into_iter().map(|s| s.id).collect::<Vec<_>>();
        // August ended 2026-09-01T00:00+08:00; its board lives 90 days, to 2026-11-30T00:00+08:00.
        assert_eq!(ids("2026-11-01T01:00:00+08:00"), ["2026-08", "2026-09", "2026-10"]);
        assert_eq!(ids("2026-11-29T23:59:59+08:00"), ["2026-08", "2026-09", "2026-10"]);
        assert_eq!(ids("2026-11-30T00:00:00+08:00"), ["2026-09", "2026-10"]);
        assert_eq!(ids("2026-11-01T00:29:59+08:00"), ["2026-08", "2026-09"]);
    }

    #[test]
    fn the_margin_shrinks_for_short_invocations() {
        let configured = Duration::seconds(30);
        assert_eq!(stopping_margin(configured, Duration::minutes(15)), configured);
        assert_eq!(stopping_margin(configured, Duration::seconds(40)), Duration::seconds(10));
        assert_eq!(stopping_margin(configured, Duration::seconds(-1)), Duration::zero(), "past the deadline: stop at once");
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_with_equal_jitter() {
        let backoff = Backoff { base: StdDuration::from_millis(100), cap: StdDuration::from_secs(1), max_attempts: 10 };
        assert_eq!(backoff.delay(1, 0.0), StdDuration::from_millis(50));
        assert_eq!(backoff.delay(1, 1.0), StdDuration::from_millis(100));
        assert_eq!(backoff.delay(2, 0.0), StdDuration::from_millis(100));
        assert_eq!(backoff.delay(3, 0.5), StdDuration::from_millis(300));
        assert_eq!(backoff.delay(5, 1.0), StdDuration::from_secs(1), "capped");
        assert_eq!(backoff.delay(40, 0.0), StdDuration::from_millis(500), "no overflow far past the cap");
    }
}
