//! The drain's record in S3 of the last entry it stored and trimmed of each journal
//! (docs/journal.md#rollbacks): what the journal knows and a Redis rolled back to a snapshot
//! does not. One object per tenant, read once a run (and by a restore), written once a run when
//! it moved.

use std::collections::BTreeMap;

use super::error::RestoreError;
use super::windows::{self, WindowError};
use crate::archive::objects::{ObjectError, Objects, journal_objects, marks_name, parse_lines, read_text};
use crate::domain::journal::stream_order;
use crate::redis::error::StoreError;
use crate::redis::journal;
use crate::redis::keys::BoardKeys;
use crate::redis::restore::{self, rollback, rollback::Found};
use crate::redis::store::Connection;

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Marks {
    /// journal name -> the last stream id stored and trimmed.
    #[serde(default)]
    drained: BTreeMap<String, String>,
    /// journal name -> the snapshot's point, for a board found older than its journal and not
    /// restored since: kept here too, since a loss after the rollback can take the guard that
    /// records it (a restore then rebuilds the board whole).
    #[serde(default)]
    rolled_back: BTreeMap<String, String>,
}

impl Marks {
    /// The record as stored; empty when there is none yet (a deployment's first run).
    pub async fn load<O: Objects>(objects: &O, prefix: &str) -> Result<Self, ObjectError> {
        let name = marks_name(prefix);
        if !objects.list(&name).await?.contains(&name) {
            return Ok(Self::default());
        }
        let body = objects.get(&name).await?;
        // Not the drain's JSON (a hand edit): the next run writes it whole again.
        Ok(serde_json::from_slice(&body).unwrap_or_else(|error| {
            tracing::error!(object = %name, error = %error, "the drain's record does not parse: rollbacks are looked for from the next run");
            Self::default()
        }))
    }

    pub async fn save<O: Objects>(&self, objects: &O, prefix: &str) -> Result<(), ObjectError> {
        objects.put(&marks_name(prefix), serde_json::to_vec(self).expect("marks serialize")).await
    }

    /// The snapshot's point of `journal`, found older than its journal and not restored since.
    pub fn rolled_back(&self, journal: &str) -> Option<&str> {
        self.rolled_back.get(journal).map(String::as_str)
    }

    /// Records (`Some`) or forgets a rollback of `journal`. True when it changed.
    pub fn set_rolled_back(&mut self, journal: &str, point: Option<&str>) -> bool {
        match point {
            Some(point) => self.rolled_back.insert(journal.to_owned(), point.to_owned()).as_deref() != Some(point),
            None => self.rolled_back.remove(journal).is_some(),
        }
    }

    pub fn get(&self, journal: &str) -> Option<&str> {
        self.drained.get(journal).map(String::as_str)
    }

    /// Records that `journal` was stored and trimmed through `id` (never lowered: two drains
    /// racing store the same entries). True when it moved.
    pub fn raise(&mut self, journal: &str, id: &str) -> bool {
        if self.get(journal).and_then(stream_order) >= stream_order(id) {
            return false;
        }
        self.drained.insert(journal.to_owned(), id.to_owned());
        true
    }
}

