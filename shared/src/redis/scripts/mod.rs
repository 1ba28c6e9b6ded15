//! The script registry: every Lua script of this folder, composed once per process, hashed,
//! and called through a typed wrapper (`apply`, `hot`, `moderation`, `sign_in`, and the reads
//! below). Calls go out with EVALSHA through `Connection::run_script`; after `SCRIPT FLUSH` or
//! a failover to a node that never saw a script, NOSCRIPT is answered by loading it and
//! retrying, so callers never notice.
//!
//! Every script has one shape (`compose`): its own shebang line, the constants generated from
//! their Rust definitions, the prelude's helpers (`prelude_read.lua`, `prelude_effects.lua`,
//! `prelude.lua`, `prelude_league.lua`), then its body; the reads a sharded board makes once a
//! shard take the constants and `prelude_read.lua` alone (`compose_read`: the whole prelude
//! costs about 18 µs a call to define). No script copies a constant or a helper.

mod apply;
pub mod catalog;
pub mod hot;
mod key_list;
pub mod league;
pub mod moderation;
mod pack;
pub mod profile;
mod receipt;
mod reply;
pub mod scores;
pub mod sign_in;
pub mod tournament;

use std::sync::LazyLock;

use redis::Script;
use serde::{Deserialize, Serialize};

use crate::domain::distribution::Histogram;
use crate::domain::guard::{BAN, BORN, CLOSED, COMPACT, DRAINED, EMPTIED, ENDED, FENCE, KEPT, LIVE, LOST, MARKS, MOVING, PACKED, ROLLBACK};
use crate::domain::league::{CLOSED_FIELD, COHORT_CLOSED_PREFIX, IDLE_CURSOR_FIELD};
use crate::domain::period::EventTimeError;
use crate::domain::scores::{MAX_SCORE, SCORE_TIME_SPAN};
use crate::domain::tiebreak::{MAX_POINTS, Scale, TIME_SPAN};
use crate::redis::error::StoreError;
use crate::redis::store::Connection;

pub use apply::{BoardEvent, CHUNK, LEDGER_RETENTION_SECS, MARKER_SHARDS, MarkerSlot, apply_events, marker_bucket};
pub use receipt::{Decision, Receipt};
pub(crate) use reply::Status;

macro_rules! script {
    ($file:literal) => {
        LazyLock::new(|| compose(include_str!($file)))
    };
}

/// A read-only script composed with the constants and the reads' fence alone (`compose_read`).
macro_rules! read_script {
    ($file:literal) => {
        LazyLock::new(|| compose_read(include_str!($file)))
    };
}

static APPLY_EVENT: LazyLock<Script> = script!("apply_event.lua");
static READ_BOARD: LazyLock<Script> = script!("read_board.lua");
static READ_MEMBERS: LazyLock<Script> = script!("read_members.lua");
static READ_DISTRIBUTION: LazyLock<Script> = script!("read_distribution.lua");
static ADD_HEAT: LazyLock<Script> = script!("add_heat.lua");
static SYNTHESIZE_HOT: LazyLock<Script> = script!("synthesize_hot.lua");
static SCALE_HOT: LazyLock<Script> = script!("scale_hot.lua");
static SIGN_IN: LazyLock<Script> = script!("sign_in.lua");
static BAN_USER: LazyLock<Script> = script!("ban.lua");
static CORRECT_SCORE: LazyLock<Script> = script!("correct_score.lua");
static SUBMIT_SCORE: LazyLock<Script> = script!("submit_score.lua");
static VOID_POINTS: LazyLock<Script> = script!("void.lua");
pub(crate) static FREEZE_SEASON: LazyLock<Script> = script!("freeze_season.lua");
pub(crate) static NOTICES_LEASE: LazyLock<Script> = script!("notices_lease.lua");
pub(crate) static NOTICES_COMMIT: LazyLock<Script> = script!("notices_commit.lua");
pub(crate) static NOTICES_DROPPED: LazyLock<Script> = script!("notices_dropped.lua");
static READ_COHORT: LazyLock<Script> = script!("read_cohort.lua");
static CLOSE_LEAGUE: LazyLock<Script> = script!("close_league.lua");
static OPEN_LEAGUE: LazyLock<Script> = script!("open_league.lua");
static DROP_IDLE: LazyLock<Script> = script!("drop_idle.lua");
pub(crate) static RESTORE_LINES: LazyLock<Script> = script!("restore_lines.lua");
static PUT_PROFILE: LazyLock<Script> = script!("put_profile.lua");
static DEFINE_BOARD: LazyLock<Script> = script!("define_board.lua");
static REGISTER_BANS: LazyLock<Script> = script!("register_bans.lua");
static CATALOG_CHANGES: LazyLock<Script> = script!("catalog_changes.lua");
static CATALOG_LIVE: LazyLock<Script> = script!("catalog_live.lua");
static CATALOG_RETIRED: LazyLock<Script> = script!("catalog_retired.lua");
pub(crate) static SHARD_RANKS: LazyLock<Script> = read_script!("shard_ranks.lua");
static JOIN_TOURNAMENT: LazyLock<Script> = script!("join_tournament.lua");
static GRANT_ATTEMPTS: LazyLock<Script> = script!("grant_attempts.lua");
static RELEASE_INSTANCE: LazyLock<Script> = script!("release_instance.lua");
static PRUNE_INSTANCES: LazyLock<Script> = script!("prune_instances.lua");
pub(crate) static RELEASE_SEASON: LazyLock<Script> = script!("release_season.lua");
pub(crate) static TRIM_JOURNAL: LazyLock<Script> = script!("trim_journal.lua");
pub(crate) static LIFT_FENCE: LazyLock<Script> = script!("lift_fence.lua");
pub(crate) static MARK_BORN: LazyLock<Script> = script!("mark_born.lua");
pub(crate) static FENCE_OLDER: LazyLock<Script> = script!("fence_older.lua");
pub(crate) static JOURNAL_POINT: LazyLock<Script> = read_script!("journal_point.lua");

