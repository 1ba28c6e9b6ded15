//! A score board's composites re-encoded for another `max_score` (docs/boards.md#changing-max_score).
//! A composite is `value * span + time part`, and the `max_score` decides the span, the value of
//! an ascending board's score and an all-time board's tie step (`scores::scale`): a board whose
//! `max_score` changes holds every composite again, its score kept and the time it reached it
//! read at the old scale's step (an all-time board at the default keeps it to 256 s; a finer
//! scale cannot know it better, a coarser one rounds it down to its own step).

use chrono::{DateTime, Utc};

use super::config::Board;
use super::period::Period;
use super::scores::scale;
use super::tiebreak::Scale;

/// A board's move from one `max_score` to another.
#[derive(Debug, Clone)]
pub struct Rescale {
    from: Board,
    to: Board,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RescaleError {
    #[error("a stored composite {0} is no score of max_score {1}")]
    Unreadable(String, i64),
    #[error(
        "score {score} of period {period} is above the new max_score {max_score}: a board's max_score can be lowered only to at least every score it holds"
    )]
    TooHigh { score: i64, period: String, max_score: i64 },
    #[error("the time {0} a score was reached is outside the new scale's range")]
    OutOfRange(DateTime<Utc>),
}

impl Rescale {
    /// `board` (configured with the new `max_score`) from its scores held at `from`; `None`
    /// when nothing changes or the board holds no scores whose scale can change.
    pub fn new(board: &Board, from: i64) -> Option<Self> {
        match super::scores::held_at(board, Some(from)) {
            std::borrow::Cow::Owned(old) => Some(Self { from: old, to: board.clone() }),
            std::borrow::Cow::Borrowed(_) => None,
        }
    }

    pub fn from_max(&self) -> i64 {
        self.from.scores.as_ref().map_or(0, |scores| scores.max_score)
    }

    pub fn to_max(&self) -> i64 {
        self.to.scores.as_ref().map_or(0, |scores| scores.max_score)
    }

    /// The scales of `period` before and after.
    pub fn scales(&self, period: &Period) -> (Scale, Scale) {
        (scale(&self.from, period), scale(&self.to, period))
    }

    /// The composite of `period` held as `composite` at the old scale, at the new one.
    pub fn composite(&self, period: &Period, composite: f64) -> Result<f64, RescaleError> {
        let (old, new) = self.scales(period);
        let (score, at) = old.decode(composite).map_err(|_| RescaleError::Unreadable(composite.to_string(), self.from_max()))?;
        if score > new.max_value {
            return Err(RescaleError::TooHigh {
                score,
                period: format!("{}:{}", period.kind.as_str(), period.id),
                max_score: new.max_value,
            });
        }
        new.encode(score, at).map_err(|_| RescaleError::OutOfRange(at))
    }

    /// A composite a journal line wrote, at the new scale, as a write at the new scale would
    /// have written it: the time reached is the line's own (one of `reached`, its clock and the
    /// time its client gave) where that falls within the old step the composite says, so a
    /// verify replaying the line at the new scale finds what the move wrote; and a score above
    /// the new `max_score` (a line whose entry no held score keeps: the move checked those
    /// first) is written at the new `max_score`, to be overwritten or expire as it did.
    pub fn written(&self, period: &Period, composite: f64, reached: &[DateTime<Utc>]) -> Result<f64, RescaleError> {
        let (old, new) = self.scales(period);
        let (score, at) = old.decode(composite).map_err(|_| RescaleError::Unreadable(composite.to_string(), self.from_max()))?;
        let within = |t: &DateTime<Utc>| *t >= at && t.timestamp() - at.timestamp() < old.step;
        let at = reached.iter().copied().find(within).unwrap_or(at);
        new.encode(score.min(new.max_value), at).map_err(|_| RescaleError::OutOfRange(at))
    }

    /// Whether `new`, at the new scale, holds what `old` held at the old one: the same score,
    /// reached within the old step the old composite says (`written` may know the second).
    pub fn agrees(&self, period: &Period, old: f64, new: f64) -> bool {
        let (before, after) = self.scales(period);
        match (before.decode(old), after.decode(new)) {
            (Ok((score, at)), Ok((score_now, at_now))) => {
                score == score_now
                    && (self.composite(period, old) == Ok(new) || (at_now >= at && (at_now - at).num_seconds() < before.step))
            }
            _ => false,
        }
    }

    /// `composite` as the text Redis and the scripts write it (a whole number).
    pub fn text(composite: f64) -> String {
        format!("{composite:.0}")
    }

