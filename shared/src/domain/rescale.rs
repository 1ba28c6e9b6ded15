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
        "score {score} of period {period} is above the new max_score {max_score}: lower max_score only to at least the highest score held"
    )]
    TooHigh { score: i64, period: String, max_score: i64 },
    #[error("the time {0} a score was reached is outside the new scale's range")]
    OutOfRange(DateTime<Utc>),
}

impl Rescale {
    /// `board` (configured with the new `max_score`) from its scores held at `from`; `None`
    /// when nothing changes or the board holds no scores whose scale can change.
    pub fn new(board: &Board, from: i64) -> Option<Self> {
        let scores = board.scores.as_ref().filter(|_| board.tournament.is_none())?;
        if scores.max_score == from {
            return None;
        }
        let mut old = board.clone();
        old.scores.as_mut().expect("a score board").max_score = from;
        Some(Self { from: old, to: board.clone() })
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

    /// `composite` as the text Redis and the scripts write it (a whole number).
    pub fn text(composite: f64) -> String {
        format!("{composite:.0}")
    }

    /// A recorded composite argument (`ZADD`'s score, an arrival's `<composite>|<n>`) at the new scale.
    pub fn argument(&self, period: &Period, arg: &str) -> Result<String, RescaleError> {
        let unreadable = || RescaleError::Unreadable(arg.to_owned(), self.from_max());
        let (number, rest) = arg.split_once('|').map_or((arg, None), |(number, rest)| (number, Some(rest)));
        let composite: f64 = number.parse().map_err(|_| unreadable())?;
        let new = Self::text(self.composite(period, composite)?);
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
        let moved = rescale.argument(&all(), &format!("{composite:.0}|3")).unwrap();
        let (number, n) = moved.split_once('|').unwrap();
        assert_eq!(n, "3");
        let new = scale(&board(Some(4_194_303), "desc"), &all());
        assert_eq!(new.decode(number.parse().unwrap()).unwrap().0, 7);
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
