//! The typed wrapper of `join_tournament.lua`: a seat in a tournament's instance, exact under
//! concurrent joins, journaled in the same call (docs/tournaments.md).

use super::JOIN_TOURNAMENT;
use crate::domain::period::Period;
use crate::redis::error::StoreError;
use crate::redis::keys::BoardKeys;
use crate::redis::settings::ReplicaWait;
use crate::redis::store::{Connection, ScriptCall};

/// What a join did; each with the instance's players now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joined {
    Now(u64),
    Already(u64),
    Full(u64),
    Banned,
    /// The instance was ended early or frozen for its results.
    Closed,
}

/// A join of `instance`'s seats by `member`. `ttl_secs`: how long the players are kept ("0":
/// no TTL); `entry`: the journal entry ('' journals nothing).
#[allow(clippy::too_many_arguments)]
pub async fn join(
    conn: &mut Connection,
    keys: &BoardKeys,
    instance: &Period,
    member: &str,
    max_size: Option<u32>,
    ttl_secs: &str,
    entry: &str,
    wait: ReplicaWait,
) -> Result<Joined, StoreError> {
    let mut call = ScriptCall::new(&JOIN_TOURNAMENT);
    call.key(keys.guard()).key(keys.players(instance)).key(keys.journal());
    call.arg(member).arg(max_size.unwrap_or(0)).arg(instance.kind.as_str()).arg(&instance.id).arg(ttl_secs).arg(entry);
    let (status, size): (String, u64) = conn.run_script(&call, wait).await?;
    Ok(match status.as_str() {
        "joined" => Joined::Now(size),
        "member" => Joined::Already(size),
        "full" => Joined::Full(size),
        "banned" => Joined::Banned,
        "closed" => Joined::Closed,
        other => return Err(StoreError::Protocol(format!("join_tournament answered {other:?}"))),
    })
}
