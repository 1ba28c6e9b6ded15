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
            while let Some(first) = keys.layout_at(&board.name, board.shards, generation + 1).journals().first().cloned()
                && !journal_objects(objects, keys.prefix(), &first).await?.is_empty()
            {
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
