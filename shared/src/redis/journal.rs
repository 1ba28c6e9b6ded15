//! A board's journal stream as the drain sees it (docs/journal.md): read from the oldest entry,
//! trimmed only through what is stored elsewhere. Only the write scripts append to it
//! (`journal` in prelude.lua), in the call that applies the write.

use redis::AsyncCommands;
use redis::streams::StreamRangeReply;

use crate::domain::journal::{Line, next_stream_id, stream_id_ms};
use crate::redis::error::StoreError;
use crate::redis::keys::BoardKeys;
use crate::redis::store::Connection;

/// The oldest `count` entries of a board's journal, oldest first, as lines of board `board`.
pub async fn oldest(conn: &mut Connection, keys: &BoardKeys, board: &str, count: usize) -> Result<Vec<Line>, StoreError> {
    after(conn, keys, board, None, count).await
}

/// Up to `count` entries after stream id `after` (from the oldest when `None`), oldest first.
pub async fn after(
    conn: &mut Connection,
    keys: &BoardKeys,
    board: &str,
    after: Option<&str>,
    count: usize,
) -> Result<Vec<Line>, StoreError> {
    after_until(conn, keys, board, after, "+", count).await
}

/// `after`, up to and including the entry `until` (`+`: the newest).
pub async fn after_until(
    conn: &mut Connection,
    keys: &BoardKeys,
    board: &str,
    after: Option<&str>,
    until: &str,
    count: usize,
) -> Result<Vec<Line>, StoreError> {
    Ok(read(conn, (keys, board), (after, until, count), false).await?.1)
}

/// `after_until`, with the id of the stream's oldest entry read in the same transaction: the
/// page is every entry after `after` (up to `count`) only when that oldest is at or before
/// `after`, or is known to follow it directly (the drain trims from the oldest, after storing).
pub async fn page_with_oldest(
    conn: &mut Connection,
    (keys, board): (&BoardKeys, &str),
    (after, until, count): (Option<&str>, &str, usize),
) -> Result<(Option<String>, Vec<Line>), StoreError> {
    read(conn, (keys, board), (after, until, count), true).await
}

async fn read(
    conn: &mut Connection,
    (keys, board): (&BoardKeys, &str),
    (after, until, count): (Option<&str>, &str, usize),
    with_oldest: bool,
) -> Result<(Option<String>, Vec<Line>), StoreError> {
    let start = after.map_or_else(|| "-".to_owned(), |id| format!("({id}"));
    let (oldest, page) = match with_oldest {
        true => {
            let mut pipe = redis::pipe();
            pipe.atomic().xrange_count(keys.journal(), "-", "+", 1).xrange_count(keys.journal(), start, until, count);
            let (oldest, page): (StreamRangeReply, StreamRangeReply) = pipe.query_async(conn).await?;
            (oldest.ids.first().map(|entry| entry.id.clone()), page)
        }
        false => (None, conn.xrange_count(keys.journal(), start, until, count).await?),
    };
    let lines = page
        .ids
        .iter()
        .map(|entry| {
            let field = |name: &str| entry.get::<String>(name).unwrap_or_default();
            Line::new(&entry.id, board, &field("e"), &field("o")).with_effects(&entry.get::<Vec<u8>>("x").unwrap_or_default())
        })
        .collect();
    Ok((oldest, lines))
}

/// Milliseconds (Redis's clock) of the oldest entry not yet drained, if any.
pub async fn oldest_ms(conn: &mut Connection, keys: &BoardKeys) -> Result<Option<i64>, StoreError> {
    let reply: StreamRangeReply = conn.xrange_count(keys.journal(), "-", "+", 1).await?;
    Ok(reply.ids.first().and_then(|entry| stream_id_ms(&entry.id)))
}

/// Removes every entry up to and including `through`, which must be stored durably elsewhere,
/// and records it in the guard (`guarded`; docs/journal.md#rollbacks).
/// Returns how many went, or `None` when a restore of the board holds its lock (nothing went).
/// `packed_after_ms`: how long after its first trim the board's writes record compact text
/// before packed (`guard::PACKED_AFTER_MS`; trim_journal.lua).
pub async fn trim_through(
    conn: &mut Connection,
    keys: &BoardKeys,
    through: &str,
    guarded: bool,
    packed_after_ms: i64,
) -> Result<Option<usize>, StoreError> {
    let next = next_stream_id(through).ok_or_else(|| StoreError::Protocol(format!("journal: stream id {through:?}")))?;
    let mut call = crate::redis::scripts::TRIM_JOURNAL.key(keys.journal());
    call.key(keys.restore_lock());
    if guarded {
        call.key(keys.guard());
    }
    let trimmed: i64 = call.arg(next).arg(through).arg(packed_after_ms).invoke_async(conn).await?;
    Ok(usize::try_from(trimmed).ok())
}

