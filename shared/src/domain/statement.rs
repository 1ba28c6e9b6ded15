//! A user's score in one period, explained: one line per action, correction, sign-in total
//! and streak bonus total, built from the statement counters the write scripts keep on boards
//! with `statements = true` (field names in `apply_event.lua`'s header). Pure.
//!
//! The lines sum exactly to the score, or an `unexplained` remainder says how much they do
//! not cover and why; the sum of the lines and the remainder is always the score.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::domain::config::Board;
use crate::domain::config::Keep;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Line {
    /// Events of one action: `points` = `earned` − `taken_back`.
    Action {
        action: String,
        events: i64,
        points: i64,
        earned: i64,
        withheld: i64,
        taken_back: i64,
    },
    Correction {
        correction_id: String,
        reason: String,
        points: i64,
    },
    /// An admin's void of points the user's events earned (negative).
    Void {
        void_id: String,
        reason: String,
        points: i64,
    },
    SignIns {
        days: i64,
        points: i64,
    },
    StreakBonuses {
        points: i64,
    },
    /// A score board's kept score (`best`, `latest`): the submission it is.
    KeptScore {
        points: i64,
    },
    /// A `sum` score board: the submissions added up.
    Submissions {
        submissions: i64,
        points: i64,
    },
}

impl Line {
    pub fn points(&self) -> i64 {
        match self {
            Line::Action { points, .. }
            | Line::Correction { points, .. }
            | Line::Void { points, .. }
            | Line::SignIns { points, .. }
            | Line::StreakBonuses { points }
            | Line::KeptScore { points }
            | Line::Submissions { points, .. } => *points,
        }
    }
}

/// Why part of a score has no line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unexplained {
    /// The board keeps no statements (`statements = true` turns them on).
    NotKept,
    /// Points the statement did not record: earned before the board kept statements, or
    /// changed without a line (a restored backup or a failover may lose one side; a ban
    /// removes the statement with the score). Negative when the lines hold more than the score.
    NotRecorded,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Remainder {
    pub points: i64,
    pub reason: Unexplained,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Statement {
    /// `None`: the user is not on a score board (no score, which on an ascending board must
    /// not read as the best one); a rule board's absent member has 0 points.
    pub score: Option<i64>,
    pub lines: Vec<Line>,
    /// `None` when the lines sum exactly to the score.
    pub unexplained: Option<Remainder>,
}

/// The statement of `score` (`None`: the member is not on the board) from the counters of one
/// period's statement hash (`fields`, as stored; empty when there is none).
pub fn explain(board: &Board, held: Option<i64>, fields: &BTreeMap<String, String>) -> Statement {
    let score = held.unwrap_or(0);
    let lines = match board.scores.map(|rules| rules.keep) {
        Some(Keep::Sum) => {
            let submissions = number(fields, "n:score");
            let mut lines =
                if submissions > 0 { vec![Line::Submissions { submissions, points: number(fields, "p:score") }] } else { Vec::new() };
            lines.extend(correction_lines(fields));
            lines
        }
        // The kept score is one submission: it explains itself, nothing to keep.
        Some(_) if score > 0 || fields.contains_key("n:score") => vec![Line::KeptScore { points: score }],
        Some(_) => Vec::new(),
        None => rule_lines(fields),
    };
    let covered: i64 = lines.iter().map(Line::points).sum();
    let reason = if board.statements || board.scores.is_some_and(|rules| rules.keep != Keep::Sum) {
        Unexplained::NotRecorded
    } else {
        Unexplained::NotKept
    };
    let unexplained = (covered != score).then_some(Remainder { points: score - covered, reason });
    Statement { score: if board.scores.is_some() { held } else { Some(score) }, lines, unexplained }
}

fn number(fields: &BTreeMap<String, String>, name: &str) -> i64 {
    fields.get(name).and_then(|value| value.parse().ok()).unwrap_or(0)
}

/// One line per admin correction (`c:<correction id>` → `<points>|<reason>`), in id order, then
/// one per void (`v:<void id>`, the same).
fn correction_lines(fields: &BTreeMap<String, String>) -> impl Iterator<Item = Line> + '_ {
    let admin = |prefix: &'static str| {
        fields.iter().filter_map(move |(field, value)| {
            let id = field.strip_prefix(prefix)?.to_owned();
            let (points, reason) = value.split_once('|').unwrap_or((value, ""));
            Some((id, reason.to_owned(), points.parse().unwrap_or(0)))
        })
    };
    let corrections = admin("c:").map(|(correction_id, reason, points)| Line::Correction { correction_id, reason, points });
    corrections.chain(admin("v:").map(|(void_id, reason, points)| Line::Void { void_id, reason, points }))
}

