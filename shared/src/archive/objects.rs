//! Where drained journal entries go (docs/journal.md): objects that are written once and never replaced, so a
//! drain that stopped between storing a chunk and trimming it (a crash, the deadline) cannot
//! store its entries twice, and two drains racing cannot shrink what the other stored.

use crate::domain::journal::Line;

/// What storing a new object did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Put {
    Created,
    /// An object of that name was already there: left as it was.
    Exists,
}

#[derive(Debug, thiserror::Error)]
#[error("the journal bucket: {0}")]
pub struct ObjectError(pub String);

/// A bucket of objects, each written at most once.
pub trait Objects: Send + Sync {
    /// Stores `body` as `key` unless an object of that name exists.
    fn put_new(&self, key: &str, body: Vec<u8>) -> impl Future<Output = Result<Put, ObjectError>> + Send;
    fn get(&self, key: &str) -> impl Future<Output = Result<Vec<u8>, ObjectError>> + Send;
    /// The names of every object under `prefix`.
    fn list(&self, prefix: &str) -> impl Future<Output = Result<Vec<String>, ObjectError>> + Send;
    /// The names of every object under `prefix` with their sizes in bytes, which a restore
    /// reports its progress in (a bucket that lists no sizes, a test's, gives 0).
    fn list_sized(&self, prefix: &str) -> impl Future<Output = Result<Vec<(String, u64)>, ObjectError>> + Send {
        async move { Ok(self.list(prefix).await?.into_iter().map(|name| (name, 0)).collect()) }
    }
    /// Stores `body` as `key`, replacing what was there: only the drain's record of how far each
    /// journal was stored (`marks_name`), never a journal object. A bucket that cannot (a test's)
    /// fails, and the drain then goes without that record.
    fn put(&self, key: &str, body: Vec<u8>) -> impl Future<Output = Result<(), ObjectError>> + Send {
        let _ = (key, body);
        async { Err(ObjectError("this bucket takes no replacing put".into())) }
    }
}

/// Whether anything is stored under a prefix: the journal's witness that a board has a history
/// its Redis may have lost (`services::journal::births`). Any bucket of objects is one.
pub trait Witness: Send + Sync {
    fn holds_any(&self, prefix: &str) -> impl Future<Output = Result<bool, ObjectError>> + Send;
}

impl<O: Objects> Witness for O {
    async fn holds_any(&self, prefix: &str) -> Result<bool, ObjectError> {
        Ok(!self.list(prefix).await?.is_empty())
    }
}

/// The drain's record of the last entry it stored and trimmed of each journal of the tenant
/// `prefix` (docs/journal.md#rollbacks): under `journal/` (the functions' S3 permissions), in
/// no partition of the lines and no `.jsonl`, so no query of the journal reads it.
pub fn marks_name(prefix: &str) -> String {
    format!("journal/_marks/prefix={prefix}/drained.json")
}

/// The folder of the writes journal `journal` of tenant `prefix` took on a rolled-back store
/// after the drain's record `after`, waiting to be decided again (docs/journal.md#rollbacks):
/// no `.jsonl` in it and in no partition of the lines, so no query of the journal reads them.
pub fn window_objects(prefix: &str, journal: &str, after: &str) -> String {
    format!("journal/_windows/prefix={prefix}/board={journal}/after={after}/")
}

/// The folder of the writes a store older than `board`'s last switch took in the layout it held
/// before its fence (docs/journal.md#rollbacks), kept while they wait to be decided again where
/// the board switched to: `at=<switch ms>/`, a window per journal (`<journal>/`) and, once every
/// one is decided, `decided`. In no partition of the lines and no `.jsonl`.
pub fn older_objects(prefix: &str, board: &str) -> String {
    format!("{}board={board}/", older_of_tenant(prefix))
}

/// `older_objects` of every board of tenant `prefix`.
pub fn older_of_tenant(prefix: &str) -> String {
    format!("journal/_older/prefix={prefix}/")
}

/// `older_objects` of the switch at `at_ms`.
pub fn older_at(prefix: &str, board: &str, at_ms: i64) -> String {
    format!("{}at={at_ms:013}/", older_objects(prefix, board))
}

/// The record that `board` of tenant `prefix` switched to generation `generation` of its layout
/// (docs/boards.md#changing-max_score), written once that generation's journal is whole in S3:
/// how a restore with Redis lost finds the generation (beside the journal, under no `board=`).
pub fn generation_name(prefix: &str, board: &str, generation: u32) -> String {
    format!("{}{generation}", generations_of(prefix, board))
}

/// The record of a move's switch of `board` to `layout` (`<shards>[:<generation>]`) at `at_ms`,
/// with the scale it recorded when it re-encoded the scores (docs/scaling.md#changing-shards):
/// written before the switch records the layout in Redis, so the newest names where the data is,
/// whatever an older store (a snapshot taken before the switch) records. Under no `board=`.
pub fn switch_name(prefix: &str, board: &str, at_ms: i64, layout: &str, max_score: Option<i64>) -> String {
    let scale = max_score.map_or("-".to_owned(), |max| max.to_string());
    format!("{}{at_ms:013}_{layout}_{scale}", switches_of(prefix, board))
}

/// The folder of `board`'s switch records.
pub fn switches_of(prefix: &str, board: &str) -> String {
    format!("journal/_switches/prefix={prefix}/board={board}/")
}

