//! Standings: leaderboards on Redis sorted sets, for AWS Lambda.
//!
//! Pure logic (`config`, `decay`, `ids`, `period`, `scoring`, `tiebreak`) takes time as an
//! argument and never touches the network; `keys` builds every Redis key; `scripts` wraps each
//! Lua script; `store` owns the connection; `ingestion`, `hot`, `sign_ins`, `moderation` and
//! `profiles` are the services the functions call; `http` maps every error to a status code;
//! `archiving` (Redis) and `season_table` (DynamoDB, cargo feature `dynamodb`) are the two
//! sides of season archives.

pub mod archiving;
pub mod config;
pub mod decay;
pub mod health;
pub mod hot;
pub mod http;
pub mod ids;
pub mod ingestion;
pub mod keys;
pub mod metrics;
pub mod moderation;
pub mod period;
pub mod profiles;
pub mod reads;
pub mod routing;
pub mod scoring;
pub mod scripts;
#[cfg(feature = "dynamodb")]
pub mod season_table;
pub mod secrets;
pub mod sign_ins;
pub mod store;
pub mod telemetry;
pub mod tiebreak;

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
