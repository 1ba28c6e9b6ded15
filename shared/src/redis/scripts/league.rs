//! The typed wrappers of the league scripts (docs/leagues.md): the keys a write script places
//! a user with, reading a cohort, closing one, and opening the next period.

use redis::Script;

use super::key_list::KeyList;
use super::pack::Block;
use super::{CLOSE_LEAGUE, DROP_IDLE, OPEN_LEAGUE, READ_COHORT};
use crate::domain::league::League;
use crate::domain::period::Period;
use crate::redis::error::StoreError;
use crate::redis::keys::BoardKeys;
use crate::redis::settings::ReplicaWait;
use crate::redis::store::{Connection, ScriptCall};

/// The keys a write script places a user with: `period`'s (the league's period the write
/// lands in) and the period before's (whether it is closed yet), in the order the scripts'
/// headers list them.
fn league_key_list(keys: &BoardKeys, period: &Period) -> [String; 9] {
    let previous = period.previous().map_or_else(String::new, |p| p.id);
    [
        keys.league_members(&period.id),
        keys.league_cohorts(&period.id),
        keys.league_counts(&period.id),
        keys.league_tiers(),
        keys.league_pending(&period.id),
        keys.league_members(&previous),
        keys.league_pending(&previous),
        keys.league_results(&previous),
        keys.league_order(&period.id),
    ]
}

/// The league part of an event's block (apply_event.lua's header): the keys, cohort size and
/// top tier.
pub(super) fn league_keys(
    block: &mut Block,
    call: &mut ScriptCall<'_>,
    key_list: &mut KeyList,
    keys: &BoardKeys,
    league: &League,
    period: &Period,
) {
    for key in league_key_list(keys, period) {
        block.index(key_list.add(call, key));
    }
    block.number(i64::from(league.cohort_size)).number(top_tier(league));
}

/// The keys a correction places a user with (correct_score.lua): `league_key_list`'s, then
/// the period's results, whose close ends placements.
pub(super) fn correction_keys(keys: &BoardKeys, period: &Period) -> impl Iterator<Item = String> {
    league_key_list(keys, period).into_iter().chain([keys.league_results(&period.id)])
}

/// The league's cohort size and top tier, as the write scripts take them.
pub(super) fn sizes(league: &League) -> (u32, i64) {
    (league.cohort_size, top_tier(league))
}

/// The same as plain arguments (submit_score.lua's block).
pub(super) fn league_args(call: &mut ScriptCall<'_>, key_list: &mut KeyList, keys: &BoardKeys, league: &League, period: &Period) {
    for key in league_key_list(keys, period) {
        let index = key_list.add(call, key);
        call.arg(index);
    }
    call.arg(league.cohort_size).arg(top_tier(league));
}

fn top_tier(league: &League) -> i64 {
    i64::try_from(league.tiers.len()).unwrap_or(1) - 1
}

/// A cohort as stored: who is in it, with their composite on the period's board as Redis
/// wrote it (`None`: not on the board, i.e. no points).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawCohort {
    /// The user's tier for their next placement (reads by user only).
    pub tier: Option<usize>,
    /// `<tier>:<n>`; `None` when the user has no cohort this period.
    pub cohort: Option<String>,
    pub members: Vec<(String, Option<String>)>,
}

/// What a cohort read is of.
#[derive(Debug, Clone, Copy)]
pub enum CohortOf<'a> {
    User(&'a str),
    Cohort(&'a str),
}

/// A user's tier and cohort of `period`, or one cohort, with every member's composite, from one
/// snapshot (read_cohort.lua). `fence_at`: on a journaled deployment, the function's clock in
/// ms: a board being restored, or whose period set was lost, answers `board_restoring` rather
/// than a cohort with its scores missing (docs/journal.md#fence).
pub async fn read_cohort(
    conn: &mut Connection,
    keys: &BoardKeys,
    period: &Period,
    of: CohortOf<'_>,
    fence_at: Option<i64>,
) -> Result<RawCohort, StoreError> {
    let (user, cohort) = match of {
        CohortOf::User(user) => (user, ""),
        CohortOf::Cohort(cohort) => ("", cohort),
    };
    let mut invocation = READ_COHORT.prepare_invoke();
    invocation
        .key(keys.league_members(&period.id))
        .key(keys.league_cohorts(&period.id))
        .key(keys.league_tiers())
        .key(keys.period(period))
        .key(keys.guard())
        .arg(user)
        .arg(cohort)
        .arg(fence_at.map_or_else(String::new, |ms| ms.to_string()));
    let reply: Vec<String> = invocation.invoke_async(conn).await?;
    let mut values = reply.into_iter();
    let protocol = || StoreError::Protocol("read_cohort: reply too short".into());
    let (tier, cohort) = values.next().zip(values.next()).ok_or_else(protocol)?;
    let mut members = Vec::new();
    while let Some(member) = values.next() {
        let composite = values.next().ok_or_else(protocol)?;
        members.push((member, Some(composite).filter(|c| !c.is_empty())));
    }
    Ok(RawCohort { tier: tier.parse().ok(), cohort: Some(cohort).filter(|c| !c.is_empty()), members })
}

/// One member's line of a cohort's close: as read, and what they got.
#[derive(Debug, Clone)]
pub struct Closing<'a> {
    pub member: &'a str,
    pub composite: Option<&'a str>,
    /// `league::Outcome::encode`.
    pub result: String,
    pub next_tier: usize,
}

