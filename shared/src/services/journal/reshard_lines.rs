//! The lines a move carries (`reshard`): each journal line of an old shard, read a page of its
//! stream or an object of S3 at a time (the objects for what the drain trimmed), applied by its
//! recorded effects in its user's new shard, in runs (`restore_lines.lua`, the line copied into
//! that shard's journal in the same call), each new shard's runs sent side by side. A range of
//! each old shard's lines at a time: those up to the point the move started at while writes go
//! on, then, fenced, those after it (docs/scaling.md#changing-shards).

use chrono::{DateTime, Utc};

use super::error::RestoreError;
use super::reshard_check::PreChecked;
use crate::archive::objects::{Objects, ReadError, journal_objects, object_order, parse_lines, read_text};
use crate::domain::journal::{Effects, Line, RESHARDED};
use crate::domain::rescale::Rescale;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys, Layout};
use crate::redis::store::Connection;
use crate::redis::{journal, restore};

/// Lines a run applies in one call, and a stream page read at once (`Resharder::with_stream_page`).
const RUN_LINES: usize = 200;
pub(super) const STREAM_PAGE: usize = 1000;
/// Runs under way at once, over every new shard: one a shard (twelve) took a move no faster and
/// held more memory (BENCHMARKS.md, the night of 2026-12-02).
const RUNS_UNDER_WAY: usize = 3;

/// A line's place in the move: the range it is moved in (an old shard's index, then past them
/// for the lines after the move's starting point), then its stream id's numbers. A new shard
/// takes its lines in this order, so how far it got (its checkpoint) is one place.
pub(super) type Place = (usize, u64, u64);

/// A stream id's numbers.
fn numbers(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

fn place(index: usize, id: &str) -> Option<Place> {
    numbers(id).map(|(ms, seq)| (index, ms, seq))
}

pub(super) fn parse_place(through: &str) -> Option<Place> {
    let (index, id) = through.split_once('/')?;
    place(index.parse().ok()?, id)
}

/// The lines of one old shard a pass moves: those after `after` (all when `None`) up to and
/// including `until` (all when `None`), at places of index `index`.
pub(super) struct Range<'a> {
    pub index: usize,
    pub after: Option<&'a str>,
    pub until: Option<&'a str>,
}

/// What a move carries from line to line: where they go, how far each new shard got, the runs
/// being filled.
pub(super) struct Moving<'a> {
    pub board: &'a crate::domain::config::Board,
    pub rescale: Option<&'a Rescale>,
    pub target: &'a Layout,
    pub targets: &'a [BoardKeys],
    pub token: &'a str,
    pub deadline: DateTime<Utc>,
    pub done: Vec<Option<Place>>,
    pub runs: Vec<restore::Run>,
    /// Each new shard's run under way (`flush`).
    pub sending: Vec<Option<tokio::task::JoinHandle<Result<restore::Applied, StoreError>>>>,
    /// The new shards with a run under way, the first sent first.
    pub sent: std::collections::VecDeque<usize>,
    pub clock: restore::Clock,
    /// Lines this invocation moved.
    pub moved: usize,
    /// The compare made while writes went on, with what the lines moved since wrote
    /// (`reshard_check::pre_check`): the fenced compare looks at those only.
    pub pre: Option<PreChecked>,
}

/// A move stopped part-way (an error, or its invocation cancelled) takes its runs under way
/// with it, as a killed process would: none lands after the move has returned.
impl Drop for Moving<'_> {
    fn drop(&mut self) {
        for sent in self.sending.iter().flatten() {
            sent.abort();
        }
    }
}

/// Where lines are read from and how long a run's lease holds.
pub(super) struct Lines<'a, O> {
    pub objects: &'a O,
    pub keys: &'a Keys,
    pub lease_ms: u64,
    pub page: usize,
    /// Each object this invocation read, by name: the place of its last line (an object's lines
    /// are in stream order). A later round skips one whose last line it has moved past.
    pub read: std::sync::Mutex<std::collections::HashMap<String, (u64, u64)>>,
}