/// SHA1 of every script (for `SCRIPT EXISTS`).
pub fn hashes() -> Vec<&'static str> {
    [
        &APPLY_EVENT,
        &READ_BOARD,
        &READ_MEMBERS,
        &READ_DISTRIBUTION,
        &ADD_HEAT,
        &SYNTHESIZE_HOT,
        &SCALE_HOT,
        &SIGN_IN,
        &BAN_USER,
        &CORRECT_SCORE,
        &SUBMIT_SCORE,
        &VOID_POINTS,
        &FREEZE_SEASON,
        &NOTICES_LEASE,
        &NOTICES_COMMIT,
        &NOTICES_DROPPED,
        &RESTORE_LINES,
        &PUT_PROFILE,
        &DEFINE_BOARD,
        &REGISTER_BANS,
        &CATALOG_CHANGES,
        &CATALOG_LIVE,
        &CATALOG_RETIRED,
        &SHARD_RANKS,
        &JOIN_TOURNAMENT,
        &GRANT_ATTEMPTS,
        &RELEASE_INSTANCE,
        &PRUNE_INSTANCES,
        &RELEASE_SEASON,
        &TRIM_JOURNAL,
        &LIFT_FENCE,
        &MARK_BORN,
        &FENCE_OLDER,
        &crate::redis::layout::KEEP_SCALE,
        &JOURNAL_POINT,
    ]
    .into_iter()
    .chain(league::scripts())
    .map(|script| script.get_hash())
    .collect()
}

const PRELUDE: &str = include_str!("prelude.lua");
/// The reads' fence (`read_fence`), composed first.
const PRELUDE_READ: &str = include_str!("prelude_read.lua");
/// The recording of a journaled write's effects, composed before the prelude (whose helpers
/// read it).
const PRELUDE_EFFECTS: &str = include_str!("prelude_effects.lua");
/// The event-id markers' helpers, composed after the prelude (they use its helpers).
const PRELUDE_MARKERS: &str = include_str!("prelude_markers.lua");
/// The league helpers, composed after the prelude (they use its helpers).
const PRELUDE_LEAGUE: &str = include_str!("prelude_league.lua");

