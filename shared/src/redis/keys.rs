//! Every Redis key Standings uses is built here.
//!
//! Layout: `<prefix>:v1:{<tag>}:<kind>:…`. The first `{…}` of a key is its Redis Cluster hash
//! tag: the board name for everything a board's scripts touch (so one script's keys share a
//! slot), the user id for per-user data read outside scripts (profiles). `prefix` lets tenants
//! and tests share one Redis; it is validated to contain no braces. Ids reaching this module
//! have already passed `ids`' allow-lists.
//!
//! No client id can name another key: each kind has a word of its own, and a client id (which
//! may contain `:`) is either the key's last part or followed only by parts of a fixed shape
//! without `:` (a date, a month, an action name). The property test below checks it.

use chrono::{DateTime, Utc};

use crate::domain::period::Period;

const VERSION: &str = "v1";
/// How long a shadow replay's keys outlive it at most (see `Keys::shadow`).
pub const SHADOW_TTL_SECS: i64 = 600;
/// How long a replay keeps a key that would have expired by now: long enough for the rest of
/// the replay to read it (a day's later events need its ledger and caps), then it goes.
pub const REPLAY_EXPIRED_TTL_SECS: i64 = 3600;

/// The journal of profile changes, drained and restored as if it were a board's: profiles live
/// outside every board's slot. No board can be named so (board names are `a-z`, `0-9`, `-`).
pub const PROFILES_JOURNAL: &str = "_profiles";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
    /// Whether the write scripts append to each board's journal (`with_journal`).
    journal: bool,
    /// Writes are a restore's replay of the journal (`replaying`).
    replay: bool,
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
        if ok { Ok(Self { prefix: prefix.to_owned(), journal: false, replay: false, ttl_cap: None }) } else { Err(BadPrefix) }
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

    pub fn journal_on(&self) -> bool {
        self.journal
    }

    /// These keys for a restore's replay of the journal (docs/journal.md#restore): writes go
    /// out at the time they were first applied, journal nothing (they are in the journal
    /// already), and give the keys they create the TTL left of the original's (`BoardKeys::ttl`).
    pub fn replaying(mut self) -> Self {
        self.journal = false;
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
            replay: self.replay,
            ttl_cap: self.ttl_cap,
        }
    }

    /// The keys of the profiles' journal (`PROFILES_JOURNAL`): its stream, restore checkpoint
    /// and lock, named like a board's.
    pub fn profiles_journal(&self) -> BoardKeys {
        self.board(PROFILES_JOURNAL)
    }

    pub fn profile(&self, user_id: &str) -> String {
        format!("{}:{VERSION}:{{u:{user_id}}}:profile", self.prefix)
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
    replay: bool,
    ttl_cap: Option<i64>,
}

