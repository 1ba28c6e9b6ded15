//! Score boards: a client submits a score and the board keeps the best, the latest or the sum
//! of them, highest or lowest first. Pure; time is passed in.
//!
//! A score board stores `value * 2^23 + time part` (see [`Scale`]): scores in
//! `0..=MAX_SCORE` need 30 of a double's 53 exact bits, which leaves 23 for "who got there
//! first". Counted from the period's start, a day, month or season fits them to the second;
//! an all-time board counts from 2020 in steps of [`ALL_TIME_STEP_SECS`]. Members that reach the
//! same score within one step are ordered by Redis (reverse byte order of the user id).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::config::{Board, Keep, Order, ScoreRules};
use crate::domain::ids::{self, IdError};
use crate::domain::period::{EventTimeError, EventWindow, Period, PeriodKind};
use crate::domain::scoring::fingerprint;
use crate::domain::tiebreak::{EPOCH_SECS, RangeError, Scale, time_span_for};

pub use crate::domain::tiebreak::MAX_SCORE;
/// Distinct time parts of a score board's composite at the default `MAX_SCORE` (2^23).
pub const SCORE_TIME_SPAN: i64 = time_span_for(MAX_SCORE);
/// Tie-break resolution of all-time score boards at the default `MAX_SCORE`: 2^23 steps of
/// 256 s cover 2020..2088.
pub const ALL_TIME_STEP_SECS: i64 = 256;

/// The scale of one period of a board: rule boards share [`Scale::POINTS`]; a score board's
/// time parts count from the period's start (2020 for all-time, in coarser steps).
pub fn scale(board: &Board, period: &Period) -> Scale {
    scale_held(board, period, None)
}

/// `scale` of a board whose scores are held at `held` (`None`: its configured `max_score`): a
/// read answers from the scores as they are laid out, while the configuration says another
/// `max_score` and a move re-encodes them (docs/boards.md#changing-max_score).
pub fn scale_held(board: &Board, period: &Period, held: Option<i64>) -> Scale {
    let Some(scores) = &board.scores else {
        return Scale::POINTS;
    };
    let max_score = held.unwrap_or(scores.max_score);
    let span = score_time_span(max_score);
    let (origin, step) = match (period.kind, period.start, &board.tournament) {
        // A tournament's window fits its span (`Tournament::max_score`): every second counts.
        (_, _, Some(tournament)) => (tournament.origin_of(period), 1),
        (PeriodKind::All, _, _) | (_, None, _) => (EPOCH_SECS, ((ALL_TIME_RANGE_SECS + span - 1) / span).max(1)),
        (_, Some(start), _) => (start.timestamp(), 1),
    };
    Scale { span, max_value: max_score, ascending: scores.order == Order::Asc, origin, step }
}

/// `board` as its scores are held at `held` (a deploy configured with another `max_score` than
/// the board's scores are laid out in writes them at the held one until a move re-encodes them,
/// docs/boards.md#changing-max_score): borrowed when nothing differs.
pub fn held_at(board: &Board, held: Option<i64>) -> std::borrow::Cow<'_, Board> {
    match (&board.scores, held) {
        (Some(scores), Some(held)) if board.tournament.is_none() && scores.max_score != held => {
            let mut at = board.clone();
            at.scores.as_mut().expect("a score board").max_score = held;
            std::borrow::Cow::Owned(at)
        }
        _ => std::borrow::Cow::Borrowed(board),
    }
}

/// Time parts of a score board whose scores reach `max_score` (`tiebreak::time_span_for`):
/// 2^23 at the default `MAX_SCORE`; 2^31, every second from 2020 to 2088 even on all-time
/// boards, at 4,194,303 or less.
pub fn score_time_span(max_score: i64) -> i64 {
    time_span_for(max_score)
}

/// What an all-time score board's time parts cover: 2020 to 2088, as rule boards.
const ALL_TIME_RANGE_SECS: i64 = SCORE_TIME_SPAN * ALL_TIME_STEP_SECS;

/// The `max_score` a board is configured with when it can change (a score board's declared
/// one; a tournament's is decided by its window and never changes).
pub fn configured_scale(board: &Board) -> Option<i64> {
    board.scores.as_ref().filter(|_| board.tournament.is_none()).map(|scores| scores.max_score)
}

/// The scale a score line records (`max_score` in its entry), for a board whose scale is not
/// the default (the lines of a board at the default carry none).
pub fn line_scale(board: &Board) -> Option<i64> {
    configured_scale(board).filter(|max_score| *max_score != MAX_SCORE)
}

/// What a user who is not on `board` reads as: 0 on a points board (no points), but no score
/// (`null`) on a score board, where 0 is a score like any other (the best one where lower is
/// better).
pub fn absent_score(board: &Board) -> Option<i64> {
    if board.scores.is_some() { None } else { Some(0) }
}

