//! Leagues (docs/leagues.md): what a user's cohort looks like, what happened to them in the
//! periods before, the cohorts of a tier for operators, and the close of ended periods that
//! the `archive` function's scheduled run performs.

use chrono::{DateTime, Duration, Utc};
use redis::AsyncCommands;
use serde::Serialize;

use crate::domain::config::Board;
use crate::domain::journal::Stamp;
use crate::domain::league::{self, League, Outcome, Zone, Zones};
use crate::domain::period::Period;
use crate::domain::scores;
use crate::domain::tiebreak::Scale;
use crate::redis::catalog;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys};
use crate::redis::scripts::league::{CloseReply, Closing, CohortOf, RawCohort, close_cohort, drop_idle, open_next, read_cohort};
use crate::redis::store::{Connection, Store};
use crate::services::profiles::{self, Profile};
use crate::services::reads::rules::ReadError;

mod close;

/// How long a period's results are kept at least (the history's reach): 26 weeks of weekly
/// leagues. Never less than the period's own keys live, plus a margin (`results_secs`): a
/// period whose results expired before its placements would look unclosed again.
pub const RESULTS_RETENTION_SECS: i64 = 182 * 24 * 3600;

/// Seconds a period's results are kept (`RESULTS_RETENTION_SECS`, or the period's retention
/// and 30 days more when that is longer).
fn results_secs(league: &League) -> i64 {
    let period = league.period.retention().map_or(0, |d| d.num_seconds()) + 30 * 24 * 3600;
    RESULTS_RETENTION_SECS.max(period)
}
/// How many past periods a user's history looks back on.
pub const HISTORY_PERIODS: usize = 12;
/// Players placed per call when a period opens after its predecessor's close.
const OPEN_BATCH: usize = 500;
/// Attempts at closing a cohort whose members keep changing (corrections racing the close).
const CLOSE_ATTEMPTS: usize = 5;

/// One member of a cohort, best first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CohortEntry {
    pub rank: u32,
    pub user_id: String,
    /// `None` (`null`) for a member with no score on a score board (0 is a score there).
    pub score: Option<i64>,
    pub profile: Option<Profile>,
    pub zone: Zone,
}

/// `GET /v1/boards/{board}/users/{user_id}/league`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UserLeague {
    pub board: String,
    pub period: &'static str,
    pub period_id: String,
    pub period_start: Option<String>,
    pub next_reset: Option<String>,
    /// The tier's name: the cohort's, or the one the user would be placed in now.
    pub tier: String,
    /// `<tier>:<n>`; `None` (`null`) while the user has not played this period.
    pub cohort: Option<String>,
    pub entries: Vec<CohortEntry>,
    /// Players of the next period wait for the last one's close before they are placed.
    pub waiting: bool,
}

/// One period of a user's history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryEntry {
    pub period_id: String,
    pub tier: String,
    /// `None` for a period the player sat out (`zone: idle`).
    pub cohort: Option<String>,
    pub rank: Option<u32>,
    pub cohort_size: Option<u32>,
    /// `None` (`null`): no score on a score board, or a period sat out.
    pub score: Option<i64>,
    pub zone: Zone,
    pub next_tier: String,
}

/// One cohort's size, for operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CohortSize {
    pub cohort: String,
    pub size: u64,
}

/// What the close did to one ended period of one board.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CloseReport {
    pub board: String,
    pub period_id: String,
    /// `complete` or `in_progress` (the deadline came first; the next run goes on).
    pub status: &'static str,
    pub cohorts_closed: u64,
    pub players_placed_after: u64,
}

#[derive(Clone)]
pub struct Leagues {
    keys: Keys,
    store: Store,
}

