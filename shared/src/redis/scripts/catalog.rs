//! A runtime board's definition changed and journaled in one call (`define_board.lua`).

use super::DEFINE_BOARD;
use crate::redis::error::StoreError;
use crate::redis::keys::Keys;
use crate::redis::settings::ReplicaWait;
use crate::redis::store::{Connection, ScriptCall};

/// What a change asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change<'a> {
    /// Create the board with this definition, unless the catalog holds `limit` boards.
    Put { definition: &'a str, limit: u32 },
    /// Mark the board ending (`why`: the reason and time, JSON).
    End { why: &'a str },
    /// Forget the board's definition (its end is done), keeping `retired` (why and when it
    /// ended, with the definition) in its place among the ended boards.
    Remove { retired: &'a str },
    /// Replace the board's definition `expected` with `definition` (a tournament's record of
    /// an instance ended early).
    Replace { definition: &'a str, expected: &'a str },
}

impl Change<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            Change::Put { .. } => "put",
            Change::End { .. } => "end",
            Change::Remove { .. } => "remove",
            Change::Replace { .. } => "replace",
        }
    }
}

/// What the catalog did (`define_board.lua`'s reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defined {
    Created,
    /// The same definition was there: nothing written.
    Same,
    /// Another definition (or an ending board) holds the name: nothing written.
    Exists,
    /// The catalog holds its most boards: nothing written.
    Full,
    Ending,
    Removed,
    Replaced,
    /// The definition was not the one expected: nothing written.
    Changed,
    Unknown,
}

/// Applies `change` to `board` in the catalog and journals `entry` with it ('' journals nothing).
/// `wait`: the replicas that must hold the change before it is answered, as a board write's.
pub async fn define(
    conn: &mut Connection,
    keys: &Keys,
    board: &str,
    change: Change<'_>,
    entry: &str,
    wait: ReplicaWait,
) -> Result<Defined, StoreError> {
    let catalog = keys.catalog();
    let mut call = ScriptCall::new(&DEFINE_BOARD);
    call.key(catalog.definitions()).key(catalog.ending()).key(catalog.catalog_version()).key(catalog.journal()).key(catalog.guard());
    call.arg(change.name()).arg(board);
    match change {
        Change::Put { definition, limit } => call.arg(definition).arg(limit),
        Change::End { why } => call.arg(why).arg(0),
        Change::Remove { retired } => call.arg(retired).arg(0),
        Change::Replace { definition, expected } => call.arg(definition).arg(expected),
    };
    call.arg(entry);
    let reply: String = conn.run_script(&call, wait).await?;
    Ok(match reply.as_str() {
        "created" => Defined::Created,
        "same" => Defined::Same,
        "exists" => Defined::Exists,
        "full" => Defined::Full,
        "ending" => Defined::Ending,
        "removed" => Defined::Removed,
        "replaced" => Defined::Replaced,
        "changed" => Defined::Changed,
        "unknown" => Defined::Unknown,
        other => return Err(StoreError::Protocol(format!("define_board answered {other:?}"))),
    })
}
