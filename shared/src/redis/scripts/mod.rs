//! Typed wrappers around the Lua scripts in `scripts/`. Each script is hashed once per
//! process and called with EVALSHA through `Connection::run_script`; after `SCRIPT FLUSH` or a
//! failover to a node that never saw it, NOSCRIPT is answered by loading it and retrying, so
//! callers never notice.

mod apply;
pub mod hot;

use std::sync::LazyLock;

use redis::Script;
use serde::{Deserialize, Serialize};

use crate::domain::period::EventTimeError;
use crate::redis::store::{Connection, StoreError};

#[cfg(test)]
mod key_check;

pub mod moderation;
pub mod sign_in;

pub use apply::{apply_events, marker_bucket, BoardEvent, Decision, MarkerSlot, Receipt, CHUNK, MARKER_SHARDS};

static READ_BOARD: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("read_board.lua")));
static READ_MEMBERS: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("read_members.lua")));

/// SHA1 of every script (for `SCRIPT EXISTS`).
pub fn hashes() -> Vec<&'static str> {
    [
        &apply::APPLY_EVENT,
        &READ_BOARD,
        &READ_MEMBERS,
        &hot::ADD_HEAT,
        &hot::SYNTHESIZE,
        &hot::SCALE,
        &sign_in::SIGN_IN,
        &moderation::BAN,
        &moderation::CORRECT_SCORE,
        &crate::archive::freeze::FREEZE_SEASON,
    ]
    .into_iter()
    .map(|script| script.get_hash())
    .collect()
}

/// Helpers (and the `#!lua` shebang) shared by the scripts built with `with_prelude`.
const PRELUDE: &str = include_str!("prelude.lua");

/// A script whose text is `prelude.lua` followed by `body` (Redis runs one script text).
fn with_prelude(body: &str) -> Script {
    Script::new(&[PRELUDE, body].concat())
}

/// How long the string markers of heat, sign-ins and corrections remember their id per board.
pub const EVENT_MARKER_TTL_SECS: u64 = 48 * 3600;

/// One period's standing after an event, in whole points.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeriodStanding {
    pub period: String,
    pub period_id: String,
    pub score: i64,
    /// What this write changed the score by (a take-back never removes more than was held).
    #[serde(default)]
    pub delta: i64,
    /// 1-based; `None` when the member is not on the board (zero points).
    pub rank: Option<u64>,
}

/// What an event did on one board. A duplicate gets the first delivery's decision, delta and
/// cap, with the member's standing at the time of the retry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardOutcome {
    pub applied: bool,
    /// Points actually added or removed: for a take-back, the largest removal of any period.
    pub delta: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Points withheld by the daily cap.
    #[serde(default)]
    pub capped: i64,
    pub periods: Vec<PeriodStanding>,
    /// For a board that refused the event with `rate_limited`: seconds until a slot frees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
}

