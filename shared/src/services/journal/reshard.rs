//! Moving a board to the number of shards its configuration now says (docs/scaling.md#changing-
//! shards): `{"reshard": {"board": …}}` on the `journal` function. The journal's recorded
//! effects of every line of the old layout are applied in the user's shard of the new one
//! (`restore_lines.lua`, with the line copied into that shard's journal in the same call, so
//! the new layout's journal holds the board's whole history and a restore needs nothing else);
//! archived seasons are carried as they were (`closed_seasons`), every period set of either
//! layout is then compared, the layout recorded and the old keys freed.
//!
//! Fenced: the old shards' guards refuse journaled writes from the first step (a function still
//! configured the old way included), functions configured the new way refuse the board's writes
//! until the layout is recorded (`board_resharding`), and reads of the old layout answer
//! `board_restoring` while it moves. Resumable: each shard of the new layout records how far it
//! got in the call that applies a run (`<source shard>/<stream id>`), so an invocation stopped
//! by its deadline, or killed, goes on where the lines it applied end.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::restore::{RestoreError, Status};
use crate::archive::objects::{Objects, journal_objects, read_lines};
use crate::domain::config::{BoardKind, Config};
use crate::domain::guard;
use crate::domain::journal::{Effects, Entry, Line, RESHARDED, Stamp};
use crate::domain::period::Period;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys, journal_names, user_shard};
use crate::redis::store::{Connection, Store};
use crate::redis::{journal, layout, restore};

/// Lines a run applies in one call, and a stream page read at once.
const RUN_LINES: usize = 200;
const STREAM_PAGE: usize = 1000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReshardReport {
    pub board: String,
    pub from: u32,
    pub to: u32,
    pub status: Status,
    /// Lines applied to the new layout by this invocation.
    pub moved: usize,
    /// Period sets compared, old layout against new, before the switch.
    pub periods_checked: usize,
}

pub struct Resharder<O> {
    config: Arc<Config>,
    keys: Keys,
    store: Store,
    objects: O,
    lease_ms: u64,
}

/// A line's place in the move: its source shard, then its stream id's numbers.
type Place = (usize, u64, u64);

fn place(source: usize, id: &str) -> Option<Place> {
    let (ms, seq) = id.split_once('-')?;
    Some((source, ms.parse().ok()?, seq.parse().ok()?))
}

fn parse_place(through: &str) -> Option<Place> {
    let (source, id) = through.split_once('/')?;
    place(source.parse().ok()?, id)
}

/// A field of a new shard's reshard checkpoint (`through`, `from`).
async fn checkpoint<T: redis::FromRedisValue>(conn: &mut Connection, target: &BoardKeys, field: &str) -> Result<Option<T>, StoreError> {
    Ok(redis::cmd("HGET").arg(target.reshard_checkpoint()).arg(field).query_async(conn).await?)
}

