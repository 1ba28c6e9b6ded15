//! The lines a move carries (`reshard`): each journal line of an old shard, read from S3 one
//! object at a time and then from its stream, applied by its recorded effects in its user's new
//! shard, in runs (`restore_lines.lua`, the line copied into that shard's journal in the same
//! call). A range of each old shard's lines at a time: those up to the point the move started
//! at while writes go on, then, fenced, those after it (docs/scaling.md#changing-shards).

use chrono::{DateTime, Utc};

use super::error::RestoreError;
use super::reshard_check::PreChecked;
use crate::archive::objects::{Objects, ReadError, journal_objects, object_order, parse_lines, read_text};
use crate::domain::journal::{Effects, Line, RESHARDED};
use crate::domain::rescale::Rescale;
use crate::redis::keys::{BoardKeys, Keys, Layout};
use crate::redis::store::Connection;
use crate::redis::{journal, restore};

/// Lines a run applies in one call, and a stream page read at once.
const RUN_LINES: usize = 200;
const STREAM_PAGE: usize = 1000;

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

impl Range<'_> {
    fn holds(&self, id: (u64, u64)) -> bool {
        self.after.and_then(numbers).is_none_or(|after| id > after) && self.until.and_then(numbers).is_none_or(|until| id <= until)
    }
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
    pub clock: restore::Clock,
    /// Lines this invocation moved.
    pub moved: usize,
    /// The compare made while writes went on, with what the lines moved since wrote
    /// (`reshard_check::pre_check`): the fenced compare looks at those only.
    pub pre: Option<PreChecked>,
}

/// Where lines are read from and how long a run's lease holds.
pub(super) struct Lines<'a, O> {
    pub objects: &'a O,
    pub keys: &'a Keys,
    pub lease_ms: u64,
}

impl<O: Objects> Lines<'_, O> {
    /// Every line of every old shard (a re-encode's, fenced from its first step). False: the
    /// deadline stopped it.
    pub(super) async fn move_all(&self, conn: &mut Connection, moving: &mut Moving<'_>, source: &Layout) -> Result<bool, RestoreError> {
        for (index, (old, journal_name)) in source.all().iter().zip(source.journals()).enumerate() {
            let range = Range { index, after: None, until: None };
            if !self.move_range(conn, moving, (old, &journal_name), range).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The lines of `range` of old shard `source` (journal `journal_name`): one object in memory
    /// at a time, then the stream's lines in the range. False: the deadline stopped it.
    pub(super) async fn move_range(
        &self,
        conn: &mut Connection,
        moving: &mut Moving<'_>,
        (source, journal_name): (&BoardKeys, &str),
        range: Range<'_>,
    ) -> Result<bool, RestoreError> {
        let until = range.until.unwrap_or("+");
        let tail = loop {
            let mut tail: Vec<Line> = Vec::new();
            loop {
                let last = tail.last().map(|line| line.id.clone()).or_else(|| range.after.map(str::to_owned));
                let read = journal::after_until(conn, source, journal_name, last.as_deref(), until, STREAM_PAGE).await?;
                if read.is_empty() {
                    break;
                }
                tail.extend(read);
            }
            // The drain trims from the oldest entry: with the first one read still there, none
            // after it went between two pages (it is in an object then, which the lines at or
            // past the first are not read from). Read again when it went.
            match tail.first() {
                Some(first) if !journal::holds(conn, source, &first.id).await? => continue,
                _ => break tail,
            }
        };
        // Lines stored and still in the stream (a drain between the two reads) are moved from
        // the stream.
        let first = tail.first().and_then(|line| numbers(&line.id));
        // An object every new shard has moved past (its successor's first line included) is not
        // read again by a resumed move; nor one wholly outside the range.
        let applied = moving.done.iter().copied().min().flatten();
        let objects = journal_objects(self.objects, self.keys.prefix(), journal_name).await?;
        for (k, object) in objects.iter().enumerate() {
            let next = objects.get(k + 1).and_then(|next| object_order(next)).map(|(_, ms, seq)| (ms, seq));
            let starts = object_order(object).map(|(_, ms, seq)| (ms, seq));
            let before = next.is_some_and(|next| range.after.and_then(numbers).is_some_and(|after| next <= after));
            let past = starts.is_some_and(|starts| range.until.and_then(numbers).is_some_and(|until| starts > until));
            let moved = next.is_some_and(|(ms, seq)| applied.is_some_and(|applied| (range.index, ms, seq) <= applied));
            if before || past || moved {
                continue;
            }
            let unreadable = |e: ReadError| RestoreError::Unreadable(object.clone(), e.to_string());
            let text = read_text(self.objects, object).await.map_err(unreadable)?;
            for line in parse_lines(object, &text) {
                let line = line.map_err(unreadable)?;
                let id = numbers(&line.id);
                if id.is_some_and(|id| !range.holds(id) || first.is_some_and(|first| id >= first)) {
                    continue;
                }
                if !self.move_line(conn, moving, (range.index, journal_name), &line).await? {
                    return Ok(false);
                }
            }
        }
        for line in &tail {
            if !self.move_line(conn, moving, (range.index, journal_name), line).await? {
                return Ok(false);
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
            self.flush_all(conn, moving.targets, moving.token, &mut moving.runs).await?;
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
            self.flush(conn, &moving.targets[t], moving.token, &mut moving.runs[t]).await?;
        }
        Ok(true)
    }

    async fn flush(&self, conn: &mut Connection, target: &BoardKeys, token: &str, run: &mut restore::Run) -> Result<(), RestoreError> {
        if run.lines() == 0 {
            return Ok(());
        }
        if restore::apply_at(conn, target, &target.reshard_checkpoint(), token, self.lease_ms, None, run).await?
            != restore::Applied::Applied
        {
            return Err(RestoreError::Running(target.guard()));
        }
        *run = restore::Run::default();
        Ok(())
    }

    pub(super) async fn flush_all(
        &self,
        conn: &mut Connection,
        targets: &[BoardKeys],
        token: &str,
        runs: &mut [restore::Run],
    ) -> Result<(), RestoreError> {
        for (target, run) in targets.iter().zip(runs.iter_mut()) {
            self.flush(conn, target, token, run).await?;
        }
        Ok(())
    }
}