/// The Lua definitions of the constants the scripts share with Rust, each from its one Rust
/// definition.
fn constants() -> String {
    let mut lua = format!(
        "local SPAN = {TIME_SPAN}\nlocal MAX_POINTS = {MAX_POINTS}\nlocal GUARD_BAN, GUARD_CLOSED, GUARD_LIVE, GUARD_EMPTIED = '{BAN}', '{CLOSED}', '{LIVE}', '{EMPTIED}'\n"
    );
    for decision in Decision::ALL {
        lua.push_str(&format!("local {} = '{}'\n", decision.lua_name(), decision.code()));
    }
    lua.push_str(&format!("local GUARD_FENCE, GUARD_BORN, GUARD_ENDED = '{FENCE}', '{BORN}', '{ENDED}'\n"));
    lua.push_str(&format!("local GUARD_MOVING, GUARD_COMPACT, GUARD_PACKED = '{MOVING}', '{COMPACT}', '{PACKED}'\n"));
    lua.push_str(&format!("local GUARD_KEPT, GUARD_LOST, GUARD_DRAINED, GUARD_ROLLBACK = '{KEPT}', '{LOST}', '{DRAINED}', '{ROLLBACK}'\n"));
    lua.push_str(&format!(
        "local GUARD_MARKS, MARKER_HELD, MARKER_SHARDS = '{MARKS}', '{}', {}\n",
        apply::MARKER_HELD,
        apply::MARKER_SHARDS
    ));
    let effects: Vec<String> = crate::domain::journal::EFFECT_COMMANDS.iter().map(|c| format!("{c} = true")).collect();
    lua.push_str(&format!("local EFFECT = {{{}}}\n", effects.join(", ")));
    lua.push_str(&format!("local CLAIM_ALL = '{}'\n", crate::domain::journal::CLAIM_ALL));
    lua.push_str(&format!(
        "local CATALOG_LOG_FROM, CATALOG_LOG_COUNT = '{}', '{}'\n",
        crate::redis::keys::CATALOG_LOG_FROM,
        crate::redis::keys::CATALOG_LOG_COUNT
    ));
    lua.push_str(&format!("local NOTICES_MAX_LEN = {}\n", crate::domain::notify::NOTICES_MAX_LEN));
    lua.push_str(&format!(
        "local LEAGUE_CLOSED, LEAGUE_COHORT_CLOSED, LEAGUE_IDLE_CURSOR = '{CLOSED_FIELD}', '{COHORT_CLOSED_PREFIX}', '{IDLE_CURSOR_FIELD}'\n"
    ));
    lua.push_str(&format!(
        "local SCORE_SPAN, MAX_SCORE = {SCORE_TIME_SPAN}, {MAX_SCORE}\nlocal SCORE_KEPT, SCORE_NOT_BETTER = '{}', '{}'\n",
        scores::SCORE_KEPT,
        scores::SCORE_NOT_BETTER
    ));
    lua.push_str(&format!("local PERIOD_CLOSED = '{} the season is closed for archiving'\n", crate::redis::error::SEASON_CLOSED));
    lua
}

/// One script's text as Redis runs it: the file's shebang line first (Redis 7 reads its flags
/// there; `#!lua` alone makes it refuse a writing script up front when out of memory), then the
/// constants, the prelude and the rest of the file.
fn compose(file: &str) -> Script {
    let (shebang, body) = file.split_once('\n').expect("every script starts with its shebang line");
    Script::new(&format!("{shebang}\n{}{PRELUDE_READ}{PRELUDE_EFFECTS}{PRELUDE}{PRELUDE_MARKERS}{PRELUDE_LEAGUE}{body}", constants()))
}

/// A read-only script run once a shard (`read_script!`): the shebang, the constants, the reads'
/// fence and the file, without the write helpers every other script carries.
fn compose_read(file: &str) -> Script {
    let (shebang, body) = file.split_once('\n').expect("every script starts with its shebang line");
    Script::new(&format!("{shebang}\n{}{PRELUDE_READ}{body}", constants()))
}

/// How long the string markers of heat, sign-ins and corrections remember their id per board.
pub const EVENT_MARKER_TTL_SECS: u64 = 48 * 3600;

/// One period's standing after an event, in whole points.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeriodStanding {
    pub period: String,
    pub period_id: String,
    /// `None` once a correction removed the entry from a score board (where 0 is a score).
    #[serde(default)]
    pub score: Option<i64>,
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

/// What a write script answered for one write on one board: its outcome `O` (new, or a
/// duplicate's first answer), or why nothing was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteReply<O> {
    New(O),
    Duplicate(O),
    Conflict,
    /// A first delivery outside the event window (a retry would have been a duplicate).
    OutsideWindow(EventTimeError),
    OutOfRange,
    Banned,
    /// The period (id) is frozen for archiving.
    PeriodClosed(String),
    /// The rate limit is used up; a slot frees in this many seconds.
    RateLimited(u64),
    /// A take-back with nothing to take back, sent to wait for its give: nothing written.
    Deferred,
    /// A tournament's seat or attempts refused it (docs/tournaments.md).
    Seat(SeatRefusal),
}

/// Why a tournament's board took no submission from a player.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeatRefusal {
    /// The tournament needs a join first.
    NotJoined,
    /// A first submission to an instance whose seats are taken.
    Full,
    /// The player's submissions in the instance are used up.
    EntryLimit,
}

