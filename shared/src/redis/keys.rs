//! Every Redis key Standings uses is built here.
//!
//! Layout: `<prefix>:v1:{<tag>}:<kind>:…`. The first `{…}` of a key is its Redis Cluster hash
//! tag: the board name for everything a board's scripts touch (so one script's keys share a
//! slot), the user id for per-user data read outside scripts (profiles). `prefix` lets tenants
//! and tests share one Redis; it is validated to contain no braces. Ids reaching this module
//! have already passed `ids`' allow-lists.

use chrono::{DateTime, Utc};

use crate::domain::period::Period;

const VERSION: &str = "v1";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

#[derive(Debug, thiserror::Error)]
#[error("key prefix must be 1-64 characters of letters, digits and - _ . :")]
pub struct BadPrefix;

impl Keys {
    pub fn new(prefix: &str) -> Result<Self, BadPrefix> {
        let ok = !prefix.is_empty()
            && prefix.len() <= 64
            && prefix.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
        if ok { Ok(Self { prefix: prefix.to_owned() }) } else { Err(BadPrefix) }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn board(&self, board: &str) -> BoardKeys {
        BoardKeys { base: format!("{}:{VERSION}:{{{board}}}", self.prefix) }
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
    /// and the first reply). Events scored by rules were marked here by earlier releases; the
    /// write path still reads it, so a retry across the upgrade stays a duplicate.
    pub fn event(&self, event_id: &str) -> String {
        format!("{}:evt:{event_id}", self.base)
    }

    /// Marker of one admin correction on this board: payload fingerprint and the first answer.
    pub fn correction(&self, correction_id: &str) -> String {
        format!("{}:cor:{correction_id}", self.base)
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

    #[test]
    fn prefixes_cannot_move_the_hash_tag() {
        assert!(Keys::new("a{b}").is_err());
        assert!(Keys::new("").is_err());
        assert!(Keys::new("tenant-1:test").is_ok());
    }
}
