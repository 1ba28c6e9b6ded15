//! A board's journal stream as the drain sees it (docs/journal.md): read from the oldest entry,
//! trimmed only through what is stored elsewhere. Only the write scripts append to it
//! (`journal` in prelude.lua), in the call that applies the write.

use redis::AsyncCommands;
use redis::streams::{StreamRangeReply, StreamTrimOptions, StreamTrimmingMode};

use crate::domain::journal::{Line, next_stream_id, stream_id_ms};
use crate::redis::error::StoreError;
use crate::redis::keys::BoardKeys;
use crate::redis::store::Connection;

/// The oldest `count` entries of a board's journal, oldest first, as lines of board `board`.
pub async fn oldest(conn: &mut Connection, keys: &BoardKeys, board: &str, count: usize) -> Result<Vec<Line>, StoreError> {
    let reply: StreamRangeReply = conn.xrange_count(keys.journal(), "-", "+", count).await?;
    Ok(reply
        .ids
        .iter()
        .map(|entry| {
            let field = |name: &str| entry.get::<String>(name).unwrap_or_default();
            Line::new(&entry.id, board, &field("e"), &field("o"))
        })
        .collect())
}

/// Milliseconds (Redis's clock) of the oldest entry not yet drained, if any.
pub async fn oldest_ms(conn: &mut Connection, keys: &BoardKeys) -> Result<Option<i64>, StoreError> {
    let reply: StreamRangeReply = conn.xrange_count(keys.journal(), "-", "+", 1).await?;
    Ok(reply.ids.first().and_then(|entry| stream_id_ms(&entry.id)))
}

/// Removes every entry up to and including `through`, which must be stored durably elsewhere.
/// Returns how many went.
pub async fn trim_through(conn: &mut Connection, keys: &BoardKeys, through: &str) -> Result<usize, StoreError> {
    let next = next_stream_id(through).ok_or_else(|| StoreError::Protocol(format!("journal: stream id {through:?}")))?;
    Ok(conn.xtrim_options(keys.journal(), &StreamTrimOptions::minid(StreamTrimmingMode::Exact, next)).await?)
}

/// Entries in a board's journal (tests, operators).
pub async fn len(conn: &mut Connection, keys: &BoardKeys) -> Result<usize, StoreError> {
    Ok(conn.xlen(keys.journal()).await?)
}

/// Where a restore of the board stands: the object and line to go on from, if one is under way.
pub async fn restore_checkpoint(conn: &mut Connection, keys: &BoardKeys) -> Result<Option<(String, usize)>, StoreError> {
    let (object, line): (Option<String>, Option<usize>) =
        redis::cmd("HMGET").arg(keys.restore_checkpoint()).arg("object").arg("line").query_async(conn).await?;
    Ok(object.zip(line))
}

pub async fn save_restore_checkpoint(conn: &mut Connection, keys: &BoardKeys, object: &str, line: usize) -> Result<(), StoreError> {
    let _: () = conn.hset_multiple(keys.restore_checkpoint(), &[("object", object.to_owned()), ("line", line.to_string())]).await?;
    Ok(())
}

pub async fn clear_restore_checkpoint(conn: &mut Connection, keys: &BoardKeys) -> Result<(), StoreError> {
    let _: () = conn.del(keys.restore_checkpoint()).await?;
    Ok(())
}

/// Whether any of the board's `periods` has members.
pub async fn any_members(conn: &mut Connection, keys: &BoardKeys, periods: &[crate::domain::period::Period]) -> Result<bool, StoreError> {
    for period in periods {
        let members: u64 = conn.zcard(keys.period(period)).await?;
        if members > 0 {
            return Ok(true);
        }
    }
    Ok(false)
}