/// Whether the stream holds the entry `id`.
pub async fn holds(conn: &mut Connection, keys: &BoardKeys, id: &str) -> Result<bool, StoreError> {
    let reply: StreamRangeReply = conn.xrange_count(keys.journal(), id, id, 1).await?;
    Ok(!reply.ids.is_empty())
}

/// The newest entry up to and including `through`, if the stream holds one.
pub async fn newest_through(conn: &mut Connection, keys: &BoardKeys, through: &str) -> Result<Option<String>, StoreError> {
    let reply: StreamRangeReply = conn.xrevrange_count(keys.journal(), through, "-", 1).await?;
    Ok(reply.ids.first().map(|entry| entry.id.clone()))
}

/// Appends `entry` to a journal outside the write scripts (the profiles' journal, which no
/// script's keys share a slot with).
pub async fn append(conn: &mut Connection, keys: &BoardKeys, entry: &str, outcome: &str) -> Result<(), StoreError> {
    let _: String = conn.xadd(keys.journal(), "*", &[("e", entry), ("o", outcome)]).await?;
    Ok(())
}

/// Appends `lines` under their own ids, oldest first (a rollback's window put back from S3 into
/// a stream a loss took, `services::journal::windows`): each must follow the stream's last id.
pub async fn put_back(conn: &mut Connection, keys: &BoardKeys, lines: &[Line]) -> Result<(), StoreError> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    for line in lines {
        let entry = serde_json::to_string(&line.entry).expect("a line's entry serializes");
        let command = pipe.cmd("XADD").arg(keys.journal()).arg(&line.id).arg("e").arg(entry).arg("o").arg(&line.outcome);
        if let Some(effects) = &line.effects {
            command.arg("x").arg(effects.to_string());
        }
        command.ignore();
    }
    let () = pipe.query_async(conn).await?;
    Ok(())
}

/// The last id the stream generated, whether or not it still holds that entry (none: no stream).
pub async fn last_generated(conn: &mut Connection, keys: &BoardKeys) -> Result<Option<String>, StoreError> {
    if !conn.exists::<_, bool>(keys.journal()).await? {
        return Ok(None);
    }
    let info: redis::streams::StreamInfoStreamReply = conn.xinfo_stream(keys.journal()).await?;
    Ok(Some(info.last_generated_id))
}

/// Removes entry `id` (a write decided again, whose new decision is journaled: see
/// `services::journal::restore`).
pub async fn remove(conn: &mut Connection, keys: &BoardKeys, id: &str) -> Result<(), StoreError> {
    let _: u64 = conn.xdel(keys.journal(), &[id]).await?;
    Ok(())
}

/// Removes every entry after `after` through `through` (`after_until`'s range), a page at a time.
pub async fn remove_range(conn: &mut Connection, keys: &BoardKeys, board: &str, after: &str, through: &str) -> Result<(), StoreError> {
    loop {
        let page = after_until(conn, keys, board, Some(after), through, 500).await?;
        if page.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = page.iter().map(|line| line.id.as_str()).collect();
        let _: u64 = conn.xdel(keys.journal(), &ids).await?;
    }
}

/// Entries in a board's journal (tests, operators).
pub async fn len(conn: &mut Connection, keys: &BoardKeys) -> Result<usize, StoreError> {
    Ok(conn.xlen(keys.journal()).await?)
}

/// Where a restore of a board stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checkpoint {
    /// None under way.
    Fresh,
    /// Go on from this object's line.
    At(String, usize),
    /// Completed (in the last `RESTORED_MARK_SECS`).
    Done,
}

/// How long a completed restore is remembered: a later `{"restore": {}}` of every board skips it.
const RESTORED_MARK_SECS: i64 = 24 * 3600;

pub async fn restore_checkpoint(conn: &mut Connection, keys: &BoardKeys) -> Result<Checkpoint, StoreError> {
    let (object, line, done): (Option<String>, Option<usize>, Option<String>) =
        redis::cmd("HMGET").arg(keys.restore_checkpoint()).arg("object").arg("line").arg("done").query_async(conn).await?;
    Ok(match (object.zip(line), done) {
        (_, Some(_)) => Checkpoint::Done,
        (Some((object, line)), None) => Checkpoint::At(object, line),
        (None, None) => Checkpoint::Fresh,
    })
}

