//! The writes a store older than a board's last switch took in the layout it held before its
//! fence (docs/journal.md#rollbacks), kept in S3 while they wait to be decided again where the
//! board switched to. Until then they live in the older layout's streams only, beside a record
//! in Redis (`older::OlderWrites`): a loss of every key meanwhile took acknowledged writes (found
//! by the simulation). Kept here (a window per journal, as `windows` keeps a rollback's), a
//! restore after such a loss puts them back and records them again, then decides them as if
//! nothing had been lost; `decided` is written once every one is, so no later loss brings them
//! back.

use crate::archive::objects::{ObjectError, Objects, older_at, older_objects};
use crate::redis::keys::{Keys, Layout, journal_generation, journal_shards};
use crate::redis::restore::older::{self, OlderWrites};
use crate::redis::store::Connection;

use super::error::RestoreError;
use super::windows::{self, MANIFEST, WindowError};

/// Written in a switch's folder once each of its writes is decided.
const DECIDED: &str = "decided";

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

/// The switch (its time) and the journals of the writes kept for `board` in `listed` (the
/// tenant's `older_objects`, listed once) that are not all decided yet: the oldest such switch.
pub(super) fn pending(listed: &[String], keys: &Keys, board: &str) -> Option<(i64, Vec<String>)> {
    let folder = older_objects(keys.prefix(), board);
    let mut found: std::collections::BTreeMap<i64, (bool, Vec<String>)> = Default::default();
    for name in listed {
        let Some((at, rest)) = name.strip_prefix(&folder).and_then(|rest| rest.strip_prefix("at=")?.split_once('/')) else { continue };
        let Ok(at) = at.parse::<i64>() else { continue };
        let entry = found.entry(at).or_default();
        if rest == DECIDED {
            entry.0 = true;
        } else if let Some(journal) = rest.strip_suffix(MANIFEST).and_then(|journal| journal.strip_suffix('/')) {
            entry.1.push(journal.to_owned());
        }
    }
    found.into_iter().find(|(_, (decided, journals))| !decided && !journals.is_empty()).map(|(at, (_, journals))| (at, journals))
}

/// The tenant's kept writes, every board's (one listing a restore invocation).
pub(super) async fn listing<O: Objects>(objects: &O, keys: &Keys) -> Result<Vec<String>, ObjectError> {
    objects.list(&format!("journal/_older/prefix={}/", keys.prefix())).await
}

/// The older layout `journals` (kept for `board`) are of.
pub(super) fn layout(keys: &Keys, board: &str, journals: &[String]) -> Result<Layout, RestoreError> {
    let first = journals.first().ok_or_else(|| RestoreError::Invalid(format!("board {board:?}: kept older writes name no journal")))?;
    Ok(keys.layout_at(board, journal_shards(first), journal_generation(first)))
}

/// `board`'s kept writes since the switch at `at_ms`, in `journals`: recorded (`older::record`)
/// unless recorded already, and put back in their streams where a loss took them (what a stream
/// still holds, or decided since, stays as it is). The record.
pub(super) async fn bring_back<O: Objects>(
    conn: &mut Connection,
    objects: &O,
    keys: &Keys,
    board: &str,
    (at_ms, journals): (i64, &[String]),
) -> Result<OlderWrites, RestoreError> {
    let kept = OlderWrites { layout: layout(keys, board, journals)?, at_ms };
    if let Some(held) = older::record(conn, keys, &kept).await? {
        return Err(RestoreError::Invalid(format!(
            "board {board:?}: the writes of another older layout (switched from at {}) are still to be decided again; \
             those kept in S3 from the switch at {at_ms} wait",
            held.at_ms
        )));
    }
    let folder = older_at(keys.prefix(), board, at_ms);
    for (shard, journal) in kept.layout.all().iter().zip(kept.layout.journals()) {
        if journals.contains(&journal) {
            windows::bring_back_from(conn, shard, objects, &format!("{folder}{journal}/")).await?;
        }
    }
    Ok(kept)
}

/// Every one of `older`'s writes decided: a loss from now on does not bring them back.
pub(super) async fn decided<O: Objects>(objects: &O, keys: &Keys, older: &OlderWrites) -> Result<(), ObjectError> {
    let name = format!("{}{DECIDED}", older_at(keys.prefix(), older.layout.board(), older.at_ms));
    objects.put_new(&name, Vec::new()).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_switch_not_decided_is_pending() {
        let keys = Keys::new("st").unwrap();
        let at = |ms: i64, rest: &str| format!("{}{rest}", older_at("st", "game", ms));
        let listed = vec![
            at(5, "game:0of3:7/window.json"),
            at(5, "game:0of3:7/5-1.lines"),
            at(5, DECIDED),
            at(9, "game:1of3:2/9-1.lines"),
            at(9, "game:1of3:2/window.json"),
            at(9, "game:2of3:4/window.json"),
            at(12, "game:0of5:1/window.json"),
            format!("{}{}", older_at("st", "gamer", 1), "gamer/window.json"),
        ];
        assert_eq!(pending(&listed, &keys, "game"), Some((9, vec!["game:1of3:2".to_owned(), "game:2of3:4".to_owned()])));
        assert_eq!(pending(&listed, &keys, "gamer"), Some((1, vec!["gamer".to_owned()])));
        assert_eq!(pending(&listed, &keys, "other"), None);
        assert_eq!(pending(&listed[..3], &keys, "game"), None, "decided");
        assert_eq!(pending(&listed[7..], &keys, "game"), None, "another board's folder is not a prefix of it");
    }
}
