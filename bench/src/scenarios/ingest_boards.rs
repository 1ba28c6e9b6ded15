//! The boards and keys of scenario 1's rows: the journal's, the league's and the notified
//! board's keys of their own, and the runtime-board row's `activity` created at runtime
//! (docs/runtime-boards.md), every other shipped board declared.

use std::sync::Arc;

use chrono::Utc;
use standings::domain::config::Config;
use standings::services::runtime_boards::RuntimeBoards;

use crate::harness::{Bench, BenchError};

/// Keys of their own for the runtime board's windows: a catalog of their own.
pub(super) fn runtime_keys(bench: &Bench) -> Result<standings::redis::keys::Keys, BenchError> {
    Ok(standings::redis::keys::Keys::new(&format!("{}:runtime", bench.keys.prefix()))?)
}

/// `activity` as the shipped file declares it, created at runtime under `runtime_keys` (again
/// after the run's cleanup: the same definition is a 200).
pub(super) async fn define_activity(bench: &Bench, without_activity: &Arc<Config>) -> Result<(), BenchError> {
    let file: toml::Value = toml::from_str(standings::domain::config::DEFAULT_CONFIG)?;
    let mut activity = serde_json::to_value(file["boards"][0].clone())?;
    activity.as_object_mut().ok_or("the first shipped board is a table")?.remove("name");
    let boards = RuntimeBoards::new(without_activity.clone(), runtime_keys(bench)?, bench.client()?, 10);
    boards.put("activity", &activity, Utc::now()).await.map_err(|e| e.to_string())?;
    Ok(())
}

/// The shipped boards but `activity` (the first).
pub(super) fn without_activity() -> Result<Config, BenchError> {
    let file = standings::domain::config::DEFAULT_CONFIG;
    let second = file.match_indices("[[boards]]").nth(1).ok_or("the shipped file has two boards")?.0;
    Ok(Config::parse(&file[second..])?)
}

/// The bench's keys with every write journaled.
pub(super) fn journaled(bench: &Bench) -> standings::redis::keys::Keys {
    bench.keys.clone().with_journal(true)
}

/// Keys of their own for the league's windows, so its cohorts are the only league state.
pub(super) fn league_keys(bench: &Bench) -> Result<standings::redis::keys::Keys, BenchError> {
    Ok(standings::redis::keys::Keys::new(&format!("{}:league", bench.keys.prefix()))?)
}

/// Keys of their own recording rank moves (nothing drains them during the run).
pub(super) fn noticed(bench: &Bench, name: &str) -> Result<standings::redis::keys::Keys, BenchError> {
    Ok(standings::redis::keys::Keys::new(&format!("{}:{name}", bench.keys.prefix()))?.with_notices(true))
}

/// The shipped boards with `lines` added to `activity`'s: a league of cohorts of 30 on its day,
/// notifications of its top 10.
pub(super) fn activity_with(lines: &[&str]) -> Result<Config, BenchError> {
    let activity = r#"periods = ["day", "month"]"#;
    Ok(Config::parse(&standings::domain::config::DEFAULT_CONFIG.replacen(activity, &format!("{activity}\n{}", lines.join("\n")), 1))?)
}

pub(super) const LEAGUE: &str =
    r#"league = { period = "day", cohort_size = 30, tiers = ["bronze", "silver", "gold"], promote = 10, demote = 5 }"#;
pub(super) const NOTIFY: &str = "notify = { top = 10 }";
