//! The writes a store older than a board's last switch took in the layout it held before its
//! fence (docs/journal.md#rollbacks), kept in S3 while they wait to be decided again where the
//! board switched to. Until then they live in the older layout's streams only, beside a record
//! in Redis (`older::OlderWrites`): a loss of every key meanwhile took acknowledged writes (found
//! by the simulation). Kept here (a window per journal, as `windows` keeps a rollback's), a
//! restore after such a loss puts them back and records them again, then decides them as if
//! nothing had been lost. Once every one is decided, `decided-<ms>` names the entries their
//! decisions ended at: a later restore decides them again only if a loss took those entries
//! before a drain stored them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::archive::objects::{ObjectError, Objects, older_at, older_objects, older_of_tenant};
use crate::domain::journal::stream_order;
use crate::redis::journal;
use crate::redis::keys::{Keys, Layout, journal_generation, journal_shards};
use crate::redis::restore::older::{self, OlderWrites};
use crate::redis::restore::rollback;
use crate::redis::store::Connection;

use super::error::RestoreError;
use super::windows::{self, MANIFEST, WindowError};

/// Written in a switch's folder once each of its writes is decided (`decided-<ms>`): the newest
/// entry of each journal of the layout they were decided in.
const DECIDED: &str = "decided-";

/// The writes kept for a board under one switch's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Kept {
    pub at_ms: i64,
    pub journals: Vec<String>,
    /// The newest record of their decision, if any.
    pub decided: Option<String>,
}

/// Stores the writes since the switch of each of `journals` (of `older`'s layout), unless stored
/// already: by the drain that fences the older store, and by a restore that finds it first.
pub(super) async fn keep<O: Objects>(
    conn: &mut Connection,
    objects: &O,
    keys: &Keys,
    older: &OlderWrites,
    journals: &[String],
) -> Result<(), WindowError> {
    let folder = older_at(keys.prefix(), older.layout.board(), older.at_ms);
    let after = format!("{}-{}", older.at_ms, u64::MAX);
    for (shard, journal) in older.layout.all().iter().zip(older.layout.journals()) {
        if journals.contains(&journal) {
            windows::keep_in(conn, shard, objects, &format!("{folder}{journal}/"), &journal, &after).await?;
        }
    }
    Ok(())
}

/// The writes kept for `board` in `listed` (under `older_objects`), oldest switch first.
pub(super) fn kept(listed: &[String], keys: &Keys, board: &str) -> Vec<Kept> {
    let folder = older_objects(keys.prefix(), board);
    let mut found: BTreeMap<i64, Kept> = BTreeMap::new();
    for name in listed {
        let Some((at, rest)) = name.strip_prefix(&folder).and_then(|rest| rest.strip_prefix("at=")?.split_once('/')) else { continue };
        let Ok(at_ms) = at.parse::<i64>() else { continue };
        let entry = found.entry(at_ms).or_insert_with(|| Kept { at_ms, journals: Vec::new(), decided: None });
        if rest.starts_with(DECIDED) {
            entry.decided = entry.decided.take().max(Some(name.clone()));
        } else if let Some(journal) = rest.strip_suffix(MANIFEST).and_then(|journal| journal.strip_suffix('/')) {
            entry.journals.push(journal.to_owned());
        }
    }
    found.into_values().filter(|kept| !kept.journals.is_empty()).collect()
}

/// The tenant's kept writes, every board's (one listing a restore invocation).
pub(super) async fn listing<O: Objects>(objects: &O, keys: &Keys) -> Result<Vec<String>, ObjectError> {
    objects.list(&older_of_tenant(keys.prefix())).await
}

/// `board`'s kept writes listed again.
pub(super) async fn listing_of<O: Objects>(objects: &O, keys: &Keys, board: &str) -> Result<Vec<String>, ObjectError> {
    objects.list(&older_objects(keys.prefix(), board)).await
}

/// Of `kept`, those of the switch `recorded` names (any, oldest first, without one) still to
/// decide: never decided, or decided into entries the store no longer holds and the journal
/// never stored (a loss of every key before the drain stored the decisions: they are decided
/// again, those with a marker found duplicates of the ones that were stored).
pub(super) async fn pending<O: Objects>(
    conn: &mut Connection,
    objects: &O,
    keys: &Keys,
    kept: Vec<Kept>,
    recorded: Option<&OlderWrites>,
) -> Result<Option<Kept>, RestoreError> {
    for kept in kept.into_iter().filter(|kept| recorded.is_none_or(|recorded| recorded.at_ms == kept.at_ms)) {
        match &kept.decided {
            Some(name) if still_held(conn, objects, keys, name).await? => {}
            _ => return Ok(Some(kept)),
        }
    }
    Ok(None)
}