/// Before board `name`'s restore begins: a Redis older than its journal (docs/journal.md#rollbacks),
/// seen here too if no drain saw it first. True when the board is restored onto its keys from
/// the snapshot's point (its stream's tail, written on the snapshot since, is not applied
/// again). A board whose point is unknown, or whose guard (and the point with it) was lost
/// since, has no key that can be told intact: it is rebuilt whole, from its first attempt.
pub async fn prepare<O: Objects>(
    conn: &mut Connection,
    keys: &BoardKeys,
    (objects, prefix): (&O, &str),
    marks: &Marks,
    name: &str,
) -> Result<bool, RestoreError> {
    let first_attempt = restore::through(conn, keys).await?.is_none();
    let born = restore::born(conn, keys).await?;
    let found = match marks.get(name) {
        Some(stored) if born => rollback::check(conn, keys, stored).await?,
        _ if born => rollback::point(conn, keys).await?.map_or(Found::Current(None), Found::Behind),
        _ => Found::Current(None),
    };
    // Writes the older store took before its fence, decided against the snapshot: their effects
    // are mixed into its keys, so none can be told intact. Rebuilt from S3 alone, and the writes
    // decided again after it (`Restorer`, docs/journal.md#rollbacks). So too for a board found
    // rolled back whose guard (and the point) was lost since: its stream still holds them.
    // (The catalog's definitions are not decided again: its window is applied as recorded.)
    let rolled_back = matches!(found, Found::Behind(_)) || (!born && marks.rolled_back(name).is_some() && first_attempt);
    if let (true, Some(stored)) = (rolled_back, marks.get(name)) {
        // An older copy of the store taken while an earlier rollback's window waited (its guard
        // holding that rollback's point, its stream the window's writes after it), loaded again
        // once a restore had decided the window on another copy and a drain had stored past it
        // (a fresh detection's point leaves no entry between it and the record): its keys hold
        // what the window decided on this copy, so none can be told intact, and S3 holds what the
        // other copy decided through the record. Those writes go from the stream (before the
        // wipe, while the guard keeps the drain away) and the board is rebuilt from S3 (the
        // other copy's decisions not stored when it was replaced are lost with it): restored
        // onto the copy's keys, a retry decided on it counted on top of the write it retried;
        // rebuilt with them left in the stream, a drain stored them as history and the next
        // rebuild counted them again (found by the simulation).
        // (Its guard lost since: the point the drain recorded when it saw the copy.)
        let point = match &found {
            Found::Behind(point) => Some(point.as_str()),
            Found::Current(_) => marks.rolled_back(name),
        };
        let older_copy = match point.filter(|_| name != crate::redis::keys::CATALOG_JOURNAL) {
            Some(point) => {
                let point = if point == rollback::UNKNOWN { STREAM_START } else { point };
                let older = !journal::after_until(conn, keys, name, Some(point), stored, 1).await?.is_empty();
                if older {
                    // The point first: an attempt stopped after it rebuilds the board too, never
                    // restores it onto the copy's keys.
                    if born {
                        rollback::forget_point(conn, keys).await?;
                    }
                    journal::remove_range(conn, keys, name, point, stored).await?;
                }
                older
            }
            None => false,
        };
        // The window is kept in S3 first (the drain kept it if it saw the rollback), and put
        // back where a loss since took the stream with it: decided again either way. A window
        // a restore stopped deciding part-way (then a loss of the guard) left in the stream the
        // lines still to decide and, after them, the decisions it made: decided again together.
        windows::keep(conn, keys, objects, prefix, name, stored).await?;
        let window = windows::bring_back(conn, keys, objects, prefix, name, stored).await?;
        let newest = journal::newest_id(conn, keys).await?.filter(|newest| stream_order(newest) > stream_order(stored));
        // A window a restore decided whole (each line taken out of the stream, its new decision
        // journaled after it), then a loss of the guard before a drain: those decisions are
        // history, made on the rebuilt board, applied as recorded like any write since, and its
        // surviving keys are intact. Decided again, they met the board as it is now (a season
        // archived since refused them; found by the simulation).
        if !born && decided_whole(conn, keys, name, stored, window.as_deref(), newest.as_deref()).await? {
            // (A restore killed before it forgot the window leaves it recorded: it is done.)
            rollback::redecided(conn, keys).await?;
            return Ok(false);
        }
        // (An empty window ends at the record: nothing of it to decide.)
        let through = window.filter(|end| stream_order(end) > stream_order(stored));
        let through = [through, newest].into_iter().flatten().max_by_key(|id| stream_order(id));
        if let (Some(newest), false) = (through, name == crate::redis::keys::CATALOG_JOURNAL) {
            rollback::mark_redecide(conn, keys, stored, &newest).await?;
            rollback::wipe(conn, keys).await?;
            restore::start_over(conn, keys).await?;
            return Ok(false);
        }
        if older_copy {
            rollback::wipe(conn, keys).await?;
            restore::start_over(conn, keys).await?;
            return Ok(false);
        }
    }
    match found {
        // Nothing says where the snapshot stands: rebuilt whole, from the start (a checkpoint
        // there is the snapshot's own, taken mid-restore).
        Found::Behind(point) if point == rollback::UNKNOWN => {
            rollback::wipe(conn, keys).await?;
            restore::start_over(conn, keys).await?;
            Ok(false)
        }
        Found::Behind(_) => Ok(true),
        Found::Current(_) => {
            if !born && marks.rolled_back(name).is_some() && first_attempt {
                rollback::wipe(conn, keys).await?;
            }
            Ok(false)
        }
    }
}

