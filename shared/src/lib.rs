//! Standings: leaderboards on Redis sorted sets, for AWS Lambda.
//!
//! The folders are the layers, each importing only the ones listed before it: `runtime`
//! (logs, metrics, secrets), `domain` (pure rules, time passed in), `redis` (connection,
//! keys, Lua scripts), `archive` (frozen seasons and their DynamoDB table), `services` (what
//! the functions call) and `http` (routes, auth, the one error mapping, the Lambda runner).

pub mod archive;
pub mod domain;
#[cfg(feature = "http")]
pub mod http;
pub mod redis;
pub mod runtime;
pub mod services;

use chrono::{DateTime, Utc};
use std::sync::Arc;

/// The current time, injectable so tests can stand on a period boundary.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

pub fn system_clock() -> Clock {
    Arc::new(Utc::now)
}

/// `STANDINGS_KEY_PREFIX` (default `st`): separates tenants or test runs sharing one Redis.
pub fn key_prefix_from_env() -> String {
    std::env::var("STANDINGS_KEY_PREFIX").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "st".to_owned())
}

/// `STANDINGS_JOURNAL_BUCKET`: the S3 bucket the `journal` function drains each board's journal
/// to. Set, it turns the journal on in every function that writes (docs/journal.md).
pub const JOURNAL_BUCKET_ENV: &str = "STANDINGS_JOURNAL_BUCKET";

pub fn journal_bucket_from_env() -> Option<String> {
    std::env::var(JOURNAL_BUCKET_ENV).ok().filter(|bucket| !bucket.is_empty())
}

/// `STANDINGS_EVENT_BUS`: the EventBridge bus the `journal` function sends rank-change
/// notifications to. Set, it turns their recording on in every function that writes
/// (docs/notifications.md).
pub const EVENT_BUS_ENV: &str = "STANDINGS_EVENT_BUS";

pub fn event_bus_from_env() -> Option<String> {
    std::env::var(EVENT_BUS_ENV).ok().filter(|bus| !bus.is_empty())
}

/// The keys of this deployment: `STANDINGS_KEY_PREFIX`, journaled when `STANDINGS_JOURNAL_BUCKET`
/// is set, recording rank moves when `STANDINGS_EVENT_BUS` is.
pub fn keys_from_env() -> Result<redis::keys::Keys, redis::keys::BadPrefix> {
    Ok(redis::keys::Keys::new(&key_prefix_from_env())?
        .with_journal(journal_bucket_from_env().is_some())
        .with_notices(event_bus_from_env().is_some()))
}
