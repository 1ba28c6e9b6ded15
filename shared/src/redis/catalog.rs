//! Reads of the runtime boards' catalog (docs/runtime-boards.md): its version, cheap enough to
//! ask every few seconds, and the definitions, read when the version moved.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::domain::config::tournament::Tournament;
use crate::domain::config::{Definition, kept_board};
use crate::domain::guard;
use crate::redis::error::StoreError;
use crate::redis::keys::Keys;
use crate::redis::store::{Connection, Store};

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

/// One runtime board as the catalog holds it, read at one version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    pub definition: Option<String>,
    /// Why and when it ends (JSON): being deleted while `definition` is there, its tombstone
    /// once it is gone.
    pub ending: Option<String>,
    /// Whether the catalog's guard says its history is all in Redis.
    pub born: bool,
}

impl Record {
    /// The tombstone of a board whose end is done.
    pub fn tombstone(&self) -> Option<&str> {
        self.ending.as_deref().filter(|_| self.definition.is_none())
    }
}

/// Board `board`'s definition and end, one round trip whatever the catalog holds (a request
/// naming a deleted board a function does not hold reads its tombstone so: `catalog_live.lua`
/// leaves tombstones out).
pub async fn record(conn: &mut Connection, keys: &Keys, board: &str) -> Result<Record, StoreError> {
    Ok(records(conn, keys, &[board]).await?.pop().unwrap_or_default())
}

/// `record` of each of `boards`, in their order, in one round trip.
pub async fn records(conn: &mut Connection, keys: &Keys, boards: &[&str]) -> Result<Vec<Record>, StoreError> {
    if boards.is_empty() {
        return Ok(Vec::new());
    }
    let catalog = keys.catalog();
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("HMGET")
        .arg(catalog.definitions())
        .arg(boards)
        .cmd("HMGET")
        .arg(catalog.ending())
        .arg(boards)
        .hexists(catalog.guard(), guard::BORN);
    let (definitions, endings, born): (Vec<Option<String>>, Vec<Option<String>>, bool) = pipe.query_async(conn).await?;
    Ok(definitions.into_iter().zip(endings).map(|(definition, ending)| Record { definition, ending, born }).collect())
}

/// `tournament` with its prizes and metadata (`Tournament::without_details` left them out of the
/// catalog a function holds), from its definition as stored, or once its end is done its
/// tombstone's: one round trip, none (no connection) when they are held. `None`: neither is
/// there any more.
pub async fn whole_tournament<'a>(
    store: &Store,
    keys: &Keys,
    tournament: &'a Tournament,
) -> Result<Option<Cow<'a, Tournament>>, StoreError> {
    if tournament.details_held {
        return Ok(Some(Cow::Borrowed(tournament)));
    }
    let record = record(&mut store.connection().await?, keys, &tournament.id).await?;
    let stored = match (&record.definition, record.tombstone()) {
        (Some(text), _) => Definition::stored(text).ok(),
        (None, Some(why)) => serde_json::from_str(why).ok().as_ref().and_then(kept_board),
        (None, None) => None,
    };
    match stored.and_then(|board| board.tournament) {
        Some(whole) => Ok(Some(Cow::Owned(tournament.with_details_of(&whole)))),
        // Gone from both: the catalog was lost since the function read it (503 until it is
        // restored, as every read of it: `RuntimeBoards::get`).
        None if keys.journal_on() && !record.born => Err(StoreError::Restoring),
        None => Ok(None),
    }
}

/// Whether runtime board `board` is being deleted (the catalog's `ending` hash names it).
pub async fn is_ending(conn: &mut Connection, keys: &Keys, board: &str) -> Result<bool, StoreError> {
    Ok(redis::cmd("HEXISTS").arg(keys.catalog().ending()).arg(board).query_async(conn).await?)
}

/// A guard's `born` and `fence`, read as one command of a pipeline; `restoring` judges the reply.
pub fn guard_state(guard: &str) -> redis::Cmd {
    redis::cmd("HMGET").arg(guard).arg(guard::BORN).arg(guard::FENCE).clone()
}