/// For the drain, of board `name` whose guard is lost and whose rollback the record (`stored`,
/// the drain's record before it) keeps: whether a restore decided its window whole before the
/// guard went (`decided_whole`, as the restore judges it in `prepare`), so what follows the
/// window is history, not writes to decide again. `Some(id)`: the entry the journal must be
/// stored through before the record forgets the rollback (the stream's newest; or, when a drain
/// stored the decisions and trimmed them but its record was not written, the last stored).
pub async fn window_decided<O: Objects>(
    conn: &mut Connection,
    keys: &BoardKeys,
    (objects, prefix): (&O, &str),
    name: &str,
    stored: &str,
) -> Result<Option<String>, WindowError> {
    let window = windows::through(objects, prefix, name, stored).await?;
    let newest = journal::newest_id(conn, keys).await?.filter(|newest| stream_order(newest) > stream_order(stored));
    if newest.is_some() {
        let decided = decided_whole(conn, keys, name, stored, window.as_deref(), newest.as_deref()).await?;
        return Ok(newest.filter(|_| decided));
    }
    // Nothing in the stream after the record: decided and stored already if the journal holds
    // an entry after the window's end (the drain never stores a window's own entries).
    let recorded = rollback::redecide(conn, keys).await?.map(|(_, end)| end);
    let Some(end) = [window, recorded].into_iter().flatten().max_by_key(|id| stream_order(id)) else { return Ok(None) };
    let Some(last) = journal_objects(objects, prefix, name).await?.pop() else { return Ok(None) };
    let text = read_text(objects, &last).await?;
    let last_id = parse_lines(&last, &text).filter_map(Result::ok).last().map(|line| line.id);
    Ok(last_id.filter(|id| stream_order(id) > stream_order(&end)))
}

/// Whether the stream holds none of the window's writes after `stored` through its end and
/// entries after it: the window's writes were decided again, and what follows is their
/// decisions. The end is the later of the window's (`window`, its manifest's) and the one a
/// restore recorded when it found the window part-decided (raised then to the decisions made,
/// decided again with it). Records (a season's release, a reshard's) stay in the stream for the
/// drain whether decided or not: they say nothing either way.
async fn decided_whole(
    conn: &mut Connection,
    keys: &BoardKeys,
    name: &str,
    stored: &str,
    window: Option<&str>,
    newest: Option<&str>,
) -> Result<bool, StoreError> {
    let recorded = rollback::redecide(conn, keys).await?.map(|(_, end)| end);
    let end = [window.map(str::to_owned), recorded].into_iter().flatten().max_by_key(|id| stream_order(id));
    let (Some(end), Some(newest)) = (end, newest) else { return Ok(false) };
    if stream_order(newest) <= stream_order(&end) {
        return Ok(false);
    }
    let mut cursor = stored.to_owned();
    loop {
        let page = journal::after_until(conn, keys, name, Some(&cursor), &end, WINDOW_PAGE).await?;
        let Some(last) = page.last() else { return Ok(true) };
        if page.iter().any(|line| !line.is_record()) {
            return Ok(false);
        }
        cursor = last.id.clone();
    }
}

/// Before a stream's first entry (a rollback whose point is unknown: its whole stream).
const STREAM_START: &str = "0-0";

/// Lines of a window read a page at a time by `decided_whole`.
const WINDOW_PAGE: usize = 100;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_only_rises_in_the_order_of_stream_ids() {
        let mut marks = Marks::default();
        assert!(marks.raise("points", "9-3"));
        assert!(marks.raise("points", "10-0"), "10-0 comes after 9-3, though it sorts before it as text");
        assert!(!marks.raise("points", "9-9"));
        assert!(!marks.raise("points", "10-0"));
        assert_eq!(marks.get("points"), Some("10-0"));
        assert_eq!(marks.get("other"), None);
    }
}
