//! Every Redis key Standings uses is built here.
//!
//! Layout: `<prefix>:v1:{<tag>}:<kind>:…`. The first `{…}` of a key is its Redis Cluster hash
//! tag: the board name for everything a board's scripts touch (so one script's keys share a
//! slot), a profile shard (`_profiles-<n>`) for a profile and its journal. `prefix` lets tenants
//! and tests share one Redis; it is validated to contain no braces. Ids reaching this module
//! have already passed `ids`' allow-lists.
//!
//! No client id can name another key: each kind has a word of its own, and a client id (which
//! may contain `:`) is either the key's last part or followed only by parts of a fixed shape
//! without `:` (a date, a month, an action name). The property test below checks it.

use chrono::{DateTime, Utc};

use crate::domain::period::Period;

mod catalog;
mod journal;
mod shards;
mod tournament;
pub use catalog::{CATALOG_JOURNAL, CATALOG_LOG_COUNT, CATALOG_LOG_FROM};
pub use journal::Holds;
pub use shards::{Layout, SLOTS, journal_board, journal_generation, journal_shards, redis_cli_ranges, slot};

const VERSION: &str = "v1";
/// How long a shadow replay's keys live (see `Keys::shadow`): longer than the invocation that
/// owns them can run (Lambda's 15 minutes), so no replay loses its early keys while it goes on,
/// and short enough that a killed one's keys soon go.
pub const SHADOW_TTL_SECS: i64 = 1200;
/// How long a replay keeps a key that would have expired by now: long enough for the rest of
/// the replay to read it (a day's later events need its ledger and caps), then it goes.
pub const REPLAY_EXPIRED_TTL_SECS: i64 = 3600;

/// The journal of profile changes, drained and restored as if it were a board's: profiles live
/// outside every board's slot. No board can be named so (board names are `a-z`, `0-9`, `-`).
/// Since profile shards, `<PROFILES_JOURNAL>-<n>` is shard n's journal, with its profiles in its
/// slot (one script call changes a profile and journals it); `_profiles` itself is the journal
/// of releases before, drained and restored until it is empty.
pub const PROFILES_JOURNAL: &str = "_profiles";
/// Profile shards: each a slot of its own, so profile writes spread over a cluster's nodes.
pub const PROFILE_SHARDS: u32 = 16;

/// The profile shard a user's profile lives in: FNV-1a of the id, stable across releases
/// (changing it would hide every profile).
fn profile_shard(user_id: &str) -> u32 {
    fnv1a(user_id) % PROFILE_SHARDS
}

/// FNV-1a (32 bits) of an id: how users are spread over profile shards and board shards.
fn fnv1a(id: &str) -> u32 {
    id.bytes().fold(0x811c_9dc5_u32, |hash, byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193))
}

/// The journal (and key tag) of profile shard `shard`.
pub fn profile_journal(shard: u32) -> String {
    format!("{PROFILES_JOURNAL}-{shard}")
}

/// Every journal of profiles: the shards', then the one of releases before shards.
pub fn profile_journals() -> Vec<String> {
    (0..PROFILE_SHARDS).map(profile_journal).chain([PROFILES_JOURNAL.to_owned()]).collect()
}