/// What close_league.lua did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReply {
    Closed,
    /// Closed by an earlier run.
    Done,
    /// The cohort changed since it was read: read it again.
    Stale,
}

/// Records one cohort's results and next tiers, once, if the cohort is as read; `ttls` are the
/// results' and the tiers' (0: none).
pub async fn close_cohort(
    conn: &mut Connection,
    keys: &BoardKeys,
    period: &Period,
    cohort: &str,
    (results_ttl, tiers_ttl): (i64, i64),
    journal_entry: &str,
    closing: &[Closing<'_>],
) -> Result<CloseReply, StoreError> {
    let mut call = ScriptCall::new(&CLOSE_LEAGUE);
    call.key(keys.period(period))
        .key(keys.league_cohorts(&period.id))
        .key(keys.league_results(&period.id))
        .key(keys.league_tiers())
        .key(keys.journal())
        .key(keys.guard());
    call.arg(cohort).arg(results_ttl).arg(if keys.journaled() { journal_entry } else { "" }).arg(closing.len()).arg(tiers_ttl);
    for line in closing {
        call.arg(line.member).arg(line.composite.unwrap_or("")).arg(&line.result).arg(line.next_tier);
    }
    let reply: String = conn.run_script(&call, ReplicaWait::NONE).await?;
    match reply.as_str() {
        "closed" => Ok(CloseReply::Closed),
        "done" => Ok(CloseReply::Done),
        "stale" => Ok(CloseReply::Stale),
        other => Err(StoreError::Protocol(format!("close_league: {other:?}"))),
    }
}

/// Places up to `batch` of the players who wrote in `next` before `ended` was closed; once none
/// wait, marks `ended` closed. Returns how many still wait.
#[allow(clippy::too_many_arguments)]
pub async fn open_next(
    conn: &mut Connection,
    keys: &BoardKeys,
    league: &League,
    ended: &Period,
    next: &Period,
    batch: usize,
    ttls: (i64, i64),
    journal_entry: &str,
) -> Result<u64, StoreError> {
    let mut call = ScriptCall::new(&OPEN_LEAGUE);
    call.key(keys.guard())
        .key(keys.league_results(&ended.id))
        .key(keys.league_members(&next.id))
        .key(keys.league_cohorts(&next.id))
        .key(keys.league_counts(&next.id))
        .key(keys.league_tiers())
        .key(keys.league_pending(&next.id))
        .key(keys.journal())
        .key(keys.league_order(&next.id))
        .key(keys.period(next));
    call.arg(batch).arg(league.cohort_size).arg(top_tier(league)).arg(ttls.0).arg(ttls.1);
    call.arg(if keys.journaled() { journal_entry } else { "" });
    conn.run_script(&call, ReplicaWait::NONE).await
}

/// One step of `ended`'s drop of idle players (drop_idle.lua): whether players are left.
pub async fn drop_idle(
    conn: &mut Connection,
    keys: &BoardKeys,
    league: &League,
    ended: &Period,
    results_ttl: i64,
    journal_entry: &str,
) -> Result<bool, StoreError> {
    let mut call = ScriptCall::new(&DROP_IDLE);
    call.key(keys.league_tiers()).key(keys.league_results(&ended.id)).key(keys.journal()).key(keys.guard());
    call.arg(IDLE_STEP).arg(results_ttl).arg(if keys.journaled() { journal_entry } else { "" }).arg(top_tier(league));
    let left: u64 = conn.run_script(&call, ReplicaWait::NONE).await?;
    Ok(left > 0)
}

/// Players an idle drop step looks at.
const IDLE_STEP: u64 = 500;

/// The scripts' hashes, for the health check's list.
pub(super) fn scripts() -> [&'static std::sync::LazyLock<Script>; 4] {
    [&READ_COHORT, &CLOSE_LEAGUE, &OPEN_LEAGUE, &DROP_IDLE]
}