/// `switch_name`'s parts: the time, the layout's record text and the scale.
pub fn switch_of(name: &str) -> Option<(i64, &str, Option<i64>)> {
    let (_, file) = name.rsplit_once('/')?;
    let mut parts = file.splitn(3, '_');
    let at = parts.next()?.parse().ok()?;
    let layout = parts.next()?;
    let scale = match parts.next()? {
        "-" => None,
        max => Some(max.parse().ok()?),
    };
    Some((at, layout, scale))
}

/// The folder of `board`'s generation records.
pub fn generations_of(prefix: &str, board: &str) -> String {
    format!("journal/_generations/prefix={prefix}/board={board}/g")
}

/// The object holding a chunk whose first entry is `first_id`, written on UTC `date` (Hive-style
/// partitions: Athena and DuckDB read `prefix`, `board` and `dt` as columns; `dt`, since a sign-in has a `date` of its own).
pub fn object_name(prefix: &str, board: &str, date: &str, first_id: &str) -> String {
    format!("{}{first_id}.jsonl", date_objects(prefix, board, date))
}

/// The folder of one board's objects of one UTC date (`YYYY-MM-DD`).
pub fn date_objects(prefix: &str, board: &str, date: &str) -> String {
    format!("{}dt={date}/", board_objects(prefix, board))
}

/// The folder of every object of one board's journal.
pub fn board_objects(prefix: &str, board: &str) -> String {
    format!("journal/prefix={prefix}/board={board}/")
}

/// The prefix of every sharded layout's objects of `board` (`board=<board>:<k>of<n>:…`): a shard's
/// name starts with its board's and a `:`, which no board name holds.
pub fn layouts_objects(prefix: &str, board: &str) -> String {
    format!("journal/prefix={prefix}/board={board}:")
}

/// Where an object of `board_objects` stands in the board's order of writes: its date, then its
/// first stream id as numbers (`…-10` after `…-9`). `None` for a name the drain does not write.
pub fn object_order(name: &str) -> Option<(String, u64, u64)> {
    let (folder, file) = name.rsplit_once('/')?;
    let date = folder.rsplit_once("/dt=")?.1;
    let (ms, seq) = file.strip_suffix(".jsonl")?.split_once('-')?;
    Some((date.to_owned(), ms.parse().ok()?, seq.parse().ok()?))
}

/// Why a board's journal objects could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Unavailable(#[from] ObjectError),
    #[error("object {0}: {1}")]
    Unreadable(String, String),
}

/// The names of every object of `board`'s journal, in the board's order of writes.
pub async fn journal_objects<O: Objects>(objects: &O, prefix: &str, board: &str) -> Result<Vec<String>, ObjectError> {
    Ok(journal_listing(objects, prefix, board).await?.into_iter().map(|(name, _)| name).collect())
}

/// `journal_objects` with each object's size in bytes.
pub async fn journal_listing<O: Objects>(objects: &O, prefix: &str, board: &str) -> Result<Vec<(String, u64)>, ObjectError> {
    let mut listed: Vec<(String, u64)> =
        objects.list_sized(&board_objects(prefix, board)).await?.into_iter().filter(|(name, _)| object_order(name).is_some()).collect();
    listed.sort_by_cached_key(|(name, _)| object_order(name));
    Ok(listed)
}

/// `lines` as an object's body: one JSON line each, as `parse_lines` reads them.
pub fn lines_body<'a>(lines: impl IntoIterator<Item = &'a Line>) -> Vec<u8> {
    let mut body = Vec::new();
    for line in lines {
        serde_json::to_writer(&mut body, line).expect("a journal line always serializes");
        body.push(b'\n');
    }
    body
}

/// An object's lines.
pub async fn read_lines<O: Objects>(objects: &O, name: &str) -> Result<Vec<Line>, ReadError> {
    let text = read_text(objects, name).await?;
    parse_lines(name, &text).collect()
}

/// Object `name`'s text, whose lines `parse_lines` reads one at a time.
pub async fn read_text<O: Objects>(objects: &O, name: &str) -> Result<String, ReadError> {
    let body = objects.get(name).await?;
    String::from_utf8(body).map_err(|e| ReadError::Unreadable(name.to_owned(), e.to_string()))
}

/// The lines of object `name`'s `text`, each read when it is asked for.
pub fn parse_lines<'a>(name: &'a str, text: &'a str) -> impl Iterator<Item = Result<Line, ReadError>> + 'a {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(move |l| serde_json::from_str(l).map_err(|e| ReadError::Unreadable(name.to_owned(), e.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_sort_by_date_then_stream_id() {
        let name = |id: &str| object_name("st", "points", "2026-11-22", id);
        assert!(object_order(&name("5-9")) < object_order(&name("5-10")));
        assert!(object_order(&name("9-0")) < object_order(&name("10-0")));
        assert!(object_order(&object_name("st", "points", "2026-11-21", "99-0")) < object_order(&name("5-0")));
        assert_eq!(object_order("journal/prefix=st/board=points/readme.txt"), None);
    }

    #[test]
    fn objects_are_partitioned_by_board_and_date() {
        assert_eq!(object_name("st", "points", "2026-11-22", "17-0"), "journal/prefix=st/board=points/dt=2026-11-22/17-0.jsonl");
    }
}