/// Whether journal `name` holds profiles (no board is guarded, fenced or configured so).
pub fn is_profile_journal(name: &str) -> bool {
    name.starts_with(PROFILES_JOURNAL)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
    /// Whether the write scripts append to each board's journal (`with_journal`).
    journal: bool,
    /// Whether the write scripts record rank moves on boards that notify (`with_notices`).
    notices: bool,
    /// Writes are a restore's replay of the journal (`replaying`).
    replay: bool,
    /// The layout a replay writes, shards and generation (`replaying_layout`; `None`: each
    /// board's configured shards, generation 0).
    replay_layout: Option<(u32, u32)>,
    /// Every key a write creates expires within this many seconds (`shadow`).
    ttl_cap: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
#[error("key prefix must be 1-64 characters of letters, digits and - _ . :")]
pub struct BadPrefix;

impl Keys {
    pub fn new(prefix: &str) -> Result<Self, BadPrefix> {
        let ok = !prefix.is_empty()
            && prefix.len() <= 64
            && prefix.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
        if ok {
            Ok(Self { prefix: prefix.to_owned(), journal: false, notices: false, replay: false, replay_layout: None, ttl_cap: None })
        } else {
            Err(BadPrefix)
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// These keys with every applied write journaled (docs/journal.md): on wherever the
    /// journal is drained (`STANDINGS_JOURNAL_BUCKET`), since an undrained stream only grows.
    pub fn with_journal(mut self, on: bool) -> Self {
        self.journal = on;
        self
    }

    /// Whether these keys are a replay's (a restore's or a shadow's), which writes where the
    /// journal says and probes no layout.
    pub fn replays(&self) -> bool {
        self.replay
    }

    /// A replay's writes go to this layout of its board (the one the journals replayed are of:
    /// a board a move re-encoded, docs/boards.md#changing-max_score, or one moving).
    pub fn replaying_layout(mut self, shards: u32, generation: u32) -> Self {
        self.replay_layout = Some((shards, generation));
        self
    }

    pub fn replayed_layout(&self) -> Option<(u32, u32)> {
        self.replay_layout
    }

    pub fn journal_on(&self) -> bool {
        self.journal
    }

    /// These keys with rank moves recorded on boards that notify (docs/notifications.md): on
    /// wherever they are delivered (`STANDINGS_EVENT_BUS`), since an undrained stream only grows.
    pub fn with_notices(mut self, on: bool) -> Self {
        self.notices = on;
        self
    }

    /// These keys for a restore's replay of the journal (docs/journal.md#restore): writes go
    /// out at the time they were first applied, journal nothing (they are in the journal
    /// already), and give the keys they create the TTL left of the original's (`BoardKeys::ttl`).
    pub fn replaying(mut self) -> Self {
        self.journal = false;
        self.notices = false;
        self.replay = true;
        self
    }

    /// Keys no reader sees, for a replay of the journal that is compared and thrown away
    /// (verify, rule dry-runs): `<prefix>:shadow-<run>:…`, in each board's slot as the live
    /// keys are; every key a write creates there expires within `SHADOW_TTL_SECS`.
    pub fn shadow(&self, run: u64) -> Result<Self, BadPrefix> {
        let mut keys = Keys::new(&format!("{}:shadow-{run}", self.prefix))?.replaying();
        keys.ttl_cap = Some(SHADOW_TTL_SECS);
        Ok(keys)
    }

    pub fn board(&self, board: &str) -> BoardKeys {
        BoardKeys {
            base: format!("{}:{VERSION}:{{{board}}}", self.prefix),
            journal: self.journal,
            notices: self.notices,
            replay: self.replay,
            ttl_cap: self.ttl_cap,
        }
    }

    /// A user's profile (hash), in their profile shard's slot beside its journal.
    pub fn profile(&self, user_id: &str) -> String {
        format!("{}{}", self.board(&profile_journal(profile_shard(user_id))).base, Self::profile_relative(user_id))
    }

    /// A profile's key relative to its shard's keys (as a journal line's effects name it).
    pub fn profile_relative(user_id: &str) -> String {
        format!(":profile:{user_id}")
    }

    /// The journal of `user_id`'s profile shard.
    pub fn profile_shard_journal(&self, user_id: &str) -> BoardKeys {
        self.board(&profile_journal(profile_shard(user_id)))
    }

    /// A profile as releases before profile shards stored it (a slot per user): read until the
    /// drain has moved every one (`profiles_moved`), then gone.
    pub fn legacy_profile(&self, user_id: &str) -> String {
        format!("{}:{VERSION}:{{u:{user_id}}}:profile", self.prefix)
    }

    /// How far the drain's move of profiles of the layout before shards has scanned each
    /// primary (hash: node -> SCAN cursor, or "done").
    pub fn profiles_move_cursor(&self) -> String {
        format!("{}:move-cursor", self.board(&profile_journal(0)).base)
    }

    /// Set once no profile of the layout before shards is left: reads stop looking for them.
    pub fn profiles_moved(&self) -> String {
        format!("{}:moved", self.board(&profile_journal(0)).base)
    }

    /// Pattern matching every key under this prefix (for tests and operators).
    pub fn all_pattern(&self) -> String {
        format!("{}:{VERSION}:*", self.prefix)
    }
}

/// Keys of one board; all share the board's hash slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardKeys {
    base: String,
    journal: bool,
    notices: bool,
    replay: bool,
    ttl_cap: Option<i64>,
}

impl BoardKeys {
    /// The sorted set of one period.
    pub fn period(&self, period: &Period) -> String {
        format!("{}:z:{}:{}", self.base, period.kind.as_str(), period.id)
    }

    /// Who reached a tie on a watched period's board first (hash: member -> "<composite>|<n>",
    /// `#` the last n; prelude.lua `record_move`): notifications order a tie by arrival, which
    /// Redis's order of equal scores does not keep. Expires with the period's set.
    pub fn arrivals(&self, period: &Period) -> String {
        format!("{}:arrivals:{}:{}", self.base, period.kind.as_str(), period.id)
    }

    /// A period's sorted set once frozen for archiving: renamed from `period` and never written
    /// again (the guard refuses every event for a closed period).
    pub fn frozen(&self, period: &Period) -> String {
        format!("{}:frozen:{}:{}", self.base, period.kind.as_str(), period.id)
    }

    /// One shard of a UTC day's event markers (a hash: event id digest -> fingerprint and
    /// receipt; see `scripts::apply`). `day` counts days since 1970-01-01.
    pub fn marker_bucket(&self, day: i64, shard: u16) -> String {
        format!("{}:evt:{day}:{shard}", self.base)
    }

    /// Pattern matching every marker bucket of this board (for tests and operators).
    pub fn marker_bucket_pattern(&self) -> String {
        format!("{}:evt:*:*", self.base)
    }

    /// Dedupe marker of one heat or sign-in event on this board (a string: payload fingerprint
    /// and the first reply). Its own kind: under `evt:` an id such as `20782:5` named a marker
    /// bucket (docs/keys.md, upgrading).
    pub fn event(&self, event_id: &str) -> String {
        format!("{}:mark:{event_id}", self.base)
    }

    /// Marker of one admin correction on this board: payload fingerprint and the first answer.
    pub fn correction(&self, correction_id: &str) -> String {
        format!("{}:cor:{correction_id}", self.base)
    }

    /// Marker of one grant of tournament attempts on this board: payload fingerprint and the
    /// first answer.
    pub fn grant(&self, grant_id: &str) -> String {
        format!("{}:grant:{grant_id}", self.base)
    }

    /// Marker of one admin void on this board: payload fingerprint and the first answer.
    pub fn void(&self, void_id: &str) -> String {
        format!("{}:void:{void_id}", self.base)
    }

    /// What made a user's score in one period (a hash of counters, on boards that keep
    /// statements; see `domain::statement`).
    pub fn statement(&self, user_id: &str, period: &Period) -> String {
        format!("{}:stmt:{}:{}:{user_id}", self.base, period.kind.as_str(), period.id)
    }

    /// Every user's statement of `period` (a `SCAN MATCH` pattern: board and period ids are
    /// allow-listed, with no glob characters).
    pub fn statement_pattern(&self, period: &Period) -> String {
        format!("{}:stmt:{}:{}:*", self.base, period.kind.as_str(), period.id)
    }

    /// The user whose statement of `period` `key` is (one `statement_pattern` found).
    pub fn statement_user<'k>(&self, key: &'k str, period: &Period) -> Option<&'k str> {
        key.strip_prefix(&format!("{}:stmt:{}:{}:", self.base, period.kind.as_str(), period.id))
    }

    /// What a user was given on one local day (the day ledger), and the day's cap counters.
    pub fn day_ledger(&self, user_id: &str, day_id: &str) -> String {
        format!("{}:ledger:{user_id}:{day_id}", self.base)
    }

    /// What a user was given once and for all (e.g. per article published).
    pub fn lifetime_ledger(&self, user_id: &str) -> String {
        format!("{}:once:{user_id}", self.base)
    }

    /// Refusals checked by every write: banned users, periods frozen for archiving.
    pub fn guard(&self) -> String {
        format!("{}:guard", self.base)
    }

    /// Targets that have counted once on the whole board (e.g. invitees).
    pub fn target_ledger(&self) -> String {
        format!("{}:targets", self.base)
    }

    /// A user's sign-ins in one month (`2026-11`): one bit per day, then the streak carried in
    /// from the previous month.
    pub fn sign_ins(&self, user_id: &str, month_id: &str) -> String {
        format!("{}:signin:{user_id}:{month_id}", self.base)
    }

    /// Sliding-window log of a user's recent events of one rate-limited action.
    pub fn rate_log(&self, user_id: &str, action: &str) -> String {
        format!("{}:rate:{user_id}:{action}", self.base)
    }

    /// The key a journal line's effects name relative to the board's (`:<rest>`, checked by
    /// `Effects::parse`): in the board's slot, whatever the rest says.
    pub fn relative(&self, key: &str) -> String {
        format!("{}{key}", self.base)
    }

    /// How far a reshard moving lines into this shard got (hash: `through` -> `<source
    /// shard>/<stream id>`; docs/scaling.md#changing-shards).
    pub fn reshard_checkpoint(&self) -> String {
        format!("{}:reshard", self.base)
    }

    /// Pattern matching every key of this board (or shard), and every period set of it.
    pub fn pattern_all(&self) -> String {
        format!("{}:*", self.base)
    }

    pub fn period_pattern(&self) -> String {
        format!("{}:z:*", self.base)
    }

    /// The period set a guard field `kept|<kind>:<id>` records (`None` for any other field).
    pub fn kept_set(&self, field: &str) -> Option<String> {
        field.strip_prefix(crate::domain::guard::KEPT).map(|period| format!("{}:z:{period}", self.base))
    }

    /// The guard field `kept|<kind>:<id>` recording the period set `set` (`kept_set`'s inverse).
    pub fn kept_field(&self, set: &str) -> Option<String> {
        let period = set.strip_prefix(self.base.as_str())?.strip_prefix(":z:")?;
        Some(format!("{}{period}", crate::domain::guard::KEPT))
    }

    /// A key of this board (or shard) relative to its keys (`relative`'s inverse).
    pub fn relative_of<'k>(&self, key: &'k str) -> Option<&'k str> {
        key.strip_prefix(self.base.as_str())
    }

    /// Whether writes record their rank moves in `notices` (the board must also notify).
    pub fn noticed(&self) -> bool {
        self.notices
    }

    /// Whether writes append to `journal`.
    pub fn journaled(&self) -> bool {
        self.journal
    }

    /// A TTL as the scripts take it (seconds from the write's `now`; 0: none). A replay's `now`
    /// is the original write's, so it gives the key what is left of the original's TTL on the
    /// real clock; a key that would have expired by now lives `REPLAY_EXPIRED_TTL_SECS` more.
    pub fn ttl(&self, secs: i64, now: DateTime<Utc>) -> i64 {
        let left = match secs - (Utc::now() - now).num_seconds() {
            _ if !self.replay || secs <= 0 => secs,
            left if left <= 0 => REPLAY_EXPIRED_TTL_SECS,
            left => left,
        };
        match self.ttl_cap {
            Some(cap) if left == 0 || left > cap => cap,
            _ => left,
        }
    }

    /// The board's audit log of admin actions (bans, corrections), newest first.
    pub fn audit(&self) -> String {
        format!("{}:audit", self.base)
    }

    /// A league's placements in one period (a hash: user -> `<tier>:<cohort>`, both numbers;
    /// docs/leagues.md). `period_id` is the league period's (`2026-W48`).
    pub fn league_members(&self, period_id: &str) -> String {
        format!("{}:lg:m:{period_id}", self.base)
    }

    /// A league's cohorts in one period: one sorted set, every score 0, member
    /// `<tier>:<cohort>|<user>`, so a cohort is a lexicographic range of it.
    pub fn league_cohorts(&self, period_id: &str) -> String {
        format!("{}:lg:c:{period_id}", self.base)
    }

    /// A league's cohorts in order in one period (a sorted set, every score 0, an entry
    /// `<cohort>|<composite, 16 digits>|<user>` per placed member with a score, and
    /// `<cohort>#` for each cohort whose entries are kept; prelude_league.lua `order_entry`,
    /// docs/leagues.md#cohort-order).
    pub fn league_order(&self, period_id: &str) -> String {
        format!("{}:lg:o:{period_id}", self.base)
    }

    /// How many cohorts each tier has opened in one period (a hash: tier -> count; the last is
    /// the open one).
    pub fn league_counts(&self, period_id: &str) -> String {
        format!("{}:lg:n:{period_id}", self.base)
    }

    /// Users whose first write of a period came before the period before it was closed (a
    /// sorted set: user -> ms of that write); the close places them.
    pub fn league_pending(&self, period_id: &str) -> String {
        format!("{}:lg:p:{period_id}", self.base)
    }

    /// A closed period's results (a hash: user -> their result, `#`-fields for the close's own
    /// progress; docs/leagues.md).
    pub fn league_results(&self, period_id: &str) -> String {
        format!("{}:lg:r:{period_id}", self.base)
    }

    /// Every user's tier for the next period they play (a hash: user -> tier number; absent:
    /// the lowest tier). Kept for good: a tier is earned.
    pub fn league_tiers(&self) -> String {
        format!("{}:lg:tier", self.base)
    }

    /// Heat of one hourly bucket of a window board, named by the bucket's start in UTC.
    pub fn hot_bucket(&self, start: DateTime<Utc>) -> String {
        format!("{}:hot:h:{}", self.base, start.format("%Y-%m-%dT%H:%MZ"))
    }

    /// The board readers see: the synthesized window, or a scale board's only key.
    pub fn hot_board(&self) -> String {
        format!("{}:hot:board", self.base)
    }

    /// Where synthesis builds the next board before swapping it in.
    pub fn hot_board_next(&self) -> String {
        format!("{}:hot:next", self.base)
    }

    /// Hash beside the hot board: when it was last synthesized or scaled, and its size then.
    pub fn hot_meta(&self) -> String {
        format!("{}:hot:meta", self.base)
    }
}

#[cfg(test)]
mod tests;