impl BoardKeys {
    /// The sorted set of one period.
    pub fn period(&self, period: &Period) -> String {
        format!("{}:z:{}:{}", self.base, period.kind.as_str(), period.id)
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

    /// Marker of one admin void on this board: payload fingerprint and the first answer.
    pub fn void(&self, void_id: &str) -> String {
        format!("{}:void:{void_id}", self.base)
    }

    /// What made a user's score in one period (a hash of counters, on boards that keep
    /// statements; see `domain::statement`).
    pub fn statement(&self, user_id: &str, period: &Period) -> String {
        format!("{}:stmt:{}:{}:{user_id}", self.base, period.kind.as_str(), period.id)
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

    /// The board's journal: a stream of every applied write, drained to S3 (docs/journal.md).
    /// Its key whether or not the journal is on (the scripts take it either way, see
    /// `journaled`).
    pub fn journal(&self) -> String {
        format!("{}:journal", self.base)
    }

    /// Where a restore of this board from the journal stands (a hash: the object and line to
    /// go on from, or `done` for a day once it completed).
    pub fn restore_checkpoint(&self) -> String {
        format!("{}:restore", self.base)
    }

    /// Held by the one restore of this board running (a string with a lease).
    pub fn restore_lock(&self) -> String {
        format!("{}:restore-lock", self.base)
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
mod tests {
    use super::*;
    use crate::domain::period::PeriodKind;
    use chrono::NaiveDate;

    /// Redis Cluster's hash tag rule: the first `{…}` with something inside.
    fn hash_tag(key: &str) -> &str {
        let open = key.find('{').unwrap();
        let close = open + key[open..].find('}').unwrap();
        &key[open + 1..close]
    }

    #[test]
    fn every_board_key_carries_the_board_tag_first() {
        let board = Keys::new("st").unwrap().board("activity");
        let day = Period::on_date(PeriodKind::Day, NaiveDate::from_ymd_opt(2026, 11, 22).unwrap(), chrono_tz::UTC);
        let keys = [
            board.period(&day),
            board.event("e-1"),
            board.marker_bucket(20_416, 1023),
            board.day_ledger("u1", "2026-11-22"),
            board.lifetime_ledger("u1"),
            board.target_ledger(),
            board.guard(),
            board.hot_bucket(chrono::DateTime::from_timestamp(1_795_312_800, 0).unwrap()),
            board.hot_board(),
            board.hot_board_next(),
            board.hot_meta(),
            board.sign_ins("u1", "2026-11"),
            board.rate_log("u1", "learning"),
            board.audit(),
            board.frozen(&day),
            board.journal(),
            board.restore_checkpoint(),
            board.restore_lock(),
        ];
        for key in &keys {
            assert_eq!(hash_tag(key), "activity", "{key}");
            assert!(key.starts_with("st:v1:{activity}:"));
        }
        assert_eq!(keys[0], "st:v1:{activity}:z:day:2026-11-22");
        assert_eq!(keys[7], "st:v1:{activity}:hot:h:2026-11-22T02:00Z");
        assert_eq!(keys[2], "st:v1:{activity}:evt:20416:1023");
    }

    #[test]
    fn profiles_are_tagged_by_user() {
        let keys = Keys::new("st").unwrap();
        assert_eq!(keys.profile("u1"), "st:v1:{u:u1}:profile");
    }

    /// One key Standings can build, named by its kind and the ids it is built from.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    enum Spec {
        Period(String, PeriodKind, NaiveDate),
        Frozen(String, PeriodKind, NaiveDate),
        MarkerBucket(String, i64, u16),
        Event(String, String),
        Correction(String, String),
        Void(String, String),
        Statement(String, String, PeriodKind, NaiveDate),
        DayLedger(String, String, NaiveDate),
        LifetimeLedger(String, String),
        Guard(String),
        Targets(String),
        SignIns(String, String, NaiveDate),
        RateLog(String, String, String),
        Audit(String),
        Journal(String),
        Restore(String),
        RestoreLock(String),
        HotBucket(String, i64),
        HotBoard(String),
        HotNext(String),
        HotMeta(String),
        Profile(String),
    }

    fn build(keys: &Keys, spec: &Spec) -> String {
        let period = |kind: &PeriodKind, date: &NaiveDate| Period::on_date(*kind, *date, chrono_tz::UTC);
        match spec {
            Spec::Period(b, k, d) => keys.board(b).period(&period(k, d)),
            Spec::Frozen(b, k, d) => keys.board(b).frozen(&period(k, d)),
            Spec::MarkerBucket(b, day, shard) => keys.board(b).marker_bucket(*day, *shard),
            Spec::Event(b, id) => keys.board(b).event(id),
            Spec::Correction(b, id) => keys.board(b).correction(id),
            Spec::Void(b, id) => keys.board(b).void(id),
            Spec::Statement(b, user, k, d) => keys.board(b).statement(user, &period(k, d)),
            Spec::DayLedger(b, user, d) => keys.board(b).day_ledger(user, &d.to_string()),
            Spec::LifetimeLedger(b, user) => keys.board(b).lifetime_ledger(user),
            Spec::Guard(b) => keys.board(b).guard(),
            Spec::Targets(b) => keys.board(b).target_ledger(),
            Spec::SignIns(b, user, d) => keys.board(b).sign_ins(user, &d.format("%Y-%m").to_string()),
            Spec::RateLog(b, user, action) => keys.board(b).rate_log(user, action),
            Spec::Audit(b) => keys.board(b).audit(),
            Spec::Journal(b) => keys.board(b).journal(),
            Spec::Restore(b) => keys.board(b).restore_checkpoint(),
            Spec::RestoreLock(b) => keys.board(b).restore_lock(),
            Spec::HotBucket(b, hour) => keys.board(b).hot_bucket(chrono::DateTime::from_timestamp(hour * 3600, 0).unwrap()),
            Spec::HotBoard(b) => keys.board(b).hot_board(),
            Spec::HotNext(b) => keys.board(b).hot_board_next(),
            Spec::HotMeta(b) => keys.board(b).hot_meta(),
            Spec::Profile(user) => keys.profile(user),
        }
    }

    mod generated {
        use super::*;
        use proptest::prelude::*;

        /// Client ids from a small alphabet, so that ids shaped like other keys' parts (days,
        /// shards, dates, months, `a:b` pairs) come up often.
        fn client_id() -> impl Strategy<Value = String> {
            prop_oneof![
                "[0-2a:]{1,5}",
                (0i64..3, 0u16..3).prop_map(|(day, shard)| format!("{day}:{shard}")),
                prop::sample::select(vec!["u", "u:2026-11-22", "u:2026-11", "2026-11-22", "2026-11", "z:day", "1:2:3", "season:2026-11"])
                    .prop_map(str::to_owned),
            ]
        }

        fn board() -> impl Strategy<Value = String> {
            prop::sample::select(vec!["a", "b", "a-b", "u"]).prop_map(str::to_owned)
        }

        fn action() -> impl Strategy<Value = String> {
            prop::sample::select(vec!["comment", "a", "a_b", "2026", "score-submissions"]).prop_map(str::to_owned)
        }

        fn kind() -> impl Strategy<Value = PeriodKind> {
            prop::sample::select(vec![PeriodKind::Day, PeriodKind::Month, PeriodKind::Season, PeriodKind::All])
        }

        fn date() -> impl Strategy<Value = NaiveDate> {
            (0u64..3).prop_map(|d| NaiveDate::from_ymd_opt(2026, 11, 21).unwrap() + chrono::Days::new(d))
        }

        /// The first day of a month: what names a month (sign-ins) when any of its days would.
        fn month() -> impl Strategy<Value = NaiveDate> {
            prop::sample::select(vec![NaiveDate::from_ymd_opt(2026, 10, 1).unwrap(), NaiveDate::from_ymd_opt(2026, 11, 1).unwrap()])
        }

        /// A period as (kind, its first day), so two specs of one period are equal.
        fn period() -> impl Strategy<Value = (PeriodKind, NaiveDate)> {
            (kind(), date()).prop_map(|(k, d)| {
                let start = Period::on_date(k, d, chrono_tz::UTC).start.map_or(NaiveDate::MIN, |s| s.date_naive());
                (k, start)
            })
        }

        fn spec() -> impl Strategy<Value = Spec> {
            prop_oneof![
                (board(), period()).prop_map(|(b, (k, d))| Spec::Period(b, k, d)),
                (board(), period()).prop_map(|(b, (k, d))| Spec::Frozen(b, k, d)),
                (board(), 0i64..3, 0u16..3).prop_map(|(b, day, shard)| Spec::MarkerBucket(b, day, shard)),
                (board(), client_id()).prop_map(|(b, id)| Spec::Event(b, id)),
                (board(), client_id()).prop_map(|(b, id)| Spec::Correction(b, id)),
                (board(), client_id()).prop_map(|(b, id)| Spec::Void(b, id)),
                (board(), client_id(), period()).prop_map(|(b, u, (k, d))| Spec::Statement(b, u, k, d)),
                (board(), client_id(), date()).prop_map(|(b, u, d)| Spec::DayLedger(b, u, d)),
                (board(), client_id()).prop_map(|(b, u)| Spec::LifetimeLedger(b, u)),
                board().prop_map(Spec::Guard),
                board().prop_map(Spec::Targets),
                (board(), client_id(), month()).prop_map(|(b, u, d)| Spec::SignIns(b, u, d)),
                (board(), client_id(), action()).prop_map(|(b, u, a)| Spec::RateLog(b, u, a)),
                board().prop_map(Spec::Audit),
                board().prop_map(Spec::Journal),
                board().prop_map(Spec::Restore),
                board().prop_map(Spec::RestoreLock),
                (board(), 0i64..3).prop_map(|(b, h)| Spec::HotBucket(b, h)),
                board().prop_map(Spec::HotBoard),
                board().prop_map(Spec::HotNext),
                board().prop_map(Spec::HotMeta),
                client_id().prop_map(Spec::Profile),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]
            /// Two different (kind, ids) never build the same key, whatever the ids look like.
            #[test]
            fn no_two_kinds_or_ids_build_the_same_key(specs in prop::collection::vec(spec(), 1..200)) {
                let keys = Keys::new("st").unwrap();
                let mut seen = std::collections::HashMap::new();
                for spec in specs {
                    let key = build(&keys, &spec);
                    if let Some(other) = seen.insert(key.clone(), spec.clone()) {
                        prop_assert_eq!(&other, &spec, "both build {}", key);
                    }
                }
            }
        }
    }

    #[test]
    fn a_replay_gives_keys_what_is_left_of_the_original_ttl() {
        let live = Keys::new("st").unwrap().board("points");
        let replay = Keys::new("st").unwrap().replaying().board("points");
        let hour_ago = Utc::now() - chrono::Duration::hours(1);
        assert_eq!(live.ttl(7200, hour_ago), 7200);
        assert!((3599..=3600).contains(&replay.ttl(7200, hour_ago)), "{}", replay.ttl(7200, hour_ago));
        assert_eq!(replay.ttl(1800, hour_ago), REPLAY_EXPIRED_TTL_SECS, "expired by now: kept for the rest of the replay");
        assert_eq!(replay.ttl(0, hour_ago), 0, "none stays none");
        assert!(!replay.journaled(), "a replay journals nothing");
        let shadow = Keys::new("st").unwrap().shadow(7).unwrap().board("points");
        assert_eq!((shadow.ttl(0, hour_ago), shadow.ttl(7200, hour_ago)), (SHADOW_TTL_SECS, SHADOW_TTL_SECS));
        assert!(
            shadow
                .period(&Period::on_date(PeriodKind::All, NaiveDate::from_ymd_opt(2026, 1, 1).unwrap(), chrono_tz::UTC))
                .starts_with("st:shadow-7:v1:{points}:")
        );
    }

    #[test]
    fn prefixes_cannot_move_the_hash_tag() {
        assert!(Keys::new("a{b}").is_err());
        assert!(Keys::new("").is_err());
        assert!(Keys::new("tenant-1:test").is_ok());
    }
}
