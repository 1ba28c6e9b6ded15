//! A journal's stream stored in S3 the way the drain stores it (docs/journal.md): chunks of one
//! UTC date from the oldest entry not yet stored, each an object named by its first entry's
//! stream id and never replaced. The drain stores and trims; a move stores its new layout's
//! streams before its switch, without trimming (its lock keeps the drain from trimming them
//! meanwhile), so a Redis lost right after a switch is restored from S3 whole. Both walk the one
//! chain of objects: each starts right after another's last entry (or at the stream's first), so
//! a chunk either is created or is found stored with that very first entry, whoever got there
//! first and at whatever size.

use crate::archive::objects::{Objects, Put, lines_body, object_name};
use crate::domain::journal::Line;
use crate::redis::keys::{BoardKeys, Keys, Layout};
use crate::redis::store::Connection;
use crate::redis::{error::StoreError, journal};

use super::error::RestoreError;

/// Entries read (and stored as one object at most) per step.
pub const CHUNK_ENTRIES: usize = 5000;

/// The field of a new shard's reshard checkpoint naming the last entry its stream has stored.
const STORED: &str = "stored";

/// The lines of `lines`' first date, from the first (that one at least: a line without a
/// date is a chunk alone), and the name of the object they are stored as.
pub(super) fn chunk<'a>(prefix: &str, journal: &str, lines: &'a [Line]) -> Option<(String, &'a [Line])> {
    let first = lines.first()?;
    let date = first.date().map_or_else(|| "unknown".to_owned(), |d| d.to_string());
    let same = lines.iter().take_while(|line| line.date().map(|d| d.to_string()).as_deref() == Some(&date)).count();
    Some((object_name(prefix, journal, &date, &first.id), &lines[..same.max(1)]))
}

/// The first and last stream ids of a stored object's lines.
pub(super) fn ids(body: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(body).ok()?;
    let id = |line: &str| serde_json::from_str::<Line>(line).ok().map(|line| line.id);
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first = id(lines.next()?)?;
    let last = match lines.next_back() {
        Some(line) => id(line)?,
        None => first.clone(),
    };
    Some((first, last))
}

/// Stores what `shard`'s stream holds past what an earlier call stored (recorded on the
/// shard's reshard checkpoint, deleted with it at the switch), a chunk at least, until the
/// stream is stored or `deadline` passes. Whether it is stored whole.
pub(super) async fn store_new<O: Objects>(
    conn: &mut Connection,
    objects: &O,
    prefix: &str,
    (shard, journal_name): (&BoardKeys, &str),
    deadline: chrono::DateTime<chrono::Utc>,
) -> Result<bool, RestoreError> {
    let mut after: Option<String> =
        redis::cmd("HGET").arg(shard.reshard_checkpoint()).arg(STORED).query_async(conn).await.map_err(StoreError::from)?;
    loop {
        let lines = journal::after(conn, shard, journal_name, after.as_deref(), CHUNK_ENTRIES).await?;
        let Some((name, chunk)) = chunk(prefix, journal_name, &lines) else { return Ok(true) };
        let last = match objects.put_new(&name, lines_body(chunk)).await? {
            Put::Created => chunk[chunk.len() - 1].id.clone(),
            Put::Exists => match ids(&objects.get(&name).await?) {
                Some((first, last)) if first == chunk[0].id => last,
                _ => return Err(RestoreError::Unreadable(name, "a stored object does not begin where its name says".into())),
            },
        };
        let _: () =
            redis::cmd("HSET").arg(shard.reshard_checkpoint()).arg(STORED).arg(&last).query_async(conn).await.map_err(StoreError::from)?;
        after = Some(last);
        if chrono::Utc::now() >= deadline {
            return Ok(journal::after(conn, shard, journal_name, after.as_deref(), 1).await?.is_empty());
        }
    }
}

/// Shards whose streams are stored at once: each holds a chunk (up to `CHUNK_ENTRIES` lines and
/// its object's body) in memory, and a board may have 64.
const STORES_AT_ONCE: usize = 3;

/// `store_new` for every shard of `layout`, `STORES_AT_ONCE` shards side by side (each its own
/// chain of objects and its own checkpoint): whether each is stored whole.
pub(super) async fn store_layout<O: Objects>(
    conn: &mut Connection,
    objects: &O,
    keys: &Keys,
    layout: &Layout,
    deadline: chrono::DateTime<chrono::Utc>,
) -> Result<bool, RestoreError> {
    use futures::{StreamExt, TryStreamExt};
    let (shards, journals) = (layout.all(), layout.journals());
    // Gathered first: a lazy map held across the await is not `Send` for every lifetime.
    let stores: Vec<_> = shards
        .iter()
        .zip(&journals)
        .map(|(shard, journal_name)| {
            let mut conn = conn.clone();
            async move { store_new(&mut conn, objects, keys.prefix(), (shard, journal_name), deadline).await }
        })
        .collect();
    let whole: Vec<bool> = futures::stream::iter(stores).buffer_unordered(STORES_AT_ONCE).try_collect().await?;
    Ok(whole.into_iter().all(|whole| whole))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_reads_back_to_its_last_id() {
        let lines = [Line::new("1-0", "b", r#"{"kind":"event"}"#, "a1"), Line::new("1-1", "b", r#"{"kind":"event"}"#, "a1")];
        let body = lines_body(&lines);
        assert_eq!(String::from_utf8(body.clone()).unwrap().lines().count(), 2);
        assert_eq!(ids(&body), Some(("1-0".to_owned(), "1-1".to_owned())));
        assert_eq!(ids(b"not json\n"), None);
    }
}
