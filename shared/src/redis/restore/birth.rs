//! What a layout is to its board when its journal is judged new (docs/journal.md#fence): a new
//! board's guards are born as its own; a layout a move is due to take the board to is born as a
//! target (`guard::TARGET`, holding the record of where the data is), which a write finding the
//! layout record missing never records, and where a restore finds the data.

use redis::aio::ConnectionLike;

use crate::domain::guard;
use crate::redis::error::StoreError;
use crate::redis::keys::{Keys, Layout, journal_board, journal_generation, journal_shards};
use crate::redis::layout;

/// What journal `name`'s layout is to its board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// The layout the board's record names (or a board's own one slot holding its guard, which
    /// needs no record).
    Data,
    /// Another layout than the one the board's data is in (its record's text): a move's target.
    Target(String),
    /// A layout while the board records none and its one slot holds no guard: a new board, or
    /// one whose record was lost (its journal's objects under any layout tell the two apart).
    Unrecorded,
}

/// The layout `board`'s data is in as the store says: its record, else its one slot when that
/// holds the board's guard (a board never moved needs no record); `None`: neither.
pub async fn held(conn: &mut (impl ConnectionLike + Send), keys: &Keys, board: &str) -> Result<Option<(u32, u32)>, StoreError> {
    if let Some(recorded) = layout::read(conn, keys, board).await? {
        return Ok(Some(recorded));
    }
    let one_slot: bool = redis::cmd("EXISTS").arg(keys.board(board).guard()).query_async(conn).await.map_err(StoreError::from)?;
    Ok(one_slot.then_some((1, 0)))
}

/// `name`'s role, from the layout the store holds the board's data in (`held`): without one,
/// unrecorded. The one slot too: a move from shards back to it makes it a target, and a board
/// whose record was lost with its data in shards holds no guard there (found by the simulation:
/// the one slot judged new beside shards holding the board took its writes).
pub async fn role(conn: &mut (impl ConnectionLike + Send), keys: &Keys, name: &str) -> Result<Role, StoreError> {
    let layout = if name.contains(':') { (journal_shards(name), journal_generation(name)) } else { (1, 0) };
    Ok(match held(conn, keys, journal_board(name)).await? {
        Some(held) if held == layout => Role::Data,
        Some((shards, generation)) => Role::Target(layout::text(shards, generation)),
        None => Role::Unrecorded,
    })
}

/// Where the data of a board whose `target` layout a move was due to take it to is, as its
/// guard says (`None`: not a target): the record's layout while its guard is there (a switch
/// frees the old layout's guards once the target holds everything).
pub async fn data_of_target(conn: &mut (impl ConnectionLike + Send), keys: &Keys, target: &Layout) -> Result<Option<Layout>, StoreError> {
    let held: Option<String> =
        redis::cmd("HGET").arg(target.shard(0).guard()).arg(guard::TARGET).query_async(conn).await.map_err(StoreError::from)?;
    let Some((shards, generation)) = held.map(|text| layout::parse(&text)).transpose()? else { return Ok(None) };
    let source = keys.layout_at(target.board(), shards, generation);
    let there: bool = redis::cmd("EXISTS").arg(source.shard(0).guard()).query_async(conn).await.map_err(StoreError::from)?;
    Ok(there.then_some(source))
}

/// Fences `layout`'s shards whose guards are born and not fenced (fence_older.lua): a layout the
/// store records while S3 says the board switched to another. Whether any was fenced.
pub async fn fence_older(conn: &mut (impl ConnectionLike + Send), layout: &Layout) -> Result<bool, StoreError> {
    let mut fenced = false;
    for shard in layout.all() {
        let now: u8 = crate::redis::scripts::FENCE_OLDER.key(shard.guard()).invoke_async(conn).await.map_err(StoreError::from)?;
        fenced |= now == 1;
    }
    Ok(fenced)
}

/// The move's switch (docs/scaling.md#changing-shards): `target` holds the board's data from now
/// on, its guards no longer a target's. Before the record names it: a record lost in between
/// is recorded again as the target, which then holds everything.
pub async fn settle_target(conn: &mut (impl ConnectionLike + Send), target: &Layout) -> Result<(), StoreError> {
    for shard in target.all() {
        let _: () = redis::cmd("HDEL").arg(shard.guard()).arg(guard::TARGET).query_async(conn).await.map_err(StoreError::from)?;
    }
    Ok(())
}
