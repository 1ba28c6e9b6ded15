//! A board's notices as the drain sees them (docs/notifications.md): the stream of rank moves
//! the write scripts record (prelude.lua's `record_moves`), and the crossings a quiet time holds
//! back. Entries are trimmed only with the state that replaces them, in one script call that
//! first checks the drain still holds the board's lease.

use std::collections::BTreeMap;

use redis::AsyncCommands;
use redis::streams::StreamRangeReply;

use crate::domain::journal::{next_stream_id, stream_id_ms};
use crate::domain::notify::Window;
use crate::redis::error::StoreError;
use crate::redis::keys::BoardKeys;
use crate::redis::scripts;
use crate::redis::store::Connection;

/// One entry: the moves of one applied write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// Its stream id (the write's time in ms, Redis's clock, and a sequence).
    pub id: String,
    /// The write's id ("" for a ban).
    pub write_id: String,
    /// Its moves, one per line (`domain::notify::Move`).
    pub moves: String,
}

impl Notice {
    pub fn at_ms(&self) -> i64 {
        stream_id_ms(&self.id).unwrap_or(0)
    }
}

/// The oldest `count` entries, oldest first.
pub async fn oldest(conn: &mut Connection, keys: &BoardKeys, count: usize) -> Result<Vec<Notice>, StoreError> {
    let reply: StreamRangeReply = conn.xrange_count(keys.notices(), "-", "+", count).await?;
    Ok(reply
        .ids
        .iter()
        .map(|entry| Notice {
            id: entry.id.clone(),
            write_id: entry.get::<String>("e").unwrap_or_default(),
            moves: entry.get::<String>("m").unwrap_or_default(),
        })
        .collect())
}

/// Milliseconds (Redis's clock) of the oldest entry not yet delivered, if any.
pub async fn oldest_ms(conn: &mut Connection, keys: &BoardKeys) -> Result<Option<i64>, StoreError> {
    let reply: StreamRangeReply = conn.xrange_count(keys.notices(), "-", "+", 1).await?;
    Ok(reply.ids.first().and_then(|entry| stream_id_ms(&entry.id)))
}

/// Entries not yet delivered (tests, operators).
pub async fn len(conn: &mut Connection, keys: &BoardKeys) -> Result<usize, StoreError> {
    Ok(conn.xlen(keys.notices()).await?)
}

/// Redis's clock in ms: the stream ids' clock, which quiet times are measured on.
pub async fn now_ms(conn: &mut Connection) -> Result<i64, StoreError> {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await?;
    Ok(secs * 1000 + micros / 1000)
}

/// Takes the board's drain lock for `lease_ms` unless another drain holds it; `token` names
/// this drain, so only it releases the lock.
/// Sent again after a lost reply, it finds its own token and holds the lock.
pub async fn lock(conn: &mut Connection, keys: &BoardKeys, token: &str, lease_ms: u64) -> Result<bool, StoreError> {
    let held: u8 = scripts::NOTICES_LEASE.key(keys.notices_lock()).arg(token).arg("take").arg(lease_ms).invoke_async(conn).await?;
    Ok(held == 1)
}

/// Renews the lease of this drain (`token`) for `lease_ms` from now; false when it is not this
/// drain's any more (it ran out, and another drain may hold it).
pub async fn renew(conn: &mut Connection, keys: &BoardKeys, token: &str, lease_ms: u64) -> Result<bool, StoreError> {
    let held: u8 = scripts::NOTICES_LEASE.key(keys.notices_lock()).arg(token).arg("renew").arg(lease_ms).invoke_async(conn).await?;
    Ok(held == 1)
}

/// Releases the lock if this drain (`token`) still holds it, in one step (compare and delete).
pub async fn unlock(conn: &mut Connection, keys: &BoardKeys, token: &str) -> Result<(), StoreError> {
    let _: u8 = scripts::NOTICES_LEASE.key(keys.notices_lock()).arg(token).arg("release").arg(0).invoke_async(conn).await?;
    Ok(())
}

/// Moves the stream dropped (it holds at most `NOTICES_MAX_LEN`) since the drain last asked.
pub async fn dropped(conn: &mut Connection, keys: &BoardKeys) -> Result<u64, StoreError> {
    Ok(scripts::NOTICES_DROPPED.key(keys.notices()).key(keys.notices_count()).invoke_async(conn).await?)
}

/// The windows a quiet time holds, per user.
pub async fn held(conn: &mut Connection, keys: &BoardKeys) -> Result<BTreeMap<String, Vec<Window>>, StoreError> {
    let raw: BTreeMap<String, String> = conn.hgetall(keys.notices_quiet()).await?;
    raw.into_iter()
        .map(|(user, json)| {
            let windows = serde_json::from_str(&json).map_err(|e| StoreError::Protocol(format!("notices: held windows of {user}: {e}")))?;
            Ok((user, windows))
        })
        .collect()
}

/// Replaces the held windows of every user whose windows changed from `was` to `now`, and
/// trims the stream through `through` (delivered or merged), atomically, if this drain
/// (`token`) still holds the board's lease; false (nothing written) when it does not.
pub async fn commit(
    conn: &mut Connection,
    keys: &BoardKeys,
    token: &str,
    through: Option<&str>,
    was: &BTreeMap<String, Vec<Window>>,
    now: &BTreeMap<String, Vec<Window>>,
) -> Result<bool, StoreError> {
    let mut call = scripts::NOTICES_COMMIT.key(keys.notices_lock());
    call.key(keys.notices_quiet()).key(keys.notices()).key(keys.notices_count()).arg(token);
    match through {
        Some(through) => {
            let next = next_stream_id(through).ok_or_else(|| StoreError::Protocol(format!("notices: stream id {through:?}")))?;
            call.arg(next)
        }
        None => call.arg(""),
    };
    for user in was.keys().filter(|user| !now.contains_key(*user)) {
        call.arg(user).arg("");
    }
    for (user, windows) in now.iter().filter(|(user, windows)| was.get(*user) != Some(windows)) {
        call.arg(user).arg(serde_json::to_string(windows).expect("windows serialize"));
    }
    let committed: u8 = call.invoke_async(conn).await?;
    Ok(committed == 1)
}