/// What a board keeps after a submission of `submitted` when it held `held` (`None`: the user
/// was not on it): `Some(new score)` when the entry changes, `None` when it stays as it is.
/// An equal score changes nothing, so the member keeps the time they first reached it.
pub fn keep(keep: Keep, order: Order, held: Option<i64>, submitted: i64) -> Result<Option<i64>, RangeError> {
    let kept = match (keep, held) {
        (_, None) => submitted,
        (Keep::Best, Some(held)) => match order {
            Order::Desc => held.max(submitted),
            Order::Asc => held.min(submitted),
        },
        (Keep::Latest, Some(_)) => submitted,
        (Keep::Sum, Some(held)) => held + submitted,
    };
    if !(0..=MAX_SCORE).contains(&kept) {
        return Err(RangeError::Points);
    }
    Ok((held != Some(kept)).then_some(kept))
}

/// A score as the API receives it (`POST /v1/boards/{board}/scores`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    pub event_id: String,
    pub user_id: String,
    pub score: i64,
    #[serde(default)]
    pub occurred_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmissionRefusal {
    #[error(transparent)]
    InvalidId(#[from] IdError),
    #[error("score must be a whole number within 0..={0}")]
    OutOfRange(i64),
}

/// A validated submission for one board.
#[derive(Debug, Clone)]
pub struct ScorePlan<'a> {
    pub board: &'a Board,
    pub submission: &'a Submission,
    /// The board's keep, order and rate limit.
    pub rules: ScoreRules,
    pub fingerprint: String,
    /// Refuses the submission unless its id was already applied (then it is a duplicate).
    pub first_delivery: Option<EventTimeError>,
    /// Each period the submission lands in, with its scale.
    pub periods: Vec<(Period, Scale)>,
    /// For each period: the time part of a score reached now (the server's clock: a client
    /// cannot claim to have got somewhere first; in a period that has not started yet, the
    /// client's time, which is inside it).
    pub time_parts: Vec<i64>,
    /// When it is applied (the function's clock, or when SQS took an untimed message).
    pub now: DateTime<Utc>,
}