/// An event's answer on one board (`apply_event.lua`).
pub type ApplyReply = WriteReply<BoardOutcome>;

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
/// `guard`: the board's guard on a journaled deployment, whose fence the read honours.
pub async fn read_board(
    conn: &mut Connection,
    board_key: &str,
    fence: Option<(&str, i64)>,
    scale: &Scale,
    window: Window<'_>,
) -> Result<RawWindow, StoreError> {
    let mut invocation = READ_BOARD.key(board_key);
    invocation.key(fence.map(|(guard, _)| guard));
    invocation.arg(scale.span);
    match window {
        Window::Page { offset, limit } => invocation.arg("page").arg(offset).arg(limit),
        Window::Around { member, around } => invocation.arg("member").arg(member).arg(around),
    };
    invocation.arg(fence.map_or(0, |(_, now)| now));
    type Reply = (u64, i64, i64, u64, Vec<(String, f64, u64)>);
    let (total, rank, below, start, entries): Reply = invocation.invoke_async(conn).await?;
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
    fence: Option<(&str, i64)>,
    scale: &Scale,
    members: &[&str],
) -> Result<(u64, Vec<Option<MemberPlace>>), StoreError> {
    let mut invocation = READ_MEMBERS.key(board_key);
    invocation.key(fence.map(|(guard, _)| guard));
    invocation.arg(scale.span).arg(fence.map_or(0, |(_, now)| now));
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

/// Reads a board's size, bucket counts and cut-offs in one round trip, from one snapshot.
/// On a score board the histogram is in values (`Scale::value`); `Distribution::of` turns it
/// into scores.
pub async fn read_distribution(
    conn: &mut Connection,
    board_key: &str,
    fence: Option<(&str, i64)>,
    scale: &Scale,
    buckets: u64,
    shares: &[u32],
) -> Result<Histogram, StoreError> {
    let mut invocation = READ_DISTRIBUTION.key(board_key);
    invocation.key(fence.map(|(guard, _)| guard));
    invocation.arg(scale.span).arg(fence.map_or(0, |(_, now)| now)).arg(buckets);
    for share in shares {
        invocation.arg(*share);
    }
    type Reply = (u64, i64, i64, i64, Vec<u64>, Vec<i64>);
    let (total, lowest, highest, width, counts, cutoffs): Reply = invocation.invoke_async(conn).await?;
    Ok(Histogram { total, lowest, highest, width, counts, cutoffs })
}

#[cfg(test)]
mod tests {
    use crate::domain::tiebreak::{MAX_POINTS, TIME_SPAN};

    #[test]
    fn every_script_file_is_listed_for_the_health_check() {
        let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/src/redis/scripts"))
            .unwrap()
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| name.ends_with(".lua") && !name.starts_with("prelude"))
            .count();
        assert_eq!(super::hashes().len(), files, "prelude*.lua are fragments; every other file is a script");
    }

    #[test]
    fn every_script_is_composed_with_the_constants_and_the_prelude() {
        let text = super::constants();
        assert!(text.starts_with(&format!("local SPAN = {TIME_SPAN}\nlocal MAX_POINTS = {MAX_POINTS}\n")));
        assert!(text.contains("GUARD_BAN, GUARD_CLOSED, GUARD_LIVE, GUARD_EMPTIED = 'ban|', 'closed|', 'live|', 'emptied|'"));
        for decision in super::Decision::ALL {
            assert!(text.contains(&format!("local {} = '{}'\n", decision.lua_name(), decision.code())));
        }
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/src/redis/scripts");
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "lua") {
                continue;
            }
            let source = std::fs::read_to_string(&path).unwrap();
            for copy in
                ["local SPAN", "local MAX_POINTS", "2147483648", "4194303", "8388608", "1073741823", "'ban|'", "'closed|'", "'live|'"]
            {
                assert!(!source.contains(copy), "{path:?} copies {copy:?}: constants come from Rust");
            }
            if path.file_name().is_some_and(|name| name.to_string_lossy().starts_with("prelude")) {
                assert!(!source.starts_with("#!"), "the prelude's fragments go after each script's own shebang");
                continue;
            }
            // Run as the file is: the layout's probe (redis/layout.rs).
            if path.file_name().is_some_and(|name| name == "keep_scale.lua") {
                assert!(!source.contains("GUARD_"), "keep_scale.lua is run without the constants");
                continue;
            }
            let (shebang, body) = source.split_once('\n').unwrap();
            let read_only = path.file_name().is_some_and(|name| name == "shard_ranks.lua");
            let composed = if read_only { super::compose_read(&source) } else { super::compose(&source) };
            let preludes = if read_only {
                super::PRELUDE_READ.to_owned()
            } else {
                format!(
                    "{}{}{}{}{}",
                    super::PRELUDE_READ,
                    super::PRELUDE_EFFECTS,
                    super::PRELUDE,
                    super::PRELUDE_MARKERS,
                    super::PRELUDE_LEAGUE
                )
            };
            let expected = format!("{shebang}\n{text}{preludes}{body}");
            assert_eq!(composed.get_hash(), super::Script::new(&expected).get_hash(), "{path:?}");
        }
    }
}