impl<O: Objects> Resharder<O> {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, objects: O) -> Self {
        Self { config, keys, store, objects, lease_ms: super::restore::LOCK_LEASE_MS }
    }

    pub fn with_lease_ms(mut self, lease_ms: u64) -> Self {
        self.lease_ms = lease_ms;
        self
    }

    /// Moves `name` from the layout its data is in to its configured one, until done or
    /// `deadline`; invoked again, it goes on.
    pub async fn reshard(&self, name: &str, deadline: DateTime<Utc>) -> Result<ReshardReport, RestoreError> {
        let board =
            self.config.board(name).filter(|b| b.kind != BoardKind::Decaying).ok_or_else(|| RestoreError::UnknownBoard(name.to_owned()))?;
        if !self.keys.journal_on() {
            return Err(RestoreError::Invalid(
                "a reshard applies the board's journal: it needs the journal on (STANDINGS_JOURNAL_BUCKET)".into(),
            ));
        }
        let (from, to) = (self.store.board_shards(&self.keys, board).await?, board.shards);
        let mut report = ReshardReport { board: name.to_owned(), from, to, status: Status::Complete, moved: 0, periods_checked: 0 };
        let mut conn = self.store.write_connection().await?;
        let targets = self.keys.board_shards(name, to);
        // A move that recorded the new layout and stopped before its end: finished now.
        let unfinished = if from == to { self.moved_from(&mut conn, &targets).await? } else { None };
        if from == to && unfinished.is_none() {
            return Ok(report);
        }
        let token = format!("{:016x}", fastrand::u64(..));
        let mut locked = Vec::new();
        for target in &targets {
            if !restore::lock(&mut conn, target, &token, self.lease_ms).await? {
                for held in &locked {
                    restore::unlock(&mut conn, held, &token).await?;
                }
                return Err(RestoreError::Running(name.to_owned()));
            }
            locked.push(target.clone());
        }
        let moved = match unfinished {
            Some(moved_from) => self.finish_move(&mut conn, name, moved_from, &targets).await,
            None => self.move_locked(&mut conn, name, from, &targets, &token, deadline, &mut report).await,
        };
        for target in &targets {
            if let Err(error) = restore::unlock(&mut conn, target, &token).await {
                tracing::warn!(board = name, error = %error, "a reshard lock is left to its lease");
            }
        }
        moved.map(|()| report)
    }

    #[allow(clippy::too_many_arguments)]
    async fn move_locked(
        &self,
        conn: &mut Connection,
        name: &str,
        from: u32,
        targets: &[BoardKeys],
        token: &str,
        deadline: DateTime<Utc>,
        report: &mut ReshardReport,
    ) -> Result<(), RestoreError> {
        let sources = self.keys.board_shards(name, from);
        let mut done: Vec<Option<Place>> = Vec::with_capacity(targets.len());
        for target in targets {
            let through: Option<String> = checkpoint(conn, target, "through").await?;
            done.push(through.as_deref().and_then(parse_place));
        }
        let starting = done.iter().all(Option::is_none);
        // A move refused is refused before it fences anything: the board goes on as it was.
        if starting {
            // A lost shard's guard (its closed seasons, bans) is not there to carry: restored
            // first. (A guard not born with no history is a board that never took a write.)
            for (source, journal_name) in sources.iter().zip(journal_names(name, from)) {
                if !restore::born(conn, source).await?
                    && (journal::len(conn, source).await? > 0
                        || !journal_objects(&self.objects, self.keys.prefix(), &journal_name).await?.is_empty())
                {
                    return Err(RestoreError::Invalid(format!(
                        "board {name:?} is lost or being restored ({} holds no born guard): restore it, then move it",
                        source.guard()
                    )));
                }
            }
            for (target, journal_name) in targets.iter().zip(journal_names(name, targets.len() as u32)) {
                let objects = journal_objects(&self.objects, self.keys.prefix(), &journal_name).await?;
                if !objects.is_empty() || !conn.scan_slot_of(&target.guard(), &target.period_pattern()).await?.is_empty() {
                    return Err(RestoreError::Invalid(format!(
                        "the new layout of board {name:?} already holds boards or journal objects (a layout it had before?): \
                         delete its keys and its objects under {journal_name:?} first"
                    )));
                }
            }
        }
        for source in &sources {
            let _: () =
                redis::cmd("HSET").arg(source.guard()).arg(guard::FENCE).arg(1).query_async(conn).await.map_err(StoreError::from)?;
        }
        if starting {
            for target in targets {
                // What the move is from, for a move that records the layout and stops before
                // its end (see `moved_from`).
                let _: () = redis::cmd("HSET")
                    .arg(target.reshard_checkpoint())
                    .arg("from")
                    .arg(from)
                    .query_async(conn)
                    .await
                    .map_err(StoreError::from)?;
            }
            // A new shard's guard may exist (the drain marks a journal with no objects born): it
            // takes the moved lines' bans all the same.
            for target in targets {
                let _: () = redis::cmd("HSET")
                    .arg(target.restore_claims())
                    .arg(target.guard())
                    .arg("1")
                    .query_async(conn)
                    .await
                    .map_err(StoreError::from)?;
            }
        }
        let mut runs: Vec<restore::Run> = targets.iter().map(|_| restore::Run::default()).collect();
        let clock = restore::Clock::read(conn).await?;
        for (index, journal_name) in journal_names(name, from).iter().enumerate() {
            for line in self.lines(conn, &sources[index], journal_name).await? {
                // Every invocation moves a line at least: one past its deadline still goes on.
                if report.moved > 0 && Utc::now() >= deadline {
                    self.flush_all(conn, targets, token, &mut runs).await?;
                    report.status = Status::InProgress;
                    return Ok(());
                }
                let at = place(index, &line.id)
                    .ok_or_else(|| RestoreError::Invalid(format!("line {} of {journal_name}: no stream id", line.id)))?;
                // An earlier move's settling of its shard's records: this move settles its own.
                // A season's release: this move carries closed seasons itself (closed_seasons).
                if matches!(line.entry.get("kind").and_then(|k| k.as_str()), Some("reshard" | "season_release")) {
                    continue;
                }
                let user = line.entry.get("user_id").and_then(|u| u.as_str()).ok_or_else(|| {
                    RestoreError::Invalid(format!("line {} of {journal_name} names no user: it cannot be moved to a shard", line.id))
                })?;
                let t = user_shard(user, targets.len() as u32) as usize;
                if done[t].is_some_and(|through| at <= through) {
                    continue;
                }
                let (effects, recorded) = match &line.effects {
                    Some(recorded) => (
                        Effects::parse(recorded).map_err(|e| RestoreError::Invalid(format!("line {}: {e}", line.id)))?,
                        recorded.to_string(),
                    ),
                    None => {
                        return Err(RestoreError::Invalid(format!(
                            "line {} of {journal_name} records no effects (written before 2026-11-26): a board holding such lines cannot be moved",
                            line.id
                        )));
                    }
                };
                let mut entry = line.entry.clone();
                // A void stands after the journal it read, up to `through`: an id of this layout's
                // journal, which the moved lines no longer have. Moved, it stands at its own line
                // (services/voids.rs), where the user's writes keep their order.
                if entry.get("kind").and_then(|k| k.as_str()) == Some("void") {
                    entry.insert(RESHARDED.into(), true.into());
                }
                let entry = serde_json::Value::Object(entry).to_string();
                let (id, fields) = (format!("{index}/{}", line.id), [entry, line.outcome.clone(), recorded]);
                runs[t].push_copied(&targets[t], &id, &effects, clock.now_ms(), fields);
                report.moved += 1;
                if runs[t].lines() >= RUN_LINES {
                    self.flush(conn, &targets[t], token, &mut runs[t]).await?;
                }
            }
        }
        self.flush_all(conn, targets, token, &mut runs).await?;
        let board = self.config.board(name).ok_or_else(|| RestoreError::UnknownBoard(name.to_owned()))?;
        let carried = super::closed_seasons::carry(conn, board, &sources, targets, Utc::now()).await?;
        report.periods_checked = self.compare(conn, name, &sources, targets, &carried).await?;
        self.finish_move(conn, name, from, targets).await
    }

    /// The layout a move recorded and did not finish (`from` in a new shard's checkpoint).
    async fn moved_from(&self, conn: &mut Connection, targets: &[BoardKeys]) -> Result<Option<u32>, RestoreError> {
        for target in targets {
            let from: Option<u32> = checkpoint(conn, target, "from").await?;
            if from.is_some() {
                return Ok(from);
            }
        }
        Ok(None)
    }

    /// The switch, every step of which may run again: the new layout recorded (writes resume on
    /// every container within 30 s) and born, the old layout's keys freed (its history is in
    /// the new layout's journal now), the checkpoints last.
    async fn finish_move(&self, conn: &mut Connection, name: &str, from: u32, targets: &[BoardKeys]) -> Result<(), RestoreError> {
        layout::record(conn, &self.keys, name, targets.len() as u32).await?;
        self.store.forget_layout(&self.keys, name);
        let settled = Entry::Reshard { at: Stamp(Utc::now()), board: name, from, to: targets.len() as u32 }.json();
        for target in targets {
            // A shard this switch finished already takes writes: settled again, it could drop
            // the record of a set it lost since, and the fence that loss put up would be lifted.
            if !restore::claimed(conn, target).await? {
                continue;
            }
            restore::settle_kept_records(conn, target, &settled).await?;
            restore::finish(conn, target, true, false).await?;
        }
        if let Some(board) = self.config.board(name) {
            super::closed_seasons::record_released(conn, board, targets, Utc::now()).await?;
        }
        // The board's records (its layout and a score board's scale) stay: they are the board's,
        // not a layout's.
        let records = [self.keys.board_layout(name), self.keys.board_scale(name)];
        for source in self.keys.board_shards(name, from) {
            let old: Vec<String> =
                conn.scan_slot_of(&source.guard(), &source.pattern_all()).await?.into_iter().filter(|key| !records.contains(key)).collect();
            for chunk in old.chunks(500) {
                let _: () = redis::cmd("UNLINK").arg(chunk).query_async(conn).await.map_err(StoreError::from)?;
            }
        }
        for target in targets {
            let _: () = redis::cmd("DEL").arg(target.reshard_checkpoint()).query_async(conn).await.map_err(StoreError::from)?;
        }
        Ok(())
    }

    /// Every line of one shard of the old layout, in order: its stream read first, then its
    /// objects up to the stream's first line (a drain storing and trimming lines meanwhile moves
    /// them from the one to the other, never out of both).
    async fn lines(&self, conn: &mut Connection, source: &BoardKeys, journal_name: &str) -> Result<Vec<Line>, RestoreError> {
        let mut tail: Vec<Line> = Vec::new();
        if let Some(until) = journal::newest_id(conn, source).await? {
            loop {
                let last = tail.last().map(|line| line.id.clone());
                let page = journal::after_until(conn, source, journal_name, last.as_deref(), &until, STREAM_PAGE).await?;
                if page.is_empty() {
                    break;
                }
                tail.extend(page);
            }
        }
        let first = tail.first().and_then(|line| place(0, &line.id));
        let mut lines = Vec::new();
        for object in journal_objects(&self.objects, self.keys.prefix(), journal_name).await? {
            let stored = read_lines(&self.objects, &object).await.map_err(|e| RestoreError::Unreadable(object.clone(), e.to_string()))?;
            lines.extend(stored.into_iter().filter(|line| first.is_none_or(|first| place(0, &line.id).is_some_and(|at| at < first))));
        }
        lines.extend(tail);
        Ok(lines)
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

    async fn flush_all(
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

    /// Every period set of the old layout against the same period's sets of the new: the
    /// same members with the same composites, or the board stays fenced. The count compared.
    async fn compare(
        &self,
        conn: &mut Connection,
        name: &str,
        sources: &[BoardKeys],
        targets: &[BoardKeys],
        carried: &[Period],
    ) -> Result<usize, RestoreError> {
        // A closed period is carried as the old layout holds it, not by its lines (a restore
        // may have brought its set back beside the frozen board in an old shard).
        let closed: Vec<String> = sources.first().map_or_else(Vec::new, |source| {
            carried.iter().filter_map(|period| source.relative_of(&source.period(period)).map(str::to_owned)).collect()
        });
        // Both layouts' periods: one the new layout holds and the old does not (a season whose
        // set the moved lines brought back after its freeze) differs as much as a lost one.
        let mut periods: BTreeMap<String, ()> = BTreeMap::new();
        for source in sources.iter().chain(targets) {
            for key in conn.scan_slot_of(&source.guard(), &source.period_pattern()).await? {
                if let Some(relative) = source.relative_of(&key) {
                    periods.insert(relative.to_owned(), ());
                }
            }
        }
        for relative in periods.keys().filter(|relative| !closed.contains(relative)) {
            let members = |shards: &[BoardKeys]| shards.iter().map(|shard| shard.relative(relative)).collect::<Vec<_>>();
            let (mut old, mut new) = (Vec::new(), Vec::new());
            for key in members(sources) {
                old.extend(
                    redis::AsyncCommands::zrange_withscores::<_, Vec<(String, f64)>>(conn, key, 0, -1).await.map_err(StoreError::from)?,
                );
            }
            for key in members(targets) {
                new.extend(
                    redis::AsyncCommands::zrange_withscores::<_, Vec<(String, f64)>>(conn, key, 0, -1).await.map_err(StoreError::from)?,
                );
            }
            crate::redis::sharded::sort(&mut old);
            crate::redis::sharded::sort(&mut new);
            if old != new {
                return Err(RestoreError::Invalid(format!(
                    "reshard of board {name:?}: period {relative} holds {} entries in the old layout and {} in the new, not the same: the board stays fenced",
                    old.len(),
                    new.len()
                )));
            }
        }
        Ok(periods.len())
    }
}