/// Why a board's guard refused a write (its `ban|<user>` and `closed|<kind>:<id>` fields).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardRefusal {
    #[error("user {user_id:?} is banned from board {board:?}")]
    Banned { user_id: String, board: String },
    #[error("period {period_id} of board {board:?} is closed for archiving")]
    PeriodClosed { board: String, period_id: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyReply {
    New(BoardOutcome),
    Duplicate(BoardOutcome),
    Conflict,
    /// A first delivery outside the event window (a retry would have been a duplicate).
    OutsideWindow(EventTimeError),
    OutOfRange,
    Banned,
    /// The period (id) is frozen for archiving.
    PeriodClosed(String),
    /// The rule's rate limit is used up; a slot frees in this many seconds.
    RateLimited(u64),
}

/// Which part of a board `read_board` returns.
#[derive(Debug, Clone, Copy)]
pub enum Window<'a> {
    /// `limit` entries from the 0-based `offset`.
    Page { offset: u64, limit: u64 },
    /// The member and `around` entries on each side, shifted to stay full at either end.
    Around { member: &'a str, around: u64 },
}

/// One entry as stored: member, composite score, members with strictly more points.
#[derive(Debug, Clone, PartialEq)]
pub struct RawEntry {
    pub member: String,
    pub composite: f64,
    pub above: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RawWindow {
    pub total: u64,
    /// 0-based position of the member (around reads only).
    pub position: Option<u64>,
    /// Members with strictly fewer points than the member (around reads only).
    pub below: Option<u64>,
    /// First entry's 0-based position.
    pub start: u64,
    pub entries: Vec<RawEntry>,
}

/// Reads a window of one board and the counts behind competition ranks and percentiles, in
/// one round trip, from one consistent snapshot.
pub async fn read_board(conn: &mut Connection, board_key: &str, window: Window<'_>) -> Result<RawWindow, StoreError> {
    let mut invocation = READ_BOARD.key(board_key);
    match window {
        Window::Page { offset, limit } => invocation.arg("page").arg(offset).arg(limit),
        Window::Around { member, around } => invocation.arg("member").arg(member).arg(around),
    };
    let (total, rank, below, start, entries): (u64, i64, i64, u64, Vec<(String, f64, u64)>) =
        invocation.invoke_async(conn).await?;
    Ok(RawWindow {
        total,
        position: u64::try_from(rank).ok(),
        below: u64::try_from(below).ok(),
        start,
        entries: entries.into_iter().map(|(member, composite, above)| RawEntry { member, composite, above }).collect(),
    })
}

/// A listed member's place on the board, `None` when absent.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberPlace {
    /// 0-based unique rank.
    pub position: u64,
    pub composite: f64,
    /// Members with strictly more points.
    pub above: u64,
}

/// The places of `members` (distinct) on one board, in their order, with the board's size.
pub async fn read_members(
    conn: &mut Connection,
    board_key: &str,
    members: &[&str],
) -> Result<(u64, Vec<Option<MemberPlace>>), StoreError> {
    let mut invocation = READ_MEMBERS.key(board_key);
    for member in members {
        invocation.arg(*member);
    }
    let (total, places): (u64, Vec<(i64, String, i64)>) = invocation.invoke_async(conn).await?;
    let places = places
        .into_iter()
        .map(|(rank, composite, above)| {
            let position = u64::try_from(rank).ok()?;
            let composite = composite.parse().ok()?;
            Some(MemberPlace { position, composite, above: u64::try_from(above).ok()? })
        })
        .collect();
    Ok((total, places))
}

#[cfg(test)]
mod tests {
    use crate::domain::tiebreak::{MAX_POINTS, TIME_SPAN};

    #[test]
    fn every_script_file_is_listed_for_the_health_check() {
        let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/src/redis/scripts"))
            .unwrap()
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| name.ends_with(".lua") && name != "prelude.lua")
            .count();
        assert_eq!(super::hashes().len(), files, "prelude.lua is a fragment; every other file is a script");
    }

    #[test]
    fn the_scripts_use_the_same_composite_constants_as_rust() {
        let apply = include_str!("apply_event.lua");
        assert!(apply.starts_with("#!lua\n"), "the shebang makes Redis refuse the script up front when out of memory");
        let read = include_str!("read_board.lua");
        assert!(read.contains(&format!("local SPAN = {TIME_SPAN} ")));
        assert!(read.starts_with("#!lua flags=no-writes\n"));
        let members = include_str!("read_members.lua");
        assert!(members.contains(&format!("local SPAN = {TIME_SPAN} ")));
        assert!(members.starts_with("#!lua flags=no-writes\n"));
        let prelude = super::PRELUDE;
        assert!(prelude.contains(&format!("local SPAN = {TIME_SPAN} ")));
        assert!(prelude.contains(&format!("local MAX_POINTS = {MAX_POINTS} ")));
        for script in [prelude, include_str!("ban.lua")] {
            assert!(script.starts_with("#!lua\n"));
        }
        for body in [include_str!("sign_in.lua"), include_str!("correct_score.lua")] {
            assert!(!body.starts_with("#!"), "the prelude brings the shebang; a second one would be a syntax error");
        }
    }
}