/// Whether each entry record `name` names is in its journal's stream, or was trimmed from it
/// (the guard's `drained`: the trim's, raised by a restore to what S3 holds).
async fn still_held<O: Objects>(conn: &mut Connection, objects: &O, keys: &Keys, name: &str) -> Result<bool, RestoreError> {
    let body = objects.get(name).await?;
    let newest: BTreeMap<String, String> =
        serde_json::from_slice(&body).map_err(|e| RestoreError::Unreadable(name.to_owned(), e.to_string()))?;
    for (journal, id) in &newest {
        // A journal's name is its keys' tag.
        let shard = keys.board(journal);
        let drained = rollback::drained(conn, &shard).await?;
        if drained.as_deref().and_then(stream_order) < stream_order(id) && !journal::holds(conn, &shard, id).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The older layout `journals` (kept for `board`) are of.
pub(super) fn layout(keys: &Keys, board: &str, journals: &[String]) -> Result<Layout, RestoreError> {
    let first = journals.first().ok_or_else(|| RestoreError::Invalid(format!("board {board:?}: kept older writes name no journal")))?;
    Ok(keys.layout_at(board, journal_shards(first), journal_generation(first)))
}

/// `board`'s kept writes `kept`: recorded (`older::record`) unless recorded already, and put
/// back in their streams where a loss took them (what a stream still holds, or decided since,
/// stays as it is). The record.
pub(super) async fn bring_back<O: Objects>(
    conn: &mut Connection,
    objects: &O,
    keys: &Keys,
    board: &str,
    kept: &Kept,
) -> Result<OlderWrites, RestoreError> {
    let older = OlderWrites { layout: layout(keys, board, &kept.journals)?, at_ms: kept.at_ms };
    if let Some(held) = older::record(conn, keys, &older).await? {
        return Err(RestoreError::Invalid(format!(
            "board {board:?}: the writes of another older layout (switched from at {}) are still to be decided again; \
             those kept in S3 from the switch at {} wait",
            held.at_ms, kept.at_ms
        )));
    }
    let folder = older_at(keys.prefix(), board, kept.at_ms);
    for (shard, journal) in older.layout.all().iter().zip(older.layout.journals()) {
        if kept.journals.contains(&journal) {
            windows::bring_back_from(conn, shard, objects, &format!("{folder}{journal}/")).await?;
        }
    }
    Ok(older)
}

/// Every one of `older`'s writes decided in layout `now`: the newest entry of each of its
/// journals recorded, so a later restore decides them again only if a loss took those entries
/// before the drain stored them.
pub(super) async fn decided<O: Objects>(
    conn: &mut Connection,
    objects: &O,
    keys: &Keys,
    older: &OlderWrites,
    (now, at): (&Layout, DateTime<Utc>),
) -> Result<(), RestoreError> {
    let mut newest = BTreeMap::new();
    for (shard, journal) in now.all().iter().zip(now.journals()) {
        if let Some(id) = journal::newest_id(conn, shard).await? {
            newest.insert(journal, id);
        }
    }
    let name = format!("{}{DECIDED}{:013}", older_at(keys.prefix(), older.layout.board(), older.at_ms), at.timestamp_millis());
    objects.put_new(&name, serde_json::to_vec(&newest).expect("ids serialize")).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_writes_are_read_by_switch_oldest_first_with_their_newest_decision() {
        let keys = Keys::new("st").unwrap();
        let at = |ms: i64, rest: &str| format!("{}{rest}", older_at("st", "game", ms));
        let listed = vec![
            at(5, "game:0of3:7/window.json"),
            at(5, "game:0of3:7/5-1.lines"),
            at(5, "decided-0000000000020"),
            at(5, "decided-0000000000100"),
            at(9, "game:1of3:2/9-1.lines"),
            at(9, "game:1of3:2/window.json"),
            at(9, "game:2of3:4/window.json"),
            at(12, "decided-0000000000030"),
            format!("{}{}", older_at("st", "gamer", 1), "gamer/window.json"),
        ];
        let journals = |names: &[&str]| names.iter().map(|name| name.to_string()).collect::<Vec<_>>();
        assert_eq!(
            kept(&listed, &keys, "game"),
            vec![
                Kept { at_ms: 5, journals: journals(&["game:0of3:7"]), decided: Some(at(5, "decided-0000000000100")) },
                Kept { at_ms: 9, journals: journals(&["game:1of3:2", "game:2of3:4"]), decided: None },
            ],
            "a folder with no journal kept is not writes to decide"
        );
        assert_eq!(kept(&listed, &keys, "gamer"), vec![Kept { at_ms: 1, journals: journals(&["gamer"]), decided: None }]);
        assert_eq!(kept(&listed, &keys, "other"), vec![]);
        assert_eq!(kept(&listed[8..], &keys, "game"), vec![], "another board's folder is not a prefix of it");
    }
}
