//! A board's notices as the drain sees them (docs/notifications.md): the stream of rank moves
//! the write scripts record (prelude.lua's `record_moves`), and the crossings a quiet time holds
//! back. Entries are trimmed only with the state that replaces them, in one transaction.

use std::collections::BTreeMap;

use redis::AsyncCommands;
use redis::streams::StreamRangeReply;

use crate::domain::journal::{next_stream_id, stream_id_ms};
use crate::domain::notify::Window;
use crate::redis::error::StoreError;
use crate::redis::keys::BoardKeys;
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
pub async fn lock(conn: &mut Connection, keys: &BoardKeys, token: &str, lease_ms: u64) -> Result<bool, StoreError> {
    let set: Option<String> =
        redis::cmd("SET").arg(keys.notices_lock()).arg(token).arg("NX").arg("PX").arg(lease_ms).query_async(conn).await?;
    Ok(set.is_some())
}

/// Releases the lock if this drain (`token`) still holds it.
pub async fn unlock(conn: &mut Connection, keys: &BoardKeys, token: &str) -> Result<(), StoreError> {
    let key = keys.notices_lock();
    let held: Option<String> = conn.get(&key).await?;
    if held.as_deref() == Some(token) {
        let _: () = conn.del(&key).await?;
    }
    Ok(())
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
/// trims the stream through `through` (delivered or merged), atomically.
pub async fn commit(
    conn: &mut Connection,
    keys: &BoardKeys,
    through: Option<&str>,
    was: &BTreeMap<String, Vec<Window>>,
    now: &BTreeMap<String, Vec<Window>>,
) -> Result<(), StoreError> {
    let key = keys.notices_quiet();
    let mut pipe = redis::pipe();
    pipe.atomic();
    for user in was.keys().filter(|user| !now.contains_key(*user)) {
        pipe.hdel(&key, user).ignore();
    }
    for (user, windows) in now.iter().filter(|(user, windows)| was.get(*user) != Some(windows)) {
        let json = serde_json::to_string(windows).expect("windows serialize");
        pipe.hset(&key, user, json).ignore();
    }
    if let Some(through) = through {
        let next = next_stream_id(through).ok_or_else(|| StoreError::Protocol(format!("notices: stream id {through:?}")))?;
        pipe.cmd("XTRIM").arg(keys.notices()).arg("MINID").arg(next).ignore();
    }
    let _: () = pipe.query_async(conn).await?;
    Ok(())
}
