//! Rollbacks (docs/journal.md#rollbacks): a Redis older than its board's journal (a snapshot
//! restored, a node restarted from an older RDB), seen from the guard's `drained` against the
//! drain's record in S3, fenced at once, and restored onto the keys as they stand.

use std::collections::HashMap;

use crate::domain::guard::{DRAINED, FENCE, LOST, ROLLBACK};
use crate::domain::journal::stream_order;
use crate::redis::error::StoreError;
use crate::redis::journal;
use crate::redis::keys::BoardKeys;
use crate::redis::store::Connection;

pub use crate::domain::journal::CLAIM_ALL;

/// The point of a board found older than its journal whose snapshot's point cannot be told: a
/// restore rebuilds it whole.
pub const UNKNOWN: &str = "";

/// The last journal entry the board's Redis is known to hold the effects of.
pub async fn drained(conn: &mut Connection, keys: &BoardKeys) -> Result<Option<String>, StoreError> {
    Ok(redis::cmd("HGET").arg(keys.guard()).arg(DRAINED).query_async(conn).await?)
}

/// Where the board's Redis stands in its journal, once found rolled back: the last entry whose
/// effects it holds (`UNKNOWN`: rebuilt whole). A restore replays the entries after it.
pub async fn point(conn: &mut Connection, keys: &BoardKeys) -> Result<Option<String>, StoreError> {
    Ok(redis::cmd("HGET").arg(keys.guard()).arg(ROLLBACK).query_async(conn).await?)
}

/// Forgets where the board's snapshot stands (`UNKNOWN`): from now on a restore rebuilds it
/// whole, whenever it is stopped.
pub async fn forget_point(conn: &mut Connection, keys: &BoardKeys) -> Result<(), StoreError> {
    let _: () = redis::cmd("HSET").arg(keys.guard()).arg(ROLLBACK).arg(UNKNOWN).query_async(conn).await?;
    Ok(())
}

/// What `check` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Not older than the journal: what its guard says was drained.
    Current(Option<String>),
    /// Older than the journal, and fenced: the snapshot's point.
    Behind(String),
}

/// Fences the board when the journal holds entries through `stored` (the drain's record in S3,
/// or an object found stored) that its Redis does not: writes and reads answer 503
/// `board_restoring` from this call on, and the drain counts it lost, until a restore
/// completes.
pub async fn check(conn: &mut Connection, keys: &BoardKeys, stored: &str) -> Result<Found, StoreError> {
    if let Some(point) = point(conn, keys).await? {
        return Ok(Found::Behind(point));
    }
    let held = drained(conn, keys).await?;
    if !behind(held.as_deref(), stored) {
        return Ok(Found::Current(held));
    }
    let point = snapshot_point(conn, keys, held, stored).await?.unwrap_or_else(|| UNKNOWN.to_owned());
    let _: () = redis::pipe()
        .atomic()
        .hset_nx(keys.guard(), ROLLBACK, &point)
        .hset(keys.guard(), FENCE, 1)
        .hset(keys.guard(), LOST, 1)
        .query_async(conn)
        .await?;
    Ok(Found::Behind(point))
}

/// The last entry whose effects the snapshot holds: the last id its stream generated when no
/// write came since (it is then at most `stored`); else the newest entry its stream holds up to
/// `stored`, or what its guard says was drained, whichever is later; `None` when nothing says
/// (no stream: a restore brings a board back without one, so only `drained` can say).
async fn snapshot_point(conn: &mut Connection, keys: &BoardKeys, held: Option<String>, stored: &str) -> Result<Option<String>, StoreError> {
    let exists: bool = redis::cmd("EXISTS").arg(keys.journal()).query_async(conn).await?;
    if !exists {
        return Ok(held);
    }
    let info: HashMap<String, redis::Value> = redis::cmd("XINFO").arg("STREAM").arg(keys.journal()).query_async(conn).await?;
    let generated: Option<String> = info.get("last-generated-id").and_then(|id| redis::from_redis_value(id.clone()).ok());
    if let Some(generated) = generated.filter(|id| !behind(Some(stored), id)) {
        return Ok(Some(generated));
    }
    let newest = journal::newest_through(conn, keys, stored).await?;
    Ok([newest, held].into_iter().flatten().max_by_key(|id| stream_order(id)))
}

