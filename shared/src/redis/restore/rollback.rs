//! Rollbacks (docs/journal.md#rollbacks): a Redis older than its board's journal (a snapshot
//! restored, a node restarted from an older RDB), seen from the guard's `drained` against the
//! drain's record in S3, fenced at once, and restored onto the keys as they stand.

use crate::domain::guard::{DRAINED, FENCE, LOST, ROLLBACK};
use crate::domain::journal::stream_order;
use crate::redis::error::StoreError;
use crate::redis::journal;
use crate::redis::keys::BoardKeys;
use crate::redis::store::Connection;

pub use crate::domain::journal::CLAIM_ALL;

/// The last journal entry the board's Redis is known to hold the effects of.
pub async fn drained(conn: &mut Connection, keys: &BoardKeys) -> Result<Option<String>, StoreError> {
    Ok(redis::cmd("HGET").arg(keys.guard()).arg(DRAINED).query_async(conn).await?)
}

/// Where the board's Redis stands in its journal, once found rolled back: the last entry whose
/// effects it holds. A restore replays the entries after it.
pub async fn point(conn: &mut Connection, keys: &BoardKeys) -> Result<Option<String>, StoreError> {
    Ok(redis::cmd("HGET").arg(keys.guard()).arg(ROLLBACK).query_async(conn).await?)
}

/// Fences the board when the journal holds entries through `stored` (the drain's record in S3)
/// that its Redis does not: writes and reads answer 503 `board_restoring` from this call on,
/// and the drain counts it lost, until a restore completes. The snapshot's point when it was
/// (or already is): the newest entry its stream holds up to `stored` (its writes not yet
/// drained when it was taken), else what its guard says was drained.
pub async fn fence_if_behind(conn: &mut Connection, keys: &BoardKeys, stored: &str) -> Result<Option<String>, StoreError> {
    if let Some(point) = point(conn, keys).await? {
        return Ok(Some(point));
    }
    let held = drained(conn, keys).await?;
    if !behind(held.as_deref(), stored) {
        return Ok(None);
    }
    let point = journal::newest_through(conn, keys, stored).await?.or(held).unwrap_or_else(|| "0-0".to_owned());
    let _: () = redis::pipe()
        .atomic()
        .hset_nx(keys.guard(), ROLLBACK, &point)
        .hset(keys.guard(), FENCE, 1)
        .hset(keys.guard(), LOST, 1)
        .query_async(conn)
        .await?;
    Ok(Some(point))
}

/// Whether Redis, having drained through `held`, lacks entries the journal stored through
/// `stored`.
pub fn behind(held: Option<&str>, stored: &str) -> bool {
    held.and_then(stream_order) < stream_order(stored)
}

/// Unlinks every key of the board (or shard) but its bookkeeping (the journal, the restore's
/// records, the notices): a board found older than its journal whose guard was lost since is
/// rebuilt whole from the journal, since no key of it can be told intact.
pub async fn wipe(conn: &mut Connection, keys: &BoardKeys) -> Result<(), StoreError> {
    let kept = keys.bookkeeping();
    let found: Vec<String> =
        conn.scan_slot_of(&keys.guard(), &keys.pattern_all()).await?.into_iter().filter(|key| !kept.contains(key)).collect();
    for chunk in found.chunks(500) {
        let _: () = redis::cmd("UNLINK").arg(chunk).query_async(conn).await?;
    }
    Ok(())
}

/// Raises the guard's `drained` to `through`: a completed restore read the journal that far.
pub async fn raise_drained(conn: &mut Connection, keys: &BoardKeys, through: &str) -> Result<(), StoreError> {
    let held = drained(conn, keys).await?;
    if held.as_deref().and_then(stream_order) < stream_order(through) {
        let _: () = redis::cmd("HSET").arg(keys.guard()).arg(DRAINED).arg(through).query_async(conn).await?;
    }
    Ok(())
}