/// Members of a cohort in board order: highest composite first, equal composites as Redis
/// orders them (`ZREVRANGE`: the greater member first), members without a score last.
pub fn board_order(members: &mut [(String, Option<f64>)]) {
    members.sort_by(|(a, x), (b, y)| match (x, y) {
        (Some(x), Some(y)) => y.total_cmp(x).then_with(|| b.cmp(a)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    });
}

/// `tier:n` → the tier's number.
fn tier_of(cohort: &str) -> Option<usize> {
    cohort.split_once(':')?.0.parse().ok()
}

fn tier_name(league: &League, tier: usize) -> String {
    league.tiers.get(tier).or(league.tiers.last()).cloned().unwrap_or_default()
}

/// The board's league, or why there is none.
pub fn league_of(board: &Board) -> Result<&League, ReadError> {
    board.league.as_ref().ok_or_else(|| ReadError::NoLeague(board.name.clone()))
}

/// A cohort ranked: (user, composite, score) best first, with the zones of its size; scores
/// read at the `max_score` the board holds them at (`held`, `Layout::held_scale`).
fn ranked(board: &Board, held: Option<i64>, period: &Period, raw: &RawCohort) -> Vec<(String, Option<String>, Option<i64>)> {
    let scale = scores::scale_held(board, period, held);
    let mut members: Vec<(String, Option<f64>)> =
        raw.members.iter().map(|(m, c)| (m.clone(), c.as_deref().and_then(|c| c.parse().ok()))).collect();
    board_order(&mut members);
    let text = |member: &str| raw.members.iter().find(|(m, _)| m == member).and_then(|(_, c)| c.clone());
    members.into_iter().map(|(m, c)| (m.clone(), text(&m), score_of(board, &scale, c))).collect()
}

fn score_of(board: &Board, scale: &Scale, composite: Option<f64>) -> Option<i64> {
    composite.map_or_else(|| scores::absent_score(board), |c| Some(scale.score_of(c)))
}

impl Leagues {
    pub fn new(keys: Keys, store: Store) -> Self {
        Self { keys, store }
    }

    /// The board's keys where its data is, and the scale its scores are held in: the one slot
    /// of its recorded layout (a league board is never sharded), whose generation a `max_score`
    /// move changes; the write scripts place players there.
    async fn slot(&self, board: &Board) -> Result<(BoardKeys, Option<i64>), StoreError> {
        let layout = self.store.held_layout(&self.keys, board).await?;
        Ok((layout.shard(0), layout.held_scale()))
    }

    /// `pipe`'s replies, with the guard's `born` and `fence` read last on a journaled deployment:
    /// a board lost or being restored has lost its league's results and cohorts too, or has them
    /// part-way, so it answers `Restoring` (docs/journal.md#fence).
    async fn fenced(&self, keys: &BoardKeys, mut pipe: redis::Pipeline) -> Result<Vec<Option<String>>, StoreError> {
        let journaled = self.keys.journal_on();
        if journaled {
            pipe.add_command(catalog::guard_state(&keys.guard()));
        }
        let mut conn = self.store.connection().await?;
        let mut replies: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
        if journaled {
            let state = replies.pop().ok_or_else(|| StoreError::Protocol("a league read: no guard's state".into()))?;
            catalog::restoring(state)?;
        }
        redis::from_redis_value(redis::Value::Array(replies)).map_err(|e| StoreError::Protocol(format!("a league read: {e}")))
    }

    /// On a journaled deployment, `now` in ms: the cohort reads' fence (`read_cohort`).
    fn fence_at(&self, now: DateTime<Utc>) -> Option<i64> {
        self.keys.journal_on().then(|| now.timestamp_millis())
    }

    /// The user's cohort of the league period containing `at`, zones marked, read at `now`.
    pub async fn user(&self, board: &Board, period: &Period, user_id: &str, now: DateTime<Utc>) -> Result<UserLeague, ReadError> {
        let league = league_of(board)?;
        let (keys, held) = self.slot(board).await?;
        let mut conn = self.store.connection().await?;
        let raw = read_cohort(&mut conn, &keys, period, CohortOf::User(user_id), self.fence_at(now)).await?;
        let waiting = raw.cohort.is_none()
            && conn.zscore::<_, _, Option<f64>>(keys.league_pending(&period.id), user_id).await.map_err(StoreError::from)?.is_some();
        let ranked = ranked(board, held, period, &raw);
        // Zones are of the members with a score, as the close ranks them: one with none did
        // not play (yet), is in no zone and does not count (docs/leagues.md#the-close).
        let size = u32::try_from(ranked.iter().filter(|(_, composite, _)| composite.is_some()).count()).unwrap_or(u32::MAX);
        let tier = raw.cohort.as_deref().and_then(tier_of).or(raw.tier).unwrap_or(0);
        let zones = Zones::of(league, tier, size);
        let users: Vec<&str> = ranked.iter().map(|(m, ..)| m.as_str()).collect();
        let mut profiles = profiles::get_many(&self.store, &self.keys, &users).await?.into_iter();
        let entries = ranked
            .iter()
            .zip(1u32..)
            .map(|((user, composite, score), rank)| CohortEntry {
                rank,
                user_id: user.clone(),
                score: *score,
                profile: profiles.next().flatten(),
                zone: if composite.is_some() { zones.zone(rank, size) } else { Zone::Idle },
            })
            .collect();
        let info = period.info();
        Ok(UserLeague {
            board: board.name.clone(),
            period: info.period,
            period_id: info.period_id,
            period_start: info.period_start,
            next_reset: info.next_reset,
            tier: tier_name(league, tier),
            cohort: raw.cohort,
            entries,
            waiting,
        })
    }

    /// The user's results in the `HISTORY_PERIODS` periods before the one containing `now`,
    /// newest first (periods they did not play are left out, unless they dropped a tier for it).
    pub async fn history(&self, board: &Board, now: DateTime<Utc>, user_id: &str) -> Result<Vec<HistoryEntry>, ReadError> {
        let league = league_of(board)?;
        let (keys, _) = self.slot(board).await?;
        let periods: Vec<Period> = Period::containing(league.period, now, board.timezone).before().take(HISTORY_PERIODS).collect();
        let mut pipe = redis::pipe();
        for period in &periods {
            pipe.hget(keys.league_results(&period.id), user_id);
        }
        let results = self.fenced(&keys, pipe).await?;
        let mut conn = self.store.connection().await?;
        let played: Vec<(&Period, Outcome)> = periods.iter().zip(results).filter_map(|(p, r)| Some((p, Outcome::decode(&r?)?))).collect();
        let mut sizes = redis::pipe();
        for (period, outcome) in &played {
            sizes.hget(keys.league_results(&period.id), format!("{}{}:{}", league::COHORT_CLOSED_PREFIX, outcome.tier, outcome.cohort));
        }
        // Redis refuses an empty pipeline: a player who has played no closed period has none.
        let sizes: Vec<Option<u32>> =
            if played.is_empty() { Vec::new() } else { sizes.query_async(&mut conn).await.map_err(StoreError::from)? };
        Ok(played
            .into_iter()
            .zip(sizes)
            .map(|((period, outcome), cohort_size)| HistoryEntry {
                period_id: period.id.clone(),
                tier: tier_name(league, outcome.tier),
                cohort: (outcome.cohort != 0).then(|| format!("{}:{}", outcome.tier, outcome.cohort)),
                rank: (outcome.zone != Zone::Idle).then_some(outcome.rank),
                cohort_size,
                score: outcome.points,
                zone: outcome.zone,
                next_tier: tier_name(league, outcome.next_tier),
            })
            .collect())
    }

    /// Up to `limit` cohorts of `tier` (a name) in `period` from the 0-based `offset`, with their
    /// sizes, and how many cohorts the tier has.
    pub async fn cohorts(
        &self,
        board: &Board,
        period: &Period,
        tier: &str,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<CohortSize>, u64), ReadError> {
        let league = league_of(board)?;
        let index = league
            .tiers
            .iter()
            .position(|t| t == tier)
            .ok_or_else(|| ReadError::UnknownTier { board: board.name.clone(), known: league.tiers.clone() })?;
        let (keys, _) = self.slot(board).await?;
        let mut first = redis::pipe();
        first.atomic().hget(keys.league_counts(&period.id), index.to_string());
        let mut read = self.fenced(&keys, first).await?;
        let mut conn = self.store.connection().await?;
        let count =
            read.pop().flatten().map(|n| n.parse::<u64>()).transpose().map_err(|e| StoreError::Protocol(format!("cohort count: {e}")))?;
        let mut pipe = redis::pipe();
        let total = count.unwrap_or(0);
        let names: Vec<String> = (offset + 1..=total.min(offset.saturating_add(limit))).map(|n| format!("{index}:{n}")).collect();
        for name in &names {
            pipe.zlexcount(keys.league_cohorts(&period.id), format!("[{name}|"), format!("({name}}}"));
        }
        let sizes: Vec<u64> = if names.is_empty() { Vec::new() } else { pipe.query_async(&mut conn).await.map_err(StoreError::from)? };
        Ok((names.into_iter().zip(sizes).map(|(cohort, size)| CohortSize { cohort, size }).collect(), total))
    }
}
