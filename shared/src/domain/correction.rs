//! What an admin's correction does to a board: the one rule deciding which changes a board
//! takes. Points boards take a `delta`; score boards take `remove` (the entry leaves), `set`
//! (the kept score becomes this), or a `delta` on `sum` boards, whose score is a total.

use crate::domain::config::{Board, Keep};
use crate::domain::tiebreak::{MAX_POINTS, Scale};

/// A correction's change to one user's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Adds this many points (or score units, on a `sum` board).
    Add(i64),
    /// The kept score becomes this.
    Set(i64),
    /// The entry leaves the board.
    Remove,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangeError {
    #[error("give exactly one of delta, set and remove (remove: true)")]
    NotOne,
    #[error("a points board is corrected with delta; set and remove are for score boards")]
    PointsBoard,
    #[error("delta corrects only sum score boards; this board keeps the {0} score: use set or remove")]
    NotASum(&'static str),
    #[error("delta must be a non-zero integer within ±{0}")]
    DeltaOutOfRange(i64),
    #[error("set must be a score within 0..={0}")]
    SetOutOfRange(i64),
}

impl Change {
    /// The change a request asks of `board`, if the board takes it.
    pub fn of(board: &Board, delta: Option<i64>, set: Option<i64>, remove: Option<bool>) -> Result<Self, ChangeError> {
        let remove = remove.unwrap_or(false);
        let asked = usize::from(delta.is_some()) + usize::from(set.is_some()) + usize::from(remove);
        if asked != 1 {
            return Err(ChangeError::NotOne);
        }
        let Some(rules) = board.scores else {
            return match delta {
                Some(delta) if delta != 0 && (-MAX_POINTS..=MAX_POINTS).contains(&delta) => Ok(Change::Add(delta)),
                Some(_) => Err(ChangeError::DeltaOutOfRange(MAX_POINTS)),
                None => Err(ChangeError::PointsBoard),
            };
        };
        let max = rules.max_score;
        match (delta, set) {
            (Some(_), _) if rules.keep != Keep::Sum => Err(ChangeError::NotASum(rules.keep.as_str())),
            (Some(delta), _) if delta != 0 && (-max..=max).contains(&delta) => Ok(Change::Add(delta)),
            (Some(_), _) => Err(ChangeError::DeltaOutOfRange(max)),
            (None, Some(score)) if (0..=max).contains(&score) => Ok(Change::Set(score)),
            (None, Some(_)) => Err(ChangeError::SetOutOfRange(max)),
            (None, None) => Ok(Change::Remove),
        }
    }

    /// What the correction script takes: its mode and operand in stored values (higher is
    /// better: an `asc` board's value is `max - score`, so adding to its sum lowers it).
    pub fn script_operand(self, scale: &Scale) -> (&'static str, i64) {
        match self {
            Change::Add(delta) => ("add", scale.value(delta) - scale.value(0)),
            Change::Set(score) => ("set", scale.value(score)),
            Change::Remove => ("remove", 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::Config;
    use crate::domain::tiebreak::MAX_SCORE;

    fn board(keep: &str, order: &str) -> Config {
        Config::parse(&format!(
            "[[boards]]\nname = \"g\"\nkind = \"scores\"\nkeep = \"{keep}\"\norder = \"{order}\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\n"
        ))
        .unwrap()
    }

    #[test]
    fn each_board_takes_its_own_changes() {
        let config = Config::default_boards();
        let points = config.board("activity").unwrap();
        assert_eq!(Change::of(points, Some(-3), None, None), Ok(Change::Add(-3)));
        assert_eq!(Change::of(points, None, Some(3), None), Err(ChangeError::PointsBoard));
        assert_eq!(Change::of(points, None, None, Some(true)), Err(ChangeError::PointsBoard));
        assert_eq!(Change::of(points, Some(0), None, None), Err(ChangeError::DeltaOutOfRange(MAX_POINTS)));

        let best = board("best", "desc");
        let best = best.board("g").unwrap();
        assert_eq!(Change::of(best, None, None, Some(true)), Ok(Change::Remove));
        assert_eq!(Change::of(best, None, Some(0), None), Ok(Change::Set(0)));
        assert_eq!(Change::of(best, None, Some(MAX_SCORE + 1), None), Err(ChangeError::SetOutOfRange(MAX_SCORE)));
        assert_eq!(Change::of(best, Some(5), None, None), Err(ChangeError::NotASum("best")));
        assert_eq!(Change::of(best, None, None, Some(false)), Err(ChangeError::NotOne));
        assert_eq!(Change::of(best, Some(1), Some(1), None), Err(ChangeError::NotOne));

        let sum = board("sum", "asc");
        let sum = sum.board("g").unwrap();
        assert_eq!(Change::of(sum, Some(-5), None, None), Ok(Change::Add(-5)));
    }

    #[test]
    fn operands_are_in_values_where_higher_is_better() {
        let asc = Scale { span: 1 << 23, max_value: MAX_SCORE, ascending: true, origin: 0, step: 1 };
        let desc = Scale { ascending: false, ..asc };
        assert_eq!(Change::Add(5).script_operand(&asc), ("add", -5), "a larger sum is worse when lower is better");
        assert_eq!(Change::Add(5).script_operand(&desc), ("add", 5));
        assert_eq!(Change::Set(7).script_operand(&asc), ("set", MAX_SCORE - 7));
        assert_eq!(Change::Remove.script_operand(&desc), ("remove", 0));
    }
}
