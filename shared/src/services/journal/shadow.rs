//! Verify and rule dry-runs (docs/journal.md): a board's whole journal — its objects in S3, then
//! what is not drained yet — replayed into shadow keys no reader sees (`Keys::shadow`, in the
//! board's slot, every key expiring within minutes), compared with the live board, and thrown
//! away. Verify replays under the live rules and lists where Redis differs from its journal; a
//! dry-run replays under candidate rules and reports what they would change. Nothing live is
//! written.

use std::collections::HashMap;
use std::sync::Arc;

use crate::Clock;
use crate::domain::config::{Board, Config};
use crate::domain::journal::Line;
use crate::domain::period::Period;
use crate::domain::reach::current_periods;
use crate::domain::scores::scale;
use crate::redis::journal;
use crate::redis::keys::{Keys, journal_generation};
use crate::redis::sharded;
use crate::redis::store::Store;
use crate::runtime::metrics::{Metrics, Unit};
use crate::services::replay::{Replayed, Replayer};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::RestoreError;
use crate::archive::objects::{Objects, journal_objects, read_lines};

/// Members differing between Redis and its journal, after a verify (dimension `Board`).
pub const MISMATCH_METRIC: &str = "JournalMismatch";
/// Differences and movers listed in an answer (the counts cover them all).
const LISTED: usize = 50;
/// Undrained entries read per step.
const STREAM_PAGE: usize = 1000;

