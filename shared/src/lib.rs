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