/// `guard_state`'s reply: a guard lost (no `born`) or fenced is a board being restored, which
/// every read and write of it answers 503 `board_restoring` for (the scripts' `refuse_restoring`).
pub fn restoring(reply: redis::Value) -> Result<(), StoreError> {
    judged(reply, false)
}

/// `restoring` as a read judges it: a move between layouts fences writes only (`guard::MOVING`).
pub fn restoring_for_reads(reply: redis::Value) -> Result<(), StoreError> {
    judged(reply, true)
}

/// `guard_state` with the guard's record of the period set `set` (`field`, `kept|<kind>:<id>`)
/// and whether the set exists: two commands, judged by `lost_for_reads`.
pub fn kept_state(guard: &str, field: &str, set: &str) -> [redis::Cmd; 2] {
    [redis::cmd("HMGET").arg(guard).arg(guard::BORN).arg(guard::FENCE).arg(field).clone(), redis::cmd("EXISTS").arg(set).clone()]
}

/// `kept_state`'s replies as a read judges them (`restoring_for_reads`, and a set its guard says
/// the board holds found missing before its expiry at `now_ms`: lost, docs/journal.md#losses).
pub fn lost_for_reads(state: redis::Value, exists: redis::Value, now_ms: i64) -> Result<(), StoreError> {
    let protocol = |e: redis::ParsingError| StoreError::Protocol(format!("a guard's state: {e}"));
    let (born, fence, kept): (Option<String>, Option<String>, Option<String>) = redis::from_redis_value(state).map_err(protocol)?;
    refused(born.is_some(), fence.as_deref(), true)?;
    let exists: bool = redis::from_redis_value(exists).map_err(protocol)?;
    match kept.map(|expiry| expiry.parse::<i64>()) {
        Some(Ok(expiry)) if !exists && guard::kept_lost(expiry, now_ms) => Err(StoreError::Restoring),
        Some(Err(_)) => Err(StoreError::Protocol("a guard's record of a period set: not a number".into())),
        _ => Ok(()),
    }
}

fn judged(reply: redis::Value, reading: bool) -> Result<(), StoreError> {
    let (born, fence): (Option<String>, Option<String>) =
        redis::from_redis_value(reply).map_err(|e| StoreError::Protocol(format!("a guard's state: {e}")))?;
    refused(born.is_some(), fence.as_deref(), reading)
}

fn refused(born: bool, fence: Option<&str>, reading: bool) -> Result<(), StoreError> {
    let fenced = fence.is_some_and(|fence| !(reading && fence == guard::MOVING));
    if !born || fenced { Err(StoreError::Restoring) } else { Ok(()) }
}

/// Refuses every later write of a board (or shard) being deleted: set on each of its guards
/// before its keys go (docs/runtime-boards.md#deleting). Answers the guards it marked that were
/// not marked before, which an end that could not be recorded unmarks (`unmark_ended`).
/// With `refuse_restoring` (a deletion, journal on), a guard lost or fenced is refused first
/// (503 `board_restoring`, nothing written), as every write of a board being restored is; a
/// deleted board's end marks even a guard lost since, so it refuses anew.
pub async fn mark_ended(conn: &mut Connection, guards: &[String], refuse_restoring: bool) -> Result<Vec<String>, StoreError> {
    if refuse_restoring {
        for guard in guards {
            restoring(guard_state(guard).query_async(conn).await?)?;
        }
    }
    let mut marked = Vec::new();
    for guard in guards {
        let new: bool = redis::cmd("HSETNX").arg(guard).arg(guard::ENDED).arg(1).query_async(conn).await?;
        if new {
            marked.push(guard.clone());
        }
    }
    Ok(marked)
}

/// Takes back `mark_ended`'s new marks: the end they were for was not recorded.
pub async fn unmark_ended(conn: &mut Connection, marked: &[String]) -> Result<(), StoreError> {
    for guard in marked {
        let _: () = redis::cmd("HDEL").arg(guard).arg(guard::ENDED).query_async(conn).await?;
    }
    Ok(())
}