/// One member whose standing differs: scores as the API shows them (`None`: not on the board).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    pub user_id: String,
    pub live: Option<i64>,
    pub replayed: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeriodCheck {
    pub period: &'static str,
    pub period_id: String,
    pub members: usize,
    /// Members whose composite (score, or the time they reached it) differs.
    pub mismatches: usize,
    pub differences: Vec<Difference>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BoardCheck {
    pub board: String,
    pub replayed: usize,
    pub refused: usize,
    pub periods: Vec<PeriodCheck>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    pub mismatches: usize,
    pub boards: Vec<BoardCheck>,
}

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

pub struct Checker<O> {
    config: Arc<Config>,
    keys: Keys,
    store: Store,
    objects: O,
    metrics: Metrics,
    clock: Clock,
}

impl<O: Objects> Checker<O> {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, objects: O, metrics: Metrics, clock: Clock) -> Self {
        Self { config, keys, store, objects, metrics, clock }
    }

    /// Replays each board's journal (every board when `None`) and compares its open periods.
    pub async fn verify(&self, board: Option<&str>, deadline: DateTime<Utc>) -> Result<VerifyReport, RestoreError> {
        let boards: Vec<&Board> = match board {
            Some(name) => vec![self.config.board(name).ok_or_else(|| RestoreError::UnknownBoard(name.to_owned()))?],
            None => self.config.boards().iter().map(|b| &**b).collect(),
        };
        let mut report = VerifyReport { mismatches: 0, boards: Vec::new() };
        for board in boards {
            let periods = current_periods(board, (self.clock)());
            let journals = self.journals(&board.name).await?;
            let mut conn = self.store.connection().await?;
            let (config, board) = &super::rescale::held_config(&mut conn, &self.keys, &self.config, board, (self.clock)()).await?;
            let (replayer, shadow) = self.shadow_replayer(config, &journals)?;
            let mut counts = (0, 0);
            let mut compared: Vec<(usize, Vec<Difference>)> = vec![(0, Vec::new()); periods.len()];
            // Each shard's journal on its own (one shard of one slot: the board's).
            for journal in journals {
                let mut last = None;
                self.replay(&replayer, &board.name, &journal, deadline, &mut counts, &mut last).await?;
                // A consistent cut: the live members and the journal's newest entry read at one
                // instant, then the journal replayed up to exactly that entry. Writes going on
                // meanwhile are on neither side: only real differences remain.
                let mut conn = self.store.connection().await?;
                let (live, cut) = journal::members_at_cut(&mut conn, &self.keys.board(&journal), &periods).await?;
                if let Some(cut) = &cut {
                    self.replay_stream(&replayer, &board.name, &journal, deadline, &mut counts, &mut last, cut).await?;
                }
                for ((period, live), (members, found)) in periods.iter().zip(live).zip(compared.iter_mut()) {
                    let replayed = journal::members(&mut conn, &shadow.board(&journal), period).await?;
                    let score = |composite: f64| scale(board, period).score_of(composite);
                    *members += live.len();
                    found.extend(differences(&live, &replayed, score));
                }
            }
            let checks = periods
                .iter()
                .zip(compared)
                .map(|(period, (members, differences))| PeriodCheck {
                    period: period.kind.as_str(),
                    period_id: period.id.clone(),
                    members,
                    mismatches: differences.len(),
                    differences: differences.into_iter().take(LISTED).collect(),
                })
                .collect();
            let checked = BoardCheck { board: board.name.clone(), replayed: counts.0, refused: counts.1, periods: checks };
            self.discard(&shadow, &board.name, &periods).await?;
            let mismatches: usize = checked.periods.iter().map(|p| p.mismatches).sum();
            self.metrics.put(MISMATCH_METRIC, Unit::Count, mismatches as f64, &[("Board", board.name.as_str())]);
            report.mismatches += mismatches;
            report.boards.push(checked);
        }
        // Once more without `Board`: what the alarm watches.
        self.metrics.put(MISMATCH_METRIC, Unit::Count, report.mismatches as f64, &[]);
        Ok(report)
    }

    /// Replays `request.board`'s journal under the candidate rules and compares one period.
    pub async fn dry_run(&self, request: &DryRunRequest, deadline: DateTime<Utc>) -> Result<DryRunReport, RestoreError> {
        let live = self.config.board(&request.board).ok_or_else(|| RestoreError::UnknownBoard(request.board.clone()))?;
        let mut conn = self.store.connection().await?;
        let live = &*super::rescale::held_board(&mut conn, &self.keys, live, (self.clock)()).await?;
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

    /// A replayer under `config` into fresh shadow keys, writing the layout `journals` are of
    /// (one a shard, of one generation: where the board's data is, whatever its configuration
    /// says while a move is due), and the keys.
    fn shadow_replayer(&self, config: &Arc<Config>, journals: &[String]) -> Result<(Replayer, Keys), RestoreError> {
        let run = u64::try_from(Utc::now().timestamp_micros()).unwrap_or_default();
        let generation = journals.first().map_or(0, |name| journal_generation(name));
        let shards = u32::try_from(journals.len().max(1)).unwrap_or(1);
        let shadow = self.keys.shadow(run).map_err(|e| RestoreError::Invalid(e.to_string()))?.replaying_layout(shards, generation);
        Ok((Replayer::new(config.clone(), shadow.clone(), self.store.clone()), shadow))
    }

    /// The board's journal replayed with `replayer`, counting (lines replayed, lines refused)
    /// into `counts`; `last` ends as the last line's stream id.
    async fn replay(
        &self,
        replayer: &Replayer,
        board: &str,
        journal: &str,
        deadline: DateTime<Utc>,
        counts: &mut (usize, usize),
        last: &mut Option<String>,
    ) -> Result<(), RestoreError> {
        // The stream's end as the replay starts: writes going on meanwhile are not chased.
        let mut conn = self.store.connection().await?;
        let until = journal::newest_id(&mut conn, &self.keys.board(journal)).await?;
        for name in journal_objects(&self.objects, self.keys.prefix(), journal).await? {
            for line in read_lines(&self.objects, &name).await? {
                replay_counted(replayer, board, &line, deadline, counts).await?;
                *last = Some(line.id);
            }
        }
        match until {
            Some(until) => self.replay_stream(replayer, board, journal, deadline, counts, last, &until).await,
            None => Ok(()),
        }
    }

    /// What the drain has not stored yet, after `last` and up to `until` (included).
    #[allow(clippy::too_many_arguments)]
    async fn replay_stream(
        &self,
        replayer: &Replayer,
        board: &str,
        journal: &str,
        deadline: DateTime<Utc>,
        counts: &mut (usize, usize),
        last: &mut Option<String>,
        until: &str,
    ) -> Result<(), RestoreError> {
        let mut conn = self.store.connection().await?;
        let live = self.keys.board(journal);
        loop {
            let page = journal::after_until(&mut conn, &live, journal, last.as_deref(), until, STREAM_PAGE).await?;
            let Some(end) = page.last().map(|line| line.id.clone()) else { break };
            for line in &page {
                replay_counted(replayer, board, line, deadline, counts).await?;
            }
            *last = Some(end);
        }
        Ok(())
    }

    /// The live and the shadow members of `period`, best first (every shard's, merged).
    async fn compare(&self, shadow: &Keys, board: &str, period: &Period) -> Result<(Vec<(String, f64)>, Vec<(String, f64)>), RestoreError> {
        let mut conn = self.store.connection().await?;
        let (mut live, mut replayed) = (Vec::new(), Vec::new());
        for journal in self.journals(board).await? {
            live.extend(journal::members(&mut conn, &self.keys.board(&journal), period).await?);
            replayed.extend(journal::members(&mut conn, &shadow.board(&journal), period).await?);
        }
        sharded::sort(&mut live);
        sharded::sort(&mut replayed);
        Ok((live, replayed))
    }

    /// The journals of `board`: one per shard, of the generation it is in.
    async fn journals(&self, board: &str) -> Result<Vec<String>, RestoreError> {
        let Some(board) = self.config.board(board) else { return Ok(vec![board.to_owned()]) };
        let mut conn = self.store.connection().await?;
        Ok(super::generations::configured(&mut conn, &self.objects, &self.keys, board).await?.journals())
    }

    /// Deletes the shadow's keys that carry no TTL or were read; the rest expire on their own.
    async fn discard(&self, shadow: &Keys, board: &str, periods: &[Period]) -> Result<(), RestoreError> {
        let mut conn = self.store.write_connection().await?;
        for journal in self.journals(board).await? {
            let keys = shadow.board(&journal);
            let mut names = vec![keys.guard(), keys.audit()];
            names.extend(periods.iter().map(|period| keys.period(period)));
            journal::delete(&mut conn, &names).await?;
        }
        Ok(())
    }
}

/// Replays `line` before `deadline`, counting (lines replayed, lines refused).
async fn replay_counted(
    replayer: &Replayer,
    board: &str,
    line: &Line,
    deadline: DateTime<Utc>,
    counts: &mut (usize, usize),
) -> Result<(), RestoreError> {
    if Utc::now() >= deadline {
        return Err(RestoreError::Unfinished(board.to_owned()));
    }
    let refused = matches!(replayer.replay(board, line).await?, Replayed::Refused(_));
    counts.0 += 1;
    counts.1 += usize::from(refused);
    Ok(())
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

/// Members whose composite differs, in the live board's order, then those only replayed.
fn differences(live: &[(String, f64)], replayed: &[(String, f64)], score: impl Fn(f64) -> i64) -> Vec<Difference> {
    let theirs: HashMap<&str, f64> = replayed.iter().map(|(m, c)| (m.as_str(), *c)).collect();
    let ours: HashMap<&str, f64> = live.iter().map(|(m, c)| (m.as_str(), *c)).collect();
    let mut found: Vec<Difference> = live
        .iter()
        .filter(|(member, composite)| theirs.get(member.as_str()) != Some(composite))
        .map(|(member, composite)| Difference {
            user_id: member.clone(),
            live: Some(score(*composite)),
            replayed: theirs.get(member.as_str()).map(|c| score(*c)),
        })
        .collect();
    found.extend(replayed.iter().filter(|(member, _)| !ours.contains_key(member.as_str())).map(|(member, composite)| Difference {
        user_id: member.clone(),
        live: None,
        replayed: Some(score(*composite)),
    }));
    found
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
    fn differences_name_changed_missing_and_extra_members() {
        let live = [("a".to_owned(), 30.0), ("b".to_owned(), 20.0), ("c".to_owned(), 10.0)];
        let replayed = [("a".to_owned(), 30.0), ("b".to_owned(), 21.0), ("d".to_owned(), 5.0)];
        let found = differences(&live, &replayed, |c| c as i64);
        let users: Vec<(&str, Option<i64>, Option<i64>)> = found.iter().map(|d| (d.user_id.as_str(), d.live, d.replayed)).collect();
        assert_eq!(users, [("b", Some(20), Some(21)), ("c", Some(10), None), ("d", None, Some(5))]);
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
