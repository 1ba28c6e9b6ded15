//! The typed wrappers of `join_tournament.lua` (a seat in a tournament's instance, exact under
//! concurrent joins), `grant_attempts.lua` and `release_instance.lua`, each journaled in the same
//! call (docs/tournaments.md).

use super::{EVENT_MARKER_TTL_SECS, GRANT_ATTEMPTS, JOIN_TOURNAMENT, PRUNE_INSTANCES, RELEASE_INSTANCE};
use crate::domain::guard::{closed_field, emptied_field, live_field};
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

/// Frees ended instance `instance` once its results are stored: its live board, players and
/// attempts, keeping its size for `ttl_secs` ("0": no TTL); `entry`: the journal entry (''
/// journals nothing). Whether it freed anything (a run again finds nothing left).
pub async fn release(
    conn: &mut Connection,
    keys: &BoardKeys,
    instance: &Period,
    ttl_secs: &str,
    entry: &str,
    wait: ReplicaWait,
) -> Result<bool, StoreError> {
    let mut call = ScriptCall::new(&RELEASE_INSTANCE);
    call.key(keys.guard())
        .key(keys.period(instance))
        .key(keys.players(instance))
        .key(keys.entries(instance))
        .key(keys.final_size(instance))
        .key(keys.journal());
    call.arg(closed_field(instance)).arg(live_field(instance)).arg(emptied_field(instance)).arg(ttl_secs).arg(entry);
    let freed: u8 = conn.run_script(&call, wait).await?;
    Ok(freed == 1)
}

/// Forgets the guard's `closed` fields of ended instances (`prune_instances.lua`) and marks the
/// prune's place (`guard::PRUNED`) at `through_ms`; `entry`: the journal entry ('' journals
/// nothing). How many fields it removed; `None` when the journaled board is lost or fenced
/// (nothing written).
pub async fn prune(
    conn: &mut Connection,
    keys: &BoardKeys,
    closed_fields: &[String],
    through_ms: i64,
    entry: &str,
    wait: ReplicaWait,
) -> Result<Option<u64>, StoreError> {
    let mut call = ScriptCall::new(&PRUNE_INSTANCES);
    call.key(keys.guard()).key(keys.journal());
    call.arg(entry).arg(crate::domain::guard::PRUNED).arg(through_ms);
    for field in closed_fields {
        call.arg(field);
    }
    let removed: i64 = conn.run_script(&call, wait).await?;
    Ok(u64::try_from(removed).ok())
}

/// What a grant of attempts did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granted {
    /// Granted now (`false`) or by the first call with this grant id (`true`): the player's
    /// submissions counted against the limit after it (below 0 when more were given than used).
    Counted {
        count: i64,
        duplicate: bool,
    },
    /// The grant id was used with another payload.
    Conflict,
    Banned,
    /// The instance was ended early or frozen for its results.
    Closed,
}

/// One grant, as `grant_attempts.lua` takes it.
pub struct Grant<'a> {
    pub member: &'a str,
    pub add: u32,
    /// `Some((grant id, payload fingerprint))`: a retry with the id answers the first call's.
    pub marker: Option<(&'a str, &'a str)>,
    /// The audit entry, also the journal line.
    pub audit: &'a str,
    pub audit_keep: usize,
    pub ttl_secs: &'a str,
    pub now: chrono::DateTime<chrono::Utc>,
}

/// Grants `grant.add` attempts in `instance`, audited and journaled (when `journaled`).
pub async fn grant(
    conn: &mut Connection,
    keys: &BoardKeys,
    instance: &Period,
    grant: &Grant<'_>,
    journaled: bool,
    wait: ReplicaWait,
) -> Result<Granted, StoreError> {
    let mut call = ScriptCall::new(&GRANT_ATTEMPTS);
    let (grant_id, fingerprint) = grant.marker.unwrap_or(("-", ""));
    call.key(keys.guard()).key(keys.entries(instance)).key(keys.audit()).key(keys.grant(grant_id)).key(keys.journal());
    call.arg(grant.member).arg(grant.add).arg(instance.kind.as_str()).arg(&instance.id).arg(grant.ttl_secs);
    call.arg(grant.audit).arg(grant.audit_keep).arg(fingerprint).arg(keys.ttl(EVENT_MARKER_TTL_SECS as i64, grant.now));
    call.arg(if journaled { 1 } else { 0 });
    let (status, count): (String, i64) = conn.run_script(&call, wait).await?;
    Ok(match status.as_str() {
        "granted" => Granted::Counted { count, duplicate: false },
        "duplicate" => Granted::Counted { count, duplicate: true },
        "conflict" => Granted::Conflict,
        "banned" => Granted::Banned,
        "closed" => Granted::Closed,
        other => return Err(StoreError::Protocol(format!("grant_attempts answered {other:?}"))),
    })
}