impl<O: Objects> Lines<'_, O> {
    /// The lines of `range` of old shard `source` (journal `journal_name`), oldest first, a
    /// page or an object in memory at a time: the stream's lines after the last one moved, and
    /// the objects' when the stream may no longer hold the lines right after it (the drain
    /// stores before it trims, from the oldest entry: the lines it trimmed are in objects listed
    /// after). The stream is known to hold them when its oldest entry is at or before the last
    /// line moved, or is the oldest it had before the objects were last listed (nothing trimmed
    /// since: every line after the listed objects' was in the stream then, and still is). False:
    /// the deadline stopped it.
    pub(super) async fn move_range(
        &self,
        conn: &mut Connection,
        moving: &mut Moving<'_>,
        (source, journal_name): (&BoardKeys, &str),
        range: Range<'_>,
    ) -> Result<bool, RestoreError> {
        let until = range.until.unwrap_or("+");
        let mut last: Option<String> = range.after.map(str::to_owned);
        // The stream's oldest entry read before the objects were last listed (`None`: not yet).
        let mut listed: Option<Option<String>> = None;
        loop {
            let (oldest, page) = journal::page_with_oldest(conn, (source, journal_name), (last.as_deref(), until, self.page)).await?;
            let at_or_before_last =
                |oldest: &str| last.as_deref().and_then(numbers).is_some_and(|last| numbers(oldest).is_some_and(|o| o <= last));
            let held = oldest.as_deref().is_some_and(|o| at_or_before_last(o) || listed.as_ref().is_some_and(|l| l.as_deref() == Some(o)));
            if !held {
                listed = Some(oldest);
                if !self.move_objects(conn, moving, (journal_name, &range), &mut last).await? {
                    return Ok(false);
                }
            }
            if page.is_empty() {
                return Ok(true);
            }
            for line in &page {
                // Moved from an object listed after the page was read.
                if last.as_deref().and_then(numbers).is_some_and(|last| numbers(&line.id).is_some_and(|id| id <= last)) {
                    continue;
                }
                if !self.move_line(conn, moving, (range.index, journal_name), line).await? {
                    return Ok(false);
                }
                last = Some(line.id.clone());
            }
        }
    }

    /// The lines of `range` after `last` in `journal_name`'s objects, one object in memory at a
    /// time; `last` moved to the last of them. False: the deadline stopped it.
    async fn move_objects(
        &self,
        conn: &mut Connection,
        moving: &mut Moving<'_>,
        (journal_name, range): (&str, &Range<'_>),
        last: &mut Option<String>,
    ) -> Result<bool, RestoreError> {
        // Every object up to the range's end is read, its lines up to the last one moved
        // skipped: objects may overlap (a store rolled back drains its stream again from where
        // its copy stood), so one whose successor starts before the last line moved may still
        // hold lines after it, which skipping it whole lost (the check then refused the move,
        // the board left fenced). Objects are listed by their first line: one starting past the
        // range's end, and every one after it, holds none of its lines.
        let objects = journal_objects(self.objects, self.keys.prefix(), journal_name).await?;
        for object in &objects {
            let starts = object_order(object).map(|(_, ms, seq)| (ms, seq));
            if starts.is_some_and(|starts| range.until.and_then(numbers).is_some_and(|until| starts > until)) {
                break;
            }
            // Read whole by this invocation already, and every line of it moved past.
            let ends = self.read.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(object).copied();
            if ends.is_some_and(|ends| last.as_deref().and_then(numbers).is_some_and(|after| ends <= after)) {
                continue;
            }
            let unreadable = |e: ReadError| RestoreError::Unreadable(object.clone(), e.to_string());
            let text = read_text(self.objects, object).await.map_err(unreadable)?;
            let last_line = text.lines().rev().find(|line| !line.trim().is_empty());
            if let Some(ends) = last_line.and_then(|line| parse_lines(object, line).next()?.ok()).and_then(|line| numbers(&line.id)) {
                self.read.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(object.clone(), ends);
            }
            for line in parse_lines(object, &text) {
                let line = line.map_err(unreadable)?;
                let (after, id) = (last.as_deref().and_then(numbers), numbers(&line.id));
                if id.is_some_and(|id| range.until.and_then(numbers).is_some_and(|until| id > until)) {
                    return Ok(true);
                }
                if id.is_some_and(|id| after.is_some_and(|after| id <= after)) {
                    continue;
                }
                if !self.move_line(conn, moving, (range.index, journal_name), &line).await? {
                    return Ok(false);
                }
                *last = Some(line.id.clone());
            }
        }
        Ok(true)
    }

    /// Line `line` (of the journal named) into its user's new shard at a place of index `index`
    /// (a run sent when full). False: the deadline stopped the move before it, every run sent.
    async fn move_line(
        &self,
        conn: &mut Connection,
        moving: &mut Moving<'_>,
        (index, journal_name): (usize, &str),
        line: &Line,
    ) -> Result<bool, RestoreError> {
        // Every invocation moves a line at least: one past its deadline still goes on.
        if moving.moved > 0 && Utc::now() >= moving.deadline {
            self.flush_all(conn, moving).await?;
            return Ok(false);
        }
        let at =
            place(index, &line.id).ok_or_else(|| RestoreError::Invalid(format!("line {} of {journal_name}: no stream id", line.id)))?;
        // An earlier move's settling of its shard's records: this move settles its own.
        // A season's release: this move carries closed seasons itself (closed_seasons).
        if line.is_record() {
            return Ok(true);
        }
        let user = line.entry.get("user_id").and_then(|u| u.as_str()).ok_or_else(|| {
            RestoreError::Invalid(format!("line {} of {journal_name} names no user: it cannot be moved to a shard", line.id))
        })?;
        let t = moving.target.shard_of(user);
        if moving.done[t].is_some_and(|through| at <= through) {
            return Ok(true);
        }
        let mut entry = line.entry.clone();
        let (effects, recorded) = match &line.effects {
            Some(recorded) => {
                let effects = Effects::parse(recorded).map_err(|e| RestoreError::Invalid(format!("line {}: {e}", line.id)))?;
                match moving.rescale {
                    Some(rescale) => super::rescale::line(rescale, moving.board, &line.id, &mut entry, &effects)?,
                    None => (effects, recorded.to_string()),
                }
            }
            None => {
                return Err(RestoreError::Invalid(format!(
                    "line {} of {journal_name} records no effects (written before 2026-11-26): a board holding such lines cannot be moved",
                    line.id
                )));
            }
        };
        // A void stands after the journal it read, up to `through`: an id of this layout's
        // journal, which the moved lines no longer have. Moved, it stands at its own line
        // (services/voids.rs), where the user's writes keep their order.
        if entry.get("kind").and_then(|k| k.as_str()) == Some("void") {
            entry.insert(RESHARDED.into(), true.into());
        }
        if let Some(pre) = &mut moving.pre {
            pre.touched.note(&effects);
        }
        let entry = serde_json::Value::Object(entry).to_string();
        let (id, fields) = (format!("{index}/{}", line.id), [entry, line.outcome.clone(), recorded]);
        moving.runs[t].push_copied(&moving.targets[t], &id, &effects, moving.clock.now_ms(), fields);
        moving.done[t] = Some(at);
        moving.moved += 1;
        if moving.runs[t].lines() >= RUN_LINES {
            self.flush(conn, moving, t).await?;
        }
        Ok(true)
    }

    /// Sends new shard `t`'s run (none when empty) once the one sent before it to that shard
    /// has landed, and fewer than `RUNS_UNDER_WAY` are: the new shards take their runs side by
    /// side, each in order, while the next lines are read.
    async fn flush(&self, conn: &Connection, moving: &mut Moving<'_>, t: usize) -> Result<(), RestoreError> {
        self.landed(moving, t).await?;
        if moving.runs[t].lines() == 0 {
            return Ok(());
        }
        while moving.sent.len() >= RUNS_UNDER_WAY {
            let first = moving.sent[0];
            self.landed(moving, first).await?;
        }
        moving.sent.push_back(t);
        let run = std::mem::take(&mut moving.runs[t]);
        let (mut conn, target, token, lease_ms) = (conn.clone(), moving.targets[t].clone(), moving.token.to_owned(), self.lease_ms);
        moving.sending[t] = Some(tokio::spawn(async move {
            restore::apply_at(&mut conn, &target, &target.reshard_checkpoint(), &token, lease_ms, None, &run).await
        }));
        Ok(())
    }

    /// Waits for the run last sent to new shard `t`.
    async fn landed(&self, moving: &mut Moving<'_>, t: usize) -> Result<(), RestoreError> {
        let Some(sent) = moving.sending[t].take() else { return Ok(()) };
        moving.sent.retain(|u| *u != t);
        match sent.await.map_err(|e| StoreError::Protocol(format!("reshard call: {e}")))?? {
            restore::Applied::Applied => Ok(()),
            _ => Err(RestoreError::Running(moving.targets[t].guard())),
        }
    }

    /// Sends every run gathered and waits for every run sent: the first error, after all landed.
    pub(super) async fn flush_all(&self, conn: &Connection, moving: &mut Moving<'_>) -> Result<(), RestoreError> {
        let mut first = Ok(());
        for t in 0..moving.targets.len() {
            first = first.and(self.flush(conn, moving, t).await);
        }
        for t in 0..moving.targets.len() {
            first = first.and(self.landed(moving, t).await);
        }
        first
    }
}
