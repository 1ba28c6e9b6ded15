//! The record of a board's writes a store older than its last switch took in the layout it
//! held, before the drain fenced it (`Keys::board_older_writes`, docs/journal.md#rollbacks):
//! that layout and the switch's time (`<layout>@<ms>`), set before the layout is freed but for
//! those journals, removed once every one of those writes was decided again.

use crate::redis::error::StoreError;
use crate::redis::keys::{Keys, Layout};
use crate::redis::layout;
use crate::redis::store::Connection;

/// The older layout whose writes after `at_ms` (the switch's time, Redis's) are to be decided
/// again.
#[derive(Debug, Clone)]
pub struct OlderWrites {
    pub layout: Layout,
    pub at_ms: i64,
}

/// Records `older`, unless another is recorded: that one (still to decide), else `None`.
pub async fn record(conn: &mut Connection, keys: &Keys, older: &OlderWrites) -> Result<Option<OlderWrites>, StoreError> {
    let board = older.layout.board();
    let text = format!("{}@{}", layout::text(older.layout.shards(), older.layout.generation()), older.at_ms);
    let key = keys.board_older_writes(board);
    let (_, held): ((), Option<String>) = redis::pipe().cmd("SET").arg(&key).arg(&text).arg("NX").get(&key).query_async(conn).await?;
    match held {
        Some(held) if held != text => Ok(Some(parse(keys, board, &held)?)),
        _ => Ok(None),
    }
}

/// What is recorded for `board`.
pub async fn read(conn: &mut Connection, keys: &Keys, board: &str) -> Result<Option<OlderWrites>, StoreError> {
    let held: Option<String> = redis::cmd("GET").arg(keys.board_older_writes(board)).query_async(conn).await?;
    held.map(|held| parse(keys, board, &held)).transpose()
}

fn parse(keys: &Keys, board: &str, held: &str) -> Result<OlderWrites, StoreError> {
    let bad = || StoreError::Protocol(format!("older writes record of {board}: {held:?}"));
    let (text, at) = held.split_once('@').ok_or_else(bad)?;
    let (shards, generation) = layout::parse(text)?;
    Ok(OlderWrites { layout: keys.layout_at(board, shards, generation), at_ms: at.parse().map_err(|_| bad())? })
}

/// Every one decided: the kept journals go, then the record (killed in between, the next
/// attempt finds the journals gone and removes the record).
pub async fn done(conn: &mut Connection, keys: &Keys, older: &OlderWrites) -> Result<(), StoreError> {
    for shard in older.layout.all() {
        let () = redis::cmd("UNLINK").arg(shard.journal()).query_async(conn).await?;
    }
    let () = redis::cmd("DEL").arg(keys.board_older_writes(older.layout.board())).query_async(conn).await?;
    Ok(())
}