/// Validates a submission to a score board (`board.scores` is set) at `now`.
pub fn plan_submission<'a>(
    board: &'a Board,
    submission: &'a Submission,
    now: DateTime<Utc>,
    window: &EventWindow,
) -> Result<ScorePlan<'a>, SubmissionRefusal> {
    let rules = board.scores.expect("plan_submission is only called for score boards");
    ids::validate_id("event_id", &submission.event_id)?;
    ids::validate_id("user_id", &submission.user_id)?;
    if !(0..=rules.max_score).contains(&submission.score) {
        return Err(SubmissionRefusal::OutOfRange(rules.max_score));
    }
    let occurred_at = submission.occurred_at.unwrap_or(now);
    let first_delivery = window.check(occurred_at, now).err();
    let periods: Vec<(Period, Scale)> = board
        .periods
        .iter()
        .map(|&kind| {
            let period = Period::containing(kind, occurred_at, board.timezone);
            let scale = scale(board, &period);
            (period, scale)
        })
        .collect();
    // A score is reached now, on the server's clock. A submission that lands in a period that
    // has not started yet (a client clock up to a minute fast, just before a period turns)
    // counts as reached at the time its client gave, inside that period: it cannot rank above
    // someone who reached the same score in the period before that time. A late one (a period
    // already over) keeps its exact time within the span, and beyond it ties at the span's end.
    let time_parts = periods
        .iter()
        .map(|(period, scale)| {
            let reached = if period.start.is_some_and(|start| now < start) { occurred_at } else { now };
            scale.time_part(reached).unwrap_or(if reached.timestamp() < scale.origin { scale.span - 1 } else { 0 })
        })
        .collect();
    Ok(ScorePlan { board, submission, rules, fingerprint: fingerprint(submission), first_delivery, periods, time_parts, now })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::Config;
    use proptest::prelude::*;

    fn board(keep: &str, order: &str, periods: &str) -> Config {
        Config::parse(&format!(
            "[[boards]]\nname = \"laps\"\nkind = \"scores\"\nkeep = \"{keep}\"\norder = \"{order}\"\ntimezone = \"UTC\"\nperiods = [{periods}]\ntop = 10\n"
        ))
        .unwrap()
    }

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn best_keeps_the_better_end_and_equal_changes_nothing() {
        assert_eq!(keep(Keep::Best, Order::Desc, Some(10), 12), Ok(Some(12)));
        assert_eq!(keep(Keep::Best, Order::Desc, Some(10), 9), Ok(None));
        assert_eq!(keep(Keep::Best, Order::Asc, Some(10), 9), Ok(Some(9)));
        assert_eq!(keep(Keep::Best, Order::Asc, Some(10), 12), Ok(None));
        assert_eq!(keep(Keep::Best, Order::Asc, Some(10), 10), Ok(None));
        assert_eq!(keep(Keep::Latest, Order::Desc, Some(10), 3), Ok(Some(3)));
        assert_eq!(keep(Keep::Latest, Order::Desc, Some(10), 10), Ok(None));
        assert_eq!(keep(Keep::Sum, Order::Asc, Some(10), 3), Ok(Some(13)));
        assert_eq!(keep(Keep::Sum, Order::Desc, None, 0), Ok(Some(0)));
        assert_eq!(keep(Keep::Sum, Order::Desc, Some(MAX_SCORE), 1), Err(RangeError::Points));
    }

    #[test]
    fn day_and_month_ties_are_exact_to_the_second_all_time_to_256_seconds() {
        let config = board("best", "asc", "\"day\", \"month\", \"all\"");
        let laps = config.board("laps").unwrap();
        let now = at("2026-11-30T23:59:59Z");
        let submission = Submission { event_id: "e".into(), user_id: "u".into(), score: 5, occurred_at: None };
        let plan = plan_submission(laps, &submission, now, &EventWindow::default()).unwrap();
        let [day, month, all] = [0, 1, 2].map(|i| plan.periods[i].1);
        for scale in [day, month] {
            let first = scale.encode(5, now - chrono::Duration::seconds(1)).unwrap();
            let second = scale.encode(5, now).unwrap();
            assert!(first > second, "one second earlier ranks higher");
            assert_eq!(scale.decode(second).unwrap(), (5, now));
        }
        assert_eq!(all.step, ALL_TIME_STEP_SECS);
        assert!(all.time_part(at("2088-01-19T03:14:07Z")).is_ok());
        assert_eq!(all.time_part(at("2020-01-01T00:04:15Z")), all.time_part(at("2020-01-01T00:00:00Z")));
        assert!(all.encode(4, now).unwrap() > all.encode(5, at("2020-01-01T00:00:00Z")).unwrap(), "lower is better");
        assert_eq!(all.encode(MAX_SCORE, now).map(|c| all.decode(c).unwrap().0), Ok(MAX_SCORE));
        assert!(day.encode(MAX_SCORE + 1, now).is_err());
    }

    #[test]
    fn a_submission_is_validated_before_anything_is_written() {
        let config = board("best", "desc", "\"day\"");
        let laps = config.board("laps").unwrap();
        let submit = |score, user: &str| Submission { event_id: "e".into(), user_id: user.into(), score, occurred_at: None };
        let now = at("2026-11-25T10:00:00Z");
        let window = EventWindow::default();
        assert_eq!(plan_submission(laps, &submit(-1, "u"), now, &window).unwrap_err(), SubmissionRefusal::OutOfRange(MAX_SCORE));
        assert_eq!(plan_submission(laps, &submit(MAX_SCORE + 1, "u"), now, &window).unwrap_err(), SubmissionRefusal::OutOfRange(MAX_SCORE));
        assert!(matches!(plan_submission(laps, &submit(1, "a b"), now, &window), Err(SubmissionRefusal::InvalidId(_))));
        assert_eq!(plan_submission(laps, &submit(1_000_000_000, "u"), now, &window).unwrap().submission.score, 1_000_000_000);
    }

    fn keeps() -> impl Strategy<Value = Keep> {
        prop_oneof![Just(Keep::Best), Just(Keep::Latest), Just(Keep::Sum)]
    }

    proptest! {
        /// The composite orders by score in the board's order, then by who reached it first,
        /// over the whole score range and the period.
        #[test]
        fn composites_order_by_score_then_earliest(asc: bool, s1 in 0..=MAX_SCORE, s2 in 0..=MAX_SCORE, t1 in 0i64..2_678_400, t2 in 0i64..2_678_400) {
            let config = board("best", if asc { "asc" } else { "desc" }, "\"month\"");
            let laps = config.board("laps").unwrap();
            let period = Period::containing(PeriodKind::Month, at("2026-12-15T00:00:00Z"), laps.timezone);
            let scale = scale(laps, &period);
            let start = period.start.unwrap().timestamp();
            let time = |t| DateTime::from_timestamp(start + t, 0).unwrap();
            let c1 = scale.encode(s1, time(t1)).unwrap();
            let c2 = scale.encode(s2, time(t2)).unwrap();
            let better = if asc { s2.cmp(&s1) } else { s1.cmp(&s2) };
            prop_assert_eq!(c1.partial_cmp(&c2).unwrap(), better.then(t2.cmp(&t1)));
            prop_assert_eq!(scale.decode(c1).unwrap(), (s1, time(t1)));
        }

        /// Whatever the order of submissions, `best` ends at the extreme, `latest` at the last
        /// and `sum` at the total (when in range).
        #[test]
        fn keeping_folds_to_the_rule(k in keeps(), asc: bool, scores in prop::collection::vec(0i64..1_000_000, 1..20)) {
            let order = if asc { Order::Asc } else { Order::Desc };
            let mut held = None;
            for &s in &scores {
                if let Some(new) = keep(k, order, held, s).unwrap() { held = Some(new) }
            }
            let expected = match (k, order) {
                (Keep::Best, Order::Desc) => *scores.iter().max().unwrap(),
                (Keep::Best, Order::Asc) => *scores.iter().min().unwrap(),
                (Keep::Latest, _) => *scores.last().unwrap(),
                (Keep::Sum, _) => scores.iter().sum(),
            };
            prop_assert_eq!(held, Some(expected));
        }
    }
}