    /// A recorded composite argument (`ZADD`'s score, an arrival's `<composite>|<n>`) through `map`.
    pub fn argument(&self, arg: &str, map: impl Fn(f64) -> Result<f64, RescaleError>) -> Result<String, RescaleError> {
        let unreadable = || RescaleError::Unreadable(arg.to_owned(), self.from_max());
        let (number, rest) = arg.split_once('|').map_or((arg, None), |(number, rest)| (number, Some(rest)));
        let composite: f64 = number.parse().map_err(|_| unreadable())?;
        let new = Self::text(map(composite)?);
        Ok(match rest {
            Some(rest) => format!("{new}|{rest}"),
            None => new,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::Config;
    use crate::domain::period::PeriodKind;
    use crate::domain::tiebreak::EPOCH_SECS;
    use proptest::prelude::*;

    fn board(max_score: Option<i64>, order: &str) -> Board {
        let max = max_score.map_or(String::new(), |max| format!("max_score = {max}\n"));
        let toml = format!(
            "[[boards]]\nname = \"b\"\nkind = \"scores\"\nkeep = \"best\"\norder = \"{order}\"\ntimezone = \"UTC\"\nperiods = [\"day\", \"all\"]\ntop = 10\n{max}"
        );
        Config::parse(&toml).unwrap().board("b").unwrap().clone()
    }

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).unwrap()
    }

    fn all() -> Period {
        Period::named(PeriodKind::All, "all", chrono_tz::UTC).unwrap()
    }

    #[test]
    fn nothing_to_do_at_the_same_max_score() {
        assert!(Rescale::new(&board(Some(1000), "desc"), 1000).is_none());
    }

    #[test]
    fn a_score_above_the_new_max_is_refused() {
        let old = scale(&board(None, "desc"), &all());
        let rescale = Rescale::new(&board(Some(1000), "desc"), old.max_value).unwrap();
        let composite = old.encode(1001, at(1_800_000_000)).unwrap();
        assert!(matches!(rescale.composite(&all(), composite), Err(RescaleError::TooHigh { score: 1001, .. })));
        assert!(rescale.composite(&all(), old.encode(1000, at(1_800_000_000)).unwrap()).is_ok());
    }

    #[test]
    fn an_arrival_keeps_its_count() {
        let old = scale(&board(None, "desc"), &all());
        let rescale = Rescale::new(&board(Some(4_194_303), "desc"), old.max_value).unwrap();
        let composite = old.encode(7, at(1_700_000_000)).unwrap();
        let moved = rescale.argument(&format!("{composite:.0}|3"), |c| rescale.composite(&all(), c)).unwrap();
        let (number, n) = moved.split_once('|').unwrap();
        assert_eq!(n, "3");
        let new = scale(&board(Some(4_194_303), "desc"), &all());
        assert_eq!(new.decode(number.parse().unwrap()).unwrap().0, 7);
    }

    #[test]
    fn a_line_knows_the_second_its_composite_does_not() {
        let old = scale(&board(None, "desc"), &all());
        let rescale = Rescale::new(&board(Some(4_194_303), "desc"), old.max_value).unwrap();
        let new = scale(&board(Some(4_194_303), "desc"), &all());
        // 100 s into a 256-second step: the composite says the step's start, the line the second.
        let step_start = EPOCH_SECS + 256 * 7_000;
        let held = old.encode(40, at(step_start + 100)).unwrap();
        let written = rescale.written(&all(), held, &[at(step_start + 100)]).unwrap();
        assert_eq!(new.decode(written).unwrap(), (40, at(step_start + 100)));
        assert!(rescale.agrees(&all(), held, written));
        // A time outside the step (a sum kept an earlier one): the step's start.
        let kept = rescale.written(&all(), held, &[at(step_start + 300)]).unwrap();
        assert_eq!(new.decode(kept).unwrap(), (40, at(step_start)));
        assert!(rescale.agrees(&all(), held, kept));
        assert!(!rescale.agrees(&all(), held, new.encode(40, at(step_start + 300)).unwrap()));
        assert!(!rescale.agrees(&all(), held, new.encode(41, at(step_start)).unwrap()));
        // Above the new max (a lower max_score): written at it.
        let lower = Rescale::new(&board(Some(1000), "desc"), old.max_value).unwrap();
        let top = scale(&board(Some(1000), "desc"), &all());
        assert_eq!(top.decode(lower.written(&all(), old.encode(5000, at(step_start)).unwrap(), &[]).unwrap()).unwrap().0, 1000);
    }

    proptest! {
        // The model: what a reader sees of two entries (their scores, and which ranks higher
        // or whether they tie) is what it saw before, except that times the new scale cannot
        // tell apart now tie; nothing ever swaps places.
        #[test]
        fn scores_are_kept_and_no_two_entries_swap(
            a in 0i64..=4_194_303, b in 0i64..=4_194_303,
            ta in 1_577_836_800i64..2_600_000_000, tb in 1_577_836_800i64..2_600_000_000,
            ascending in any::<bool>(), day in any::<bool>(), to_default in any::<bool>(),
        ) {
            let order = if ascending { "asc" } else { "desc" };
            let period = if day { Period::containing(PeriodKind::Day, at(1_800_000_000), chrono_tz::UTC) } else { all() };
            // A day board's scores are reached within the day.
            let (ta, tb) = if day { (1_800_000_000 - 1_800_000_000 % 86_400 + ta % 86_400, 1_800_000_000 - 1_800_000_000 % 86_400 + tb % 86_400) } else { (ta, tb) };
            let (from, to) = if to_default { (board(Some(4_194_303), order), board(None, order)) } else { (board(None, order), board(Some(4_194_303), order)) };
            let old = scale(&from, &period);
            let rescale = Rescale::new(&to, old.max_value).unwrap();
            let new = scale(&to, &period);
            let (ca, cb) = (old.encode(a, at(ta)).unwrap(), old.encode(b, at(tb)).unwrap());
            let (na, nb) = (rescale.composite(&period, ca).unwrap(), rescale.composite(&period, cb).unwrap());
            prop_assert_eq!(new.score_of(na), a);
            prop_assert_eq!(new.score_of(nb), b);
            // Higher composite first: a pair in order stays in order or ties, never swaps.
            if ca > cb { prop_assert!(na >= nb); }
            if ca == cb { prop_assert_eq!(na, nb); }
            // The time reached is kept to the coarser of the two steps.
            let step = old.step.max(new.step);
            let (_, when) = new.decode(na).unwrap();
            prop_assert!((when.timestamp() - ta).abs() < step);
        }
    }
}