/// Marks the board's restore complete (for `RESTORED_MARK_SECS`).
pub async fn finish_restore(conn: &mut Connection, keys: &BoardKeys) -> Result<(), StoreError> {
    let key = keys.restore_checkpoint();
    let _: () = redis::pipe().atomic().del(&key).hset(&key, "done", 1).expire(&key, RESTORED_MARK_SECS).query_async(conn).await?;
    Ok(())
}

/// Takes the board's restore lock for `lease_ms` unless another restore holds it.
pub async fn lock_restore(conn: &mut Connection, keys: &BoardKeys, lease_ms: u64) -> Result<bool, StoreError> {
    let set: Option<String> = redis::cmd("SET").arg(keys.restore_lock()).arg(1).arg("NX").arg("PX").arg(lease_ms).query_async(conn).await?;
    Ok(set.is_some())
}

pub async fn unlock_restore(conn: &mut Connection, keys: &BoardKeys) -> Result<(), StoreError> {
    let _: () = conn.del(keys.restore_lock()).await?;
    Ok(())
}

/// Records that the board's restore goes on from `object`'s `line` (no longer done, if it was).
pub async fn save_restore_checkpoint(conn: &mut Connection, keys: &BoardKeys, object: &str, line: usize) -> Result<(), StoreError> {
    let key = keys.restore_checkpoint();
    let fields = [("object", object.to_owned()), ("line", line.to_string())];
    let _: () = redis::pipe().atomic().hdel(&key, "done").hset_multiple(&key, &fields).persist(&key).query_async(conn).await?;
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

/// Every member of a period's board with its composite, best first.
pub async fn members(
    conn: &mut Connection,
    keys: &BoardKeys,
    period: &crate::domain::period::Period,
) -> Result<Vec<(String, f64)>, StoreError> {
    Ok(conn.zrevrange_withscores(keys.period(period), 0, -1).await?)
}

/// Where the board's journal stands now (journal_point.lua): every entry written so far is at
/// most this id, every later one greater.
pub async fn point(conn: &mut Connection, keys: &BoardKeys) -> Result<String, StoreError> {
    Ok(crate::redis::scripts::JOURNAL_POINT.key(keys.journal()).invoke_async(conn).await?)
}

/// The newest journal entry's stream id (`None`: the stream is empty).
pub async fn newest_id(conn: &mut Connection, keys: &BoardKeys) -> Result<Option<String>, StoreError> {
    let reply: StreamRangeReply = conn.xrevrange_count(keys.journal(), "+", "-", 1).await?;
    Ok(reply.ids.first().map(|entry| entry.id.clone()))
}

/// The members of each of `periods`, best first, and the newest journal entry's id, read at
/// one instant (`MULTI`, one slot): a consistent cut, since every write is journaled in its own
/// call — the members are exactly what the journal says up to that entry.
pub async fn members_at_cut(
    conn: &mut Connection,
    keys: &BoardKeys,
    periods: &[crate::domain::period::Period],
) -> Result<(Vec<Vec<(String, f64)>>, Option<String>), StoreError> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    for period in periods {
        pipe.zrevrange_withscores(keys.period(period), 0, -1);
    }
    pipe.cmd("XREVRANGE").arg(keys.journal()).arg("+").arg("-").arg("COUNT").arg(1);
    let mut replies: Vec<redis::Value> = pipe.query_async(conn).await?;
    let newest: StreamRangeReply = redis::FromRedisValue::from_redis_value(replies.pop().unwrap_or(redis::Value::Nil))
        .map_err(|e| StoreError::Protocol(format!("journal: newest entry: {e}")))?;
    let members = replies
        .into_iter()
        .map(|reply| redis::FromRedisValue::from_redis_value(reply).map_err(|e| StoreError::Protocol(format!("journal: members: {e}"))))
        .collect::<Result<Vec<Vec<(String, f64)>>, _>>()?;
    Ok((members, newest.ids.first().map(|entry| entry.id.clone())))
}

/// Deletes `names` (a shadow replay's keys, once compared).
pub async fn delete(conn: &mut Connection, names: &[String]) -> Result<(), StoreError> {
    for name in names {
        let _: () = conn.del(name).await?;
    }
    Ok(())
}