/// Lines of a rule board: one per action (in name order), each correction, sign-ins, bonuses.
fn rule_lines(fields: &BTreeMap<String, String>) -> Vec<Line> {
    let mut actions: BTreeMap<&str, [i64; 4]> = BTreeMap::new();
    for (field, value) in fields {
        let Some((tag, name)) = field.split_once(':') else { continue };
        let slot = match tag {
            "n" => 0,
            "p" => 1,
            "w" => 2,
            "t" => 3,
            _ => continue,
        };
        actions.entry(name).or_default()[slot] += value.parse::<i64>().unwrap_or(0);
    }
    let mut lines: Vec<Line> = actions
        .into_iter()
        .map(|(action, [events, earned, withheld, taken_back])| Line::Action {
            action: action.to_owned(),
            events,
            points: earned - taken_back,
            earned,
            withheld,
            taken_back,
        })
        .collect();
    lines.extend(correction_lines(fields));
    let days = number(fields, "s:n");
    if days > 0 {
        lines.push(Line::SignIns { days, points: number(fields, "s:p") });
    }
    let bonuses = number(fields, "s:b");
    if bonuses > 0 {
        lines.push(Line::StreakBonuses { points: bonuses });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::Config;

    fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn board(text: &str) -> Config {
        Config::parse(&format!("[[boards]]\nname = \"b\"\ntimezone = \"UTC\"\nperiods = [\"day\"]\ntop = 10\n{text}")).unwrap()
    }

    #[test]
    fn a_rule_board_itemises_actions_corrections_and_sign_ins() {
        let config = board("kind = \"cumulative\"\nstatements = true\nrules = [{ action = \"qa\", points = 5, scope = \"none\" }]");
        let stored = fields(&[
            ("n:qa", "3"),
            ("p:qa", "15"),
            ("w:qa", "5"),
            ("t:qa", "5"),
            ("c:fix-1", "-2|spam"),
            ("v:cheat-1", "-3|bot ring"),
            ("s:n", "2"),
            ("s:p", "2"),
            ("s:b", "10"),
        ]);
        let statement = explain(config.board("b").unwrap(), Some(17), &stored);
        assert_eq!(
            statement.lines,
            [
                Line::Action { action: "qa".into(), events: 3, points: 10, earned: 15, withheld: 5, taken_back: 5 },
                Line::Correction { correction_id: "fix-1".into(), reason: "spam".into(), points: -2 },
                Line::Void { void_id: "cheat-1".into(), reason: "bot ring".into(), points: -3 },
                Line::SignIns { days: 2, points: 2 },
                Line::StreakBonuses { points: 10 },
            ]
        );
        assert_eq!(statement.unexplained, None);
        let short = explain(config.board("b").unwrap(), Some(22), &stored);
        assert_eq!(short.unexplained, Some(Remainder { points: 5, reason: Unexplained::NotRecorded }));
    }

    #[test]
    fn without_statements_the_whole_score_is_unexplained_and_says_why() {
        let config = board("kind = \"cumulative\"\nrules = [{ action = \"qa\", points = 5, scope = \"none\" }]");
        let statement = explain(config.board("b").unwrap(), Some(40), &BTreeMap::new());
        assert_eq!(statement.lines, []);
        assert_eq!(statement.unexplained, Some(Remainder { points: 40, reason: Unexplained::NotKept }));
    }

    #[test]
    fn a_score_board_explains_its_kept_score_or_its_sum() {
        let best = board("kind = \"scores\"\nkeep = \"best\"");
        assert_eq!(explain(best.board("b").unwrap(), Some(70), &BTreeMap::new()).lines, [Line::KeptScore { points: 70 }]);
        let sum = board("kind = \"scores\"\nkeep = \"sum\"\nstatements = true");
        let statement = explain(sum.board("b").unwrap(), Some(12), &fields(&[("n:score", "3"), ("p:score", "12")]));
        assert_eq!((statement.lines, statement.unexplained), (vec![Line::Submissions { submissions: 3, points: 12 }], None));
    }
}
