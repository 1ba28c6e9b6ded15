//! The writes a rolled-back store took before its fence (docs/journal.md#rollbacks), kept in S3
//! apart from the journal's objects while they wait to be decided again. The drain stores nothing
//! of such a board (its entries were decided against the snapshot), so until its restore decides
//! them they live in one stream: a loss of every key between the fence and the restore would take
//! writes that were acknowledged. Kept here, a restore puts them back in the stream and decides
//! them as if nothing had been lost.
//!
//! A window is fixed once the board is fenced: the entries after the drain's record `after`
//! through the stream's newest. Its objects are written once (`put_new`), its manifest last, so
//! a window is read only whole; a run that stops part-way writes the same objects again.

use serde::{Deserialize, Serialize};

use crate::archive::objects::{ObjectError, Objects, ReadError, lines_body, read_lines, window_objects};
use crate::domain::journal::{Line, stream_order};
use crate::redis::error::StoreError;
use crate::redis::journal;
use crate::redis::keys::BoardKeys;
use crate::redis::store::Connection;

/// Entries an object of a window holds, at most.
const WINDOW_CHUNK: usize = 5000;
/// The object naming a window's objects, written after every one of them.
pub(super) const MANIFEST: &str = "window.json";

#[derive(Debug, thiserror::Error)]
pub enum WindowError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Objects(#[from] ObjectError),
    #[error("object {0}: {1}")]
    Unreadable(String, String),
}

impl From<ReadError> for WindowError {
    fn from(error: ReadError) -> Self {
        match error {
            ReadError::Unavailable(error) => Self::Objects(error),
            ReadError::Unreadable(name, problem) => Self::Unreadable(name, problem),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    /// The window's newest entry.
    through: String,
    /// Its objects, oldest entries first.
    objects: Vec<String>,
}

/// Stores the entries of `journal`'s stream after `after` (the drain's record), none if it holds
/// none, unless a window after that record is stored already.
pub async fn keep<O: Objects>(
    conn: &mut Connection,
    keys: &BoardKeys,
    objects: &O,
    prefix: &str,
    journal: &str,
    after: &str,
) -> Result<(), WindowError> {
    keep_in(conn, keys, objects, &window_objects(prefix, journal, after), journal, after).await
}

/// `keep`, in `folder` (`older_kept` keeps an older layout's writes so).
pub(super) async fn keep_in<O: Objects>(
    conn: &mut Connection,
    keys: &BoardKeys,
    objects: &O,
    folder: &str,
    journal: &str,
    after: &str,
) -> Result<(), WindowError> {
    let manifest = format!("{folder}{MANIFEST}");
    if objects.list(folder).await?.contains(&manifest) {
        return Ok(());
    }
    let (mut cursor, mut names) = (after.to_owned(), Vec::new());
    loop {
        let page = journal::after(conn, keys, journal, Some(&cursor), WINDOW_CHUNK).await?;
        let (Some(first), Some(last)) = (page.first(), page.last()) else { break };
        let name = format!("{folder}{}.lines", first.id);
        objects.put_new(&name, lines_body(page.iter())).await?;
        names.push(name);
        cursor = last.id.clone();
    }
    // An empty window is kept too (`through` = `after`): entries a later `keep` would find are
    // live writes after its restore (its guard lost before a drain), never a window's, and
    // are never decided again (found by review).
    let body = serde_json::to_vec(&Manifest { through: cursor, objects: names }).expect("a manifest serializes");
    objects.put_new(&manifest, body).await?;
    Ok(())
}

/// The window stored after `after`, put back in the stream where the stream lacks it (a loss
/// took the stream since): its newest entry (`after` itself for an empty window), or `None`
/// when no window is stored.
pub async fn bring_back<O: Objects>(
    conn: &mut Connection,
    keys: &BoardKeys,
    objects: &O,
    prefix: &str,
    journal: &str,
    after: &str,
) -> Result<Option<String>, WindowError> {
    bring_back_from(conn, keys, objects, &window_objects(prefix, journal, after)).await
}

/// `bring_back`, from `folder`.
pub(super) async fn bring_back_from<O: Objects>(
    conn: &mut Connection,
    keys: &BoardKeys,
    objects: &O,
    folder: &str,
) -> Result<Option<String>, WindowError> {
    let Some(manifest) = manifest(objects, folder).await? else { return Ok(None) };
    for name in &manifest.objects {
        // Only what follows the stream's last id: a stream that kept the window (or part of it,
        // put back by an attempt that stopped) holds the rest, or decided it already.
        let newest = journal::last_generated(conn, keys).await?;
        let lines: Vec<Line> = read_lines(objects, name)
            .await?
            .into_iter()
            .filter(|line| newest.as_deref().is_none_or(|newest| stream_order(&line.id) > stream_order(newest)))
            .collect();
        journal::put_back(conn, keys, &lines).await?;
    }
    Ok(Some(manifest.through))
}

/// The newest entry of the window stored after `after`, if one is stored (read, not put back).
pub async fn through<O: Objects>(objects: &O, prefix: &str, journal: &str, after: &str) -> Result<Option<String>, WindowError> {
    Ok(manifest(objects, &window_objects(prefix, journal, after)).await?.map(|manifest| manifest.through))
}

async fn manifest<O: Objects>(objects: &O, folder: &str) -> Result<Option<Manifest>, WindowError> {
    let name = format!("{folder}{MANIFEST}");
    if !objects.list(folder).await?.contains(&name) {
        return Ok(None);
    }
    let body = objects.get(&name).await?;
    serde_json::from_slice(&body).map(Some).map_err(|error| WindowError::Unreadable(name, error.to_string()))
}
