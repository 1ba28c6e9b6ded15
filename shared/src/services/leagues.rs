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
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys};
use crate::redis::scripts::league::{CloseReply, Closing, CohortOf, RawCohort, close_cohort, drop_idle, open_next, read_cohort};
use crate::redis::store::{Connection, Store};
use crate::services::profiles::{self, Profile};
use crate::services::reads::rules::ReadError;

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

/// A cohort ranked: (user, composite, score) best first, with the zones of its size.
fn ranked(board: &Board, period: &Period, raw: &RawCohort) -> Vec<(String, Option<String>, Option<i64>)> {
    let scale = scores::scale(board, period);
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

    /// The user's cohort of the league period containing `at`, zones marked.
    pub async fn user(&self, board: &Board, period: &Period, user_id: &str) -> Result<UserLeague, ReadError> {
        let league = league_of(board)?;
        let keys = self.keys.board(&board.name);
        let mut conn = self.store.connection().await?;
        let raw = read_cohort(&mut conn, &keys, period, CohortOf::User(user_id)).await?;
        let waiting = raw.cohort.is_none()
            && conn.zscore::<_, _, Option<f64>>(keys.league_pending(&period.id), user_id).await.map_err(StoreError::from)?.is_some();
        let ranked = ranked(board, period, &raw);
        let size = u32::try_from(ranked.len()).unwrap_or(u32::MAX);
        let tier = raw.cohort.as_deref().and_then(tier_of).or(raw.tier).unwrap_or(0);
        let zones = Zones::of(league, tier, size);
        let users: Vec<&str> = ranked.iter().map(|(m, ..)| m.as_str()).collect();
        let mut profiles = profiles::get_many(&self.store, &self.keys, &users).await?.into_iter();
        let entries = ranked
            .iter()
            .zip(1u32..)
            .map(|((user, _, score), rank)| CohortEntry {
                rank,
                user_id: user.clone(),
                score: *score,
                profile: profiles.next().flatten(),
                zone: zones.zone(rank, size),
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
        let keys = self.keys.board(&board.name);
        let periods: Vec<Period> = Period::containing(league.period, now, board.timezone).before().take(HISTORY_PERIODS).collect();
        let mut pipe = redis::pipe();
        for period in &periods {
            pipe.hget(keys.league_results(&period.id), user_id);
        }
        let mut conn = self.store.connection().await?;
        let results: Vec<Option<String>> = pipe.query_async(&mut conn).await.map_err(StoreError::from)?;
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
        let keys = self.keys.board(&board.name);
        let mut conn = self.store.connection().await?;
        let count: Option<u64> = conn.hget(keys.league_counts(&period.id), index.to_string()).await.map_err(StoreError::from)?;
        let mut pipe = redis::pipe();
        let total = count.unwrap_or(0);
        let names: Vec<String> = (offset + 1..=total.min(offset.saturating_add(limit))).map(|n| format!("{index}:{n}")).collect();
        for name in &names {
            pipe.zlexcount(keys.league_cohorts(&period.id), format!("[{name}|"), format!("({name}}}"));
        }
        let sizes: Vec<u64> = if names.is_empty() { Vec::new() } else { pipe.query_async(&mut conn).await.map_err(StoreError::from)? };
        Ok((names.into_iter().zip(sizes).map(|(cohort, size)| CohortSize { cohort, size }).collect(), total))
    }

    /// The ended periods of `board`'s league (ended at least `grace` before `now`, still kept)
    /// that had players (placed, or waiting themselves, or players of the next period waiting
    /// for them) and are not closed yet, oldest first.
    pub async fn unclosed(&self, board: &Board, now: DateTime<Utc>, grace: Duration) -> Result<Vec<Period>, StoreError> {
        let Some(league) = &board.league else { return Ok(Vec::new()) };
        let keys = self.keys.board(&board.name);
        let oldest = now - league.period.retention().unwrap_or(Duration::days(35));
        let mut ended: Vec<Period> = Period::containing(league.period, now - grace, board.timezone)
            .before()
            .take_while(|p| p.end.is_some_and(|end| end.with_timezone(&Utc) >= oldest))
            .collect();
        ended.reverse();
        let mut pipe = redis::pipe();
        for period in &ended {
            let next = period.following().map_or_else(String::new, |p| p.id);
            let played = [keys.league_members(&period.id), keys.league_pending(&period.id), keys.league_pending(&next)];
            pipe.hexists(keys.league_results(&period.id), league::CLOSED_FIELD).exists(&played);
        }
        let mut conn = self.store.connection().await?;
        let flags: Vec<u64> = pipe.query_async(&mut conn).await.map_err(StoreError::from)?;
        Ok(ended.into_iter().zip(flags.chunks(2)).filter(|(_, f)| f[0] == 0 && f[1] > 0).map(|(p, _)| p).collect())
    }

    /// Closes every period `unclosed` finds, oldest first, until `deadline`.
    pub async fn close_due(
        &self,
        board: &Board,
        now: DateTime<Utc>,
        grace: Duration,
        deadline: DateTime<Utc>,
    ) -> Result<Vec<CloseReport>, StoreError> {
        let Some(league) = &board.league else { return Ok(Vec::new()) };
        let mut reports = Vec::new();
        for period in self.unclosed(board, now, grace).await? {
            let report = self.close(board, league, &period, now, deadline).await?;
            let done = report.status == "complete";
            reports.push(report);
            if !done {
                break;
            }
        }
        Ok(reports)
    }

    /// Closes one ended period: every cohort of every tier, then opens the next period.
    pub async fn close(
        &self,
        board: &Board,
        league: &League,
        period: &Period,
        now: DateTime<Utc>,
        deadline: DateTime<Utc>,
    ) -> Result<CloseReport, StoreError> {
        let keys = self.keys.board(&board.name);
        let mut conn = self.store.connection().await?;
        let mut report = CloseReport {
            board: board.name.clone(),
            period_id: period.id.clone(),
            status: "in_progress",
            cohorts_closed: 0,
            players_placed_after: 0,
        };
        let counts: std::collections::HashMap<String, u32> = conn.hgetall(keys.league_counts(&period.id)).await?;
        let mut cohorts: Vec<(usize, u32)> =
            counts.iter().filter_map(|(t, n)| Some((t.parse().ok()?, *n))).flat_map(|(t, n)| (1..=n).map(move |c| (t, c))).collect();
        cohorts.sort_unstable();
        for (tier, cohort) in cohorts {
            if Utc::now() >= deadline {
                return Ok(report);
            }
            report.cohorts_closed += self.close_cohort(board, league, period, tier, cohort, now).await?;
        }
        if league.idle == league::Idle::Drop {
            while self.drop_idle_step(board, league, period, now).await? {
                if Utc::now() >= deadline {
                    return Ok(report);
                }
            }
        }
        if period.following().is_none() {
            report.status = "complete";
            return Ok(report);
        }
        loop {
            if Utc::now() >= deadline {
                return Ok(report);
            }
            let (placed, left) = self.open_batch(board, league, period, now).await?;
            report.players_placed_after += placed;
            if left == 0 {
                report.status = "complete";
                return Ok(report);
            }
        }
    }

    /// Closes cohort `<tier>:<cohort>` of `period` (close_league.lua): how many cohorts this
    /// call closed (0: closed before).
    /// A tier's last cohort too small to stand alone (`league::joins_the_cohort_before`) is
    /// closed with the cohort before it, as one group, whichever of the two is asked for.
    pub async fn close_cohort(
        &self,
        board: &Board,
        league: &League,
        period: &Period,
        tier: usize,
        cohort: u32,
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let keys = self.keys.board(&board.name);
        let name = format!("{tier}:{cohort}");
        let mut conn = self.store.write_connection().await?;
        let results_ttl = keys.ttl(results_secs(league), now);
        let entry = serde_json::json!({"kind": "league_close", "at": Stamp(now), "period_id": period.id, "cohort": name}).to_string();
        let group = self.group(&mut conn, &keys, league, period, tier, cohort).await?;
        let names: Vec<String> = group.iter().map(|n| format!("{tier}:{n}")).collect();
        for _ in 0..CLOSE_ATTEMPTS {
            // Each member with their own cohort, the group ranked as one.
            let mut raw = RawCohort { tier: None, cohort: None, members: Vec::new() };
            let mut own = std::collections::HashMap::new();
            for (n, name) in group.iter().zip(&names) {
                let read = read_cohort(&mut conn, &keys, period, CohortOf::Cohort(name)).await?;
                own.extend(read.members.iter().map(|(member, _)| (member.clone(), *n)));
                raw.members.extend(read.members);
            }
            let ranked = ranked(board, period, &raw);
            // Off the board at the close (corrected or voided to nothing): no score, whatever a
            // read shows for such a member (0 on a points board).
            let standings: Vec<(String, Option<i64>)> = ranked.iter().map(|(m, c, s)| (m.clone(), c.as_ref().and(*s))).collect();
            let mut outcomes = league::close_cohort(league, tier, cohort, &standings);
            for (member, outcome) in &mut outcomes {
                outcome.cohort = own.get(member).copied().unwrap_or(cohort);
            }
            let closing: Vec<Closing<'_>> = ranked
                .iter()
                .zip(&outcomes)
                .map(|((member, composite, _), (_, outcome))| Closing {
                    member,
                    composite: composite.as_deref(),
                    result: outcome.encode(),
                    next_tier: outcome.next_tier,
                })
                .collect();
            // Tiers are kept for good, except under a shadow replay's TTL cap.
            let ttls = (results_ttl, keys.ttl(0, now));
            match close_cohort(&mut conn, &keys, period, &names.join(","), ttls, &entry, &closing).await? {
                CloseReply::Closed => return Ok(group.len() as u64),
                CloseReply::Done => return Ok(0),
                CloseReply::Stale => continue,
            }
        }
        Err(StoreError::Protocol(format!("league cohort {name} kept changing while it was closed")))
    }

    /// The cohorts closed together with cohort `n` of `tier`: itself, or itself and the tier's
    /// last cohort when that one is too small to stand alone.
    async fn group(
        &self,
        conn: &mut Connection,
        keys: &BoardKeys,
        league: &League,
        period: &Period,
        tier: usize,
        n: u32,
    ) -> Result<Vec<u32>, StoreError> {
        let last: Option<u32> = conn.hget(keys.league_counts(&period.id), tier).await?;
        let Some(last) = last.filter(|last| *last >= 2) else { return Ok(vec![n]) };
        let small = |raw: RawCohort| league::joins_the_cohort_before(raw.members.len(), league.cohort_size);
        let pair = if n == last && small(read_cohort(conn, keys, period, CohortOf::Cohort(&format!("{tier}:{last}"))).await?) {
            [n - 1, n]
        } else if n + 1 == last && small(read_cohort(conn, keys, period, CohortOf::Cohort(&format!("{tier}:{last}"))).await?) {
            [n, n + 1]
        } else {
            return Ok(vec![n]);
        };
        // One of the two closed alone already (the last was larger then, and a ban shrank it
        // since): the other closes alone too, never left unclosed.
        let marks: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(keys.league_results(&period.id))
            .arg(pair.map(|c| format!("{}{tier}:{c}", league::COHORT_CLOSED_PREFIX)).to_vec())
            .query_async(conn)
            .await?;
        Ok(match marks.as_slice() {
            [Some(_), None] => vec![pair[1]],
            [None, Some(_)] => vec![pair[0]],
            _ => pair.to_vec(),
        })
    }

    /// One step of the drop of `ended`'s idle players (`Idle::Drop`): whether players are left.
    pub async fn drop_idle_step(&self, board: &Board, league: &League, ended: &Period, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let keys = self.keys.board(&board.name);
        let mut conn = self.store.write_connection().await?;
        let entry = serde_json::json!({"kind": "league_idle", "at": Stamp(now), "period_id": ended.id}).to_string();
        drop_idle(&mut conn, &keys, league, ended, keys.ttl(results_secs(league), now), &entry).await
    }

    /// Places one batch of the players waiting for `ended`'s close in the period after it
    /// (open_league.lua): (placed, still waiting).
    pub async fn open_batch(&self, board: &Board, league: &League, ended: &Period, now: DateTime<Utc>) -> Result<(u64, u64), StoreError> {
        let Some(next) = ended.following() else { return Ok((0, 0)) };
        let keys = self.keys.board(&board.name);
        let mut conn = self.store.write_connection().await?;
        let ttls = (keys.ttl(next.ttl_secs(now), now), keys.ttl(results_secs(league), now));
        let entry = serde_json::json!({"kind": "league_open", "at": Stamp(now), "period_id": ended.id}).to_string();
        let before: u64 = conn.zcard(keys.league_pending(&next.id)).await?;
        let left = open_next(&mut conn, &keys, league, ended, &next, OPEN_BATCH, ttls, &entry).await?;
        Ok((before.saturating_sub(left), left))
    }
}
