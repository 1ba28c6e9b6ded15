//! Rule dry-runs (docs/journal.md#rule-dry-runs): the board's journal replayed under candidate
//! rules into shadow keys, one period compared with the live board (read at the scale its
//! scores are held at), and what would change reported. Nothing live is written.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Checker, LISTED};
use crate::archive::objects::Objects;
use crate::domain::config::Config;
use crate::domain::period::Period;
use crate::domain::scores::scale;
use crate::services::journal::error::RestoreError;

/// `{"dry_run": {"board", "period", "period_id", "config"}}`: `config` is the TOML of the
/// candidate board (a `[[boards]]` table, or its body).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DryRunRequest {
    pub board: String,
    pub period: String,
    pub period_id: String,
    pub config: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Standing {
    pub rank: usize,
    pub user_id: String,
    pub score: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mover {
    pub user_id: String,
    pub rank_before: Option<usize>,
    pub rank_after: Option<usize>,
    pub score_before: Option<i64>,
    pub score_after: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub members: usize,
    pub points: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DryRunReport {
    pub board: String,
    pub period: &'static str,
    pub period_id: String,
    pub replayed: usize,
    /// Lines the candidate rules refuse (an action they no longer score, …).
    pub refused: usize,
    pub top_before: Vec<Standing>,
    pub top_after: Vec<Standing>,
    /// Members whose rank moves most (entering or leaving the board first).
    pub movers: Vec<Mover>,
    pub before: Totals,
    pub after: Totals,
}

impl<O: Objects> Checker<O> {
    /// Replays `request.board`'s journal under the candidate rules and compares one period.
    pub async fn dry_run(&self, request: &DryRunRequest, deadline: DateTime<Utc>) -> Result<DryRunReport, RestoreError> {
        let live = self.config.board(&request.board).ok_or_else(|| RestoreError::UnknownBoard(request.board.clone()))?;
        let mut conn = self.store.connection().await?;
        let live = &*crate::services::journal::rescale::held_board(&mut conn, &self.keys, live, (self.clock)()).await?;
        let candidate = candidate_config(&request.config, &request.board)?;
        let board = candidate.board(&request.board).expect("candidate_config checks the board is there");
        let invalid = |message: String| RestoreError::Invalid(message);
        // The shadow is compared shard by shard with the live board: one layout for both.
        if board.shards != live.shards {
            return Err(invalid(format!(
                "the candidate board has shards = {} where the live one has {}: a dry-run compares rules on the same layout (docs/scaling.md#changing-shards moves a board)",
                board.shards, live.shards
            )));
        }
        let kind = live
            .period_kind(&request.period)
            .filter(|kind| board.periods.contains(kind))
            .ok_or_else(|| invalid(format!("period {:?} is not a period of both the live and the candidate board", request.period)))?;
        let period = Period::named(kind, &request.period_id, live.timezone).map_err(|e| invalid(format!("period_id: {e}")))?;
        let journals = self.journals(&live.name).await?;
        let (replayer, shadow) = self.shadow_replayer(&Arc::new(candidate.clone()), &journals)?;
        let mut check = (0, 0);
        for journal in journals {
            self.replay(&replayer, &live.name, &journal, deadline, &mut check, &mut None).await?;
        }
        let (before, after) = self.compare(&shadow, &request.board, &period).await?;
        self.discard(&shadow, &request.board, std::slice::from_ref(&period)).await?;
        let before = ranked(&before, |c| scale(live, &period).score_of(c));
        let after = ranked(&after, |c| scale(board, &period).score_of(c));
        let top = usize::try_from(live.top).unwrap_or(usize::MAX);
        Ok(DryRunReport {
            board: request.board.clone(),
            period: period.kind.as_str(),
            period_id: period.id.clone(),
            replayed: check.0,
            refused: check.1,
            top_before: before.iter().take(top).cloned().collect(),
            top_after: after.iter().take(top).cloned().collect(),
            movers: movers(&before, &after),
            before: totals(&before),
            after: totals(&after),
        })
    }
}

/// The candidate configuration: `text` as a whole configuration, or one board's table.
fn candidate_config(text: &str, board: &str) -> Result<Config, RestoreError> {
    let config = Config::parse(text)
        .or_else(|_| Config::parse(&format!("[[boards]]\n{text}")))
        .map_err(|e| RestoreError::Invalid(format!("config: {e}")))?;
    if config.board(board).is_none() {
        return Err(RestoreError::Invalid(format!("config: no board named {board:?}")));
    }
    Ok(config)
}

fn ranked(members: &[(String, f64)], score: impl Fn(f64) -> i64) -> Vec<Standing> {
    members
        .iter()
        .enumerate()
        .map(|(i, (user, composite))| Standing { rank: i + 1, user_id: user.clone(), score: score(*composite) })
        .collect()
}

fn totals(standings: &[Standing]) -> Totals {
    Totals { members: standings.len(), points: standings.iter().map(|s| s.score).sum() }
}

/// Members whose rank changes, entering or leaving the board first, then by how far they move.
fn movers(before: &[Standing], after: &[Standing]) -> Vec<Mover> {
    let after_of: HashMap<&str, &Standing> = after.iter().map(|s| (s.user_id.as_str(), s)).collect();
    let before_of: HashMap<&str, &Standing> = before.iter().map(|s| (s.user_id.as_str(), s)).collect();
    let mover = |user: &str| {
        let (b, a) = (before_of.get(user), after_of.get(user));
        Mover {
            user_id: user.to_owned(),
            rank_before: b.map(|s| s.rank),
            rank_after: a.map(|s| s.rank),
            score_before: b.map(|s| s.score),
            score_after: a.map(|s| s.score),
        }
    };
    let mut moved: Vec<Mover> = before
        .iter()
        .map(|s| s.user_id.as_str())
        .chain(after.iter().map(|s| s.user_id.as_str()).filter(|u| !before_of.contains_key(u)))
        .map(mover)
        .filter(|m| m.rank_before != m.rank_after)
        .collect();
    let distance = |m: &Mover| match (m.rank_before, m.rank_after) {
        (Some(b), Some(a)) => b.abs_diff(a),
        _ => usize::MAX,
    };
    moved.sort_by_key(|m| std::cmp::Reverse(distance(m)));
    moved.truncate(LISTED);
    moved
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standing(rank: usize, user: &str, score: i64) -> Standing {
        Standing { rank, user_id: user.into(), score }
    }

    #[test]
    fn movers_put_arrivals_and_departures_first_then_the_longest_moves() {
        let before = [standing(1, "a", 9), standing(2, "b", 8), standing(3, "c", 7), standing(4, "d", 6)];
        let after = [standing(1, "c", 9), standing(2, "b", 8), standing(3, "a", 7), standing(4, "e", 1)];
        let moved = movers(&before, &after);
        let moved: Vec<(&str, Option<usize>, Option<usize>)> =
            moved.iter().map(|m| (m.user_id.as_str(), m.rank_before, m.rank_after)).collect();
        assert_eq!(moved.len(), 4, "b did not move: {moved:?}");
        assert!(moved[..2].iter().all(|m| m.1.is_none() || m.2.is_none()), "{moved:?}");
        assert_eq!(&moved[2..], &[("a", Some(1), Some(3)), ("c", Some(3), Some(1))]);
    }

    #[test]
    fn a_candidate_is_a_whole_configuration_or_one_board() {
        let board = "name = \"arena\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nrules = [{ action = \"win\", points = 3, scope = \"none\" }]";
        assert!(candidate_config(board, "arena").is_ok());
        assert!(candidate_config(&format!("[[boards]]\n{board}"), "arena").is_ok());
        assert_eq!(candidate_config(board, "other").unwrap_err().code(), "bad_request");
        assert_eq!(candidate_config("not toml [", "arena").unwrap_err().code(), "bad_request");
    }
}
