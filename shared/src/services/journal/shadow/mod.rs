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
use crate::domain::journal::{Line, stream_order};
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
use serde::Serialize;

use super::error::RestoreError;
use crate::archive::objects::{Objects, journal_objects, read_lines};

mod dry_run;
pub use dry_run::{DryRunReport, DryRunRequest};

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
                // Objects overlap after a rollback's drain (its stream stored again from where
                // its copy stood): each line once, in the board's order.
                if last.as_deref().and_then(stream_order) >= stream_order(&line.id) {
                    continue;
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_changed_missing_and_extra_members() {
        let live = [("a".to_owned(), 30.0), ("b".to_owned(), 20.0), ("c".to_owned(), 10.0)];
        let replayed = [("a".to_owned(), 30.0), ("b".to_owned(), 21.0), ("d".to_owned(), 5.0)];
        let found = differences(&live, &replayed, |c| c as i64);
        let users: Vec<(&str, Option<i64>, Option<i64>)> = found.iter().map(|d| (d.user_id.as_str(), d.live, d.replayed)).collect();
        assert_eq!(users, [("b", Some(20), Some(21)), ("c", Some(10), None), ("d", None, Some(5))]);
    }
}
