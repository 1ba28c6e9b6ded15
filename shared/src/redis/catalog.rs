//! Reads of the runtime boards' catalog (docs/runtime-boards.md): its version, cheap enough to
//! ask every few seconds, and the definitions, read when the version moved.

use std::collections::BTreeMap;

use crate::domain::guard;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys};
use crate::redis::store::Connection;

/// The catalog as one `MULTI` read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    /// `None`: never written (or lost).
    pub version: Option<u64>,
    /// Whether the catalog's guard says its history is all in Redis (a lost catalog is not).
    pub born: bool,
    /// Board -> definition JSON.
    pub definitions: BTreeMap<String, String>,
    /// Board -> why it ends (JSON), for boards being deleted.
    pub ending: BTreeMap<String, String>,
}

/// The catalog's version and whether it was lost: one round trip.
pub async fn version(conn: &mut Connection, keys: &Keys) -> Result<(Option<u64>, bool), StoreError> {
    let catalog = keys.catalog();
    let mut pipe = redis::pipe();
    pipe.atomic().get(catalog.catalog_version()).hexists(catalog.guard(), guard::BORN);
    Ok(pipe.query_async(conn).await?)
}

/// Every definition and ending board, with the version they are at: one round trip.
pub async fn load(conn: &mut Connection, keys: &Keys) -> Result<Catalog, StoreError> {
    let catalog = keys.catalog();
    let mut pipe = redis::pipe();
    pipe.atomic()
        .get(catalog.catalog_version())
        .hexists(catalog.guard(), guard::BORN)
        .hgetall(catalog.definitions())
        .hgetall(catalog.ending());
    let (version, born, definitions, ending) = pipe.query_async(conn).await?;
    Ok(Catalog { version, born, definitions, ending })
}

/// Whether runtime board `board` is being deleted (the catalog's `ending` hash names it).
pub async fn is_ending(conn: &mut Connection, keys: &Keys, board: &str) -> Result<bool, StoreError> {
    Ok(redis::cmd("HEXISTS").arg(keys.catalog().ending()).arg(board).query_async(conn).await?)
}

/// Refuses every later write of a board (or shard) being deleted: set on each of its guards
/// before its keys go (docs/runtime-boards.md#deleting).
pub async fn mark_ended(conn: &mut Connection, shards: &[BoardKeys]) -> Result<(), StoreError> {
    for keys in shards {
        let _: () = redis::cmd("HSET").arg(keys.guard()).arg(guard::ENDED).arg(1).query_async(conn).await?;
    }
    Ok(())
}