/// Whether Redis, having drained through `held`, lacks entries the journal stored through
/// `stored`.
pub fn behind(held: Option<&str>, stored: &str) -> bool {
    held.and_then(stream_order) < stream_order(stored)
}

/// Records the window of entries to decide again (`BoardKeys::restore_redecide`), or raises its
/// end to `through` when that is later: a window being decided whose guard a loss took since
/// holds the new decisions and live writes after it, which the rebuild's wipe takes too, so
/// they are decided again with it. A resumed restore keeps its window (it does not ask again).
/// Under the restore's lock.
pub async fn mark_redecide(conn: &mut Connection, keys: &BoardKeys, after: &str, through: &str) -> Result<(), StoreError> {
    let window = redecide(conn, keys).await?;
    let (after, kept) = match &window {
        Some((after, kept)) => (after.as_str(), Some(kept.as_str())),
        None => (after, None),
    };
    if kept.is_none_or(|kept| stream_order(through) > stream_order(kept)) {
        let _: () = redis::cmd("SET").arg(keys.restore_redecide()).arg(format!("{after}|{through}")).query_async(conn).await?;
    }
    Ok(())
}

/// The window of entries still to decide again: after the first id, through the second.
pub async fn redecide(conn: &mut Connection, keys: &BoardKeys) -> Result<Option<(String, String)>, StoreError> {
    let window: Option<String> = redis::cmd("GET").arg(keys.restore_redecide()).query_async(conn).await?;
    Ok(window.and_then(|window| window.split_once('|').map(|(after, through)| (after.to_owned(), through.to_owned()))))
}

/// Every entry of the window decided again: the board drains as any other from now on.
pub async fn redecided(conn: &mut Connection, keys: &BoardKeys) -> Result<(), StoreError> {
    let _: () = redis::cmd("DEL").arg(keys.restore_redecide()).query_async(conn).await?;
    Ok(())
}

/// Raises the guard's `drained` to `through`: a completed restore read the journal that far.
pub async fn raise_drained(conn: &mut Connection, keys: &BoardKeys, through: &str) -> Result<(), StoreError> {
    if behind(drained(conn, keys).await?.as_deref(), through) {
        let _: () = redis::cmd("HSET").arg(keys.guard()).arg(DRAINED).arg(through).query_async(conn).await?;
    }
    Ok(())
}

/// Unlinks every key of the board (or shard) a rebuild from its journal brings back
/// (`BoardKeys::kept_by_rebuild`): a board found older than its journal whose snapshot's point
/// is unknown, or whose guard (and the point) was lost since, has no key that can be told
/// intact.
/// The guard goes last, so a wipe that fails part-way is found rolled back, and wiped, again;
/// its seasons' closes (`closed|…`, not journaled: a freeze's) stay, as the frozen sets do.
pub async fn wipe(conn: &mut Connection, keys: &BoardKeys) -> Result<(), StoreError> {
    let guard = keys.guard();
    let found: Vec<String> = conn
        .scan_slot_of(&guard, &keys.pattern_all())
        .await?
        .into_iter()
        .filter(|key| !keys.kept_by_rebuild(key) && *key != guard)
        .collect();
    for chunk in found.chunks(500) {
        let _: () = redis::cmd("UNLINK").arg(chunk).query_async(conn).await?;
    }
    let fields: HashMap<String, String> = redis::cmd("HGETALL").arg(&guard).query_async(conn).await?;
    let closed: Vec<(&String, &String)> = fields.iter().filter(|(field, _)| field.starts_with(crate::domain::guard::CLOSED)).collect();
    let mut pipe = redis::pipe();
    pipe.atomic().del(&guard);
    if !closed.is_empty() {
        pipe.hset_multiple(&guard, &closed);
    }
    let _: () = pipe.query_async(conn).await?;
    Ok(())
}
