//! Which generation of a board's layout holds its journal (docs/boards.md#changing-max_score):
//! a move that re-encoded the board's scores wrote its history again into the next generation's
//! journals, and recorded that generation with the layout. The record is in Redis: a store that
//! lost it (the board's slot, or everything) is told by S3, whose newest generation holding
//! objects for the configured shards is the one the board was in.

use crate::archive::objects::{Objects, journal_objects};
use crate::domain::config::Board;
use crate::redis::error::StoreError;
use crate::redis::keys::{Keys, Layout};
use crate::redis::layout;
use crate::redis::store::{Connection, Store};

use super::error::RestoreError;

/// The layout of `board` at its configured shards, in the generation its journal is in.
pub(super) async fn configured<O: Objects>(conn: &mut Connection, objects: &O, keys: &Keys, board: &Board) -> Result<Layout, RestoreError> {
    match layout::read(conn, keys, &board.name).await? {
        Some((shards, generation)) if shards == board.shards => Ok(keys.layout_at(&board.name, shards, generation)),
        // A move between shard counts keeps the generation (only a re-encode takes the next).
        Some((_, generation)) => Ok(keys.layout_at(&board.name, board.shards, generation)),
        None => {
            // The first generation's keys still there: a board never re-encoded, or one whose
            // move has not switched yet (the move records the layout as it switches).
            let first = keys.layout(&board.name, board.shards);
            let held: bool = redis::cmd("EXISTS").arg(first.shard(0).guard()).query_async(conn).await.map_err(StoreError::from)?;
            if held {
                return Ok(first);
            }
            let mut generation = 0;
            while stored(objects, keys, &keys.layout_at(&board.name, board.shards, generation + 1)).await? {
                generation += 1;
            }
            Ok(keys.layout_at(&board.name, board.shards, generation))
        }
    }
}

/// The layout `board`'s data is in, whatever scale the configuration says (a move re-encoding
/// it starts from there).
pub(super) async fn held(store: &Store, conn: &mut Connection, keys: &Keys, board: &Board) -> Result<Layout, RestoreError> {
    match store.read_layout(keys, board).await {
        // Scores held at another scale than configured: a board with no layout record then
        // holds them in its one slot (`redis::layout`).
        Err(StoreError::Rescaled { .. }) => {
            let (shards, generation) = layout::read(conn, keys, &board.name).await?.unwrap_or((1, 0));
            Ok(keys.layout_at(&board.name, shards, generation))
        }
        held => Ok(held?),
    }
}

/// Whether S3 holds objects of any journal of `layout` (a board of few users may have none in
/// some shards).
async fn stored<O: Objects>(objects: &O, keys: &Keys, layout: &Layout) -> Result<bool, RestoreError> {
    for journal in layout.journals() {
        if !journal_objects(objects, keys.prefix(), &journal).await?.is_empty() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The journals the drain stores for `board`: those of the layout its data is in and those of
/// the layout a move takes it to (its configured shards; the next generation when its scores
/// are being re-encoded), so no stream is left undrained while it moves. From the store's
/// probed records (no round trip most runs): a scale pending is the probe's `Rescaled`.
pub(super) async fn drained(store: &Store, conn: &mut Connection, keys: &Keys, board: &Board) -> Result<Vec<String>, RestoreError> {
    let (held, next) = match store.read_layout(keys, board).await {
        Ok(held) => {
            let next = held.generation();
            (held, next)
        }
        Err(StoreError::Rescaled { .. }) => {
            let (shards, generation) = layout::read(conn, keys, &board.name).await?.unwrap_or((1, 0));
            let refused = super::rescale::refusal(board).is_some();
            (keys.layout_at(&board.name, shards, generation), generation + u32::from(!refused))
        }
        Err(error) => return Err(error.into()),
    };
    let mut journals = held.journals();
    let target = keys.layout_at(&board.name, board.shards, next).journals();
    journals.extend(target.into_iter().filter(|name| !held.journals().contains(name)));
    Ok(journals)
}
