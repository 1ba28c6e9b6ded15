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

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::restore::{RestoreError, Status};
use crate::archive::objects::{Objects, ReadError, journal_objects, object_order, parse_lines, read_text};
use crate::domain::config::{BoardKind, Config};
use crate::domain::guard;
use crate::domain::journal::{Effects, Entry, Line, RESHARDED, Stamp};
use crate::domain::rescale::Rescale;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys, Layout};
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
    /// The `max_score` the board's scores were re-encoded from and to (docs/boards.md#changing-max_score).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_score: Option<ScaleMove>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ScaleMove {
    pub from: i64,
    pub to: i64,
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

/// What a move carries from line to line: where they go, how far each new shard got, the runs
/// being filled.
struct Moving<'a> {
    board: &'a crate::domain::config::Board,
    rescale: Option<&'a Rescale>,
    target: &'a Layout,
    targets: &'a [BoardKeys],
    token: &'a str,
    deadline: DateTime<Utc>,
    done: Vec<Option<Place>>,
    runs: Vec<restore::Run>,
    clock: restore::Clock,
}

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
        let mut conn = self.store.write_connection().await?;
        let source = super::generations::held(&self.store, &mut conn, &self.keys, board).await?;
        let (from, to) = (source.shards(), board.shards);
        let rescale = layout::held_scale(&mut conn, &self.keys, board, Utc::now()).await?.and_then(|held| Rescale::new(board, held));
        if let Some(refusal) = rescale.as_ref().and_then(|_| super::rescale::refusal(board)) {
            return Err(RestoreError::Invalid(refusal));
        }

        let max_score = rescale.as_ref().map(|rescale| ScaleMove { from: rescale.from_max(), to: rescale.to_max() });
        let mut report =
            ReshardReport { board: name.to_owned(), from, to, status: Status::Complete, moved: 0, periods_checked: 0, max_score };
        // Re-encoded scores are new keys and a new journal: the next generation's.
        let target = self.keys.layout_at(name, to, source.generation() + u32::from(rescale.is_some()));
        let targets = target.all();
        // A move that recorded the new layout and stopped before its end: finished now.
        let settled = from == to && rescale.is_none();
        let unfinished = if settled { self.moved_from(&mut conn, name, &targets).await? } else { None };
        if settled && unfinished.is_none() {
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
            Some(moved_from) => self.finish_move(&mut conn, name, &moved_from, &target, None).await,
            None => {
                let moving = (&source, &target, rescale.as_ref());
                self.move_locked(&mut conn, board, moving, &token, deadline, &mut report).await
            }
        };
        for target in &targets {
            if let Err(error) = restore::unlock(&mut conn, target, &token).await {
                tracing::warn!(board = name, error = %error, "a reshard lock is left to its lease");
            }
        }
        moved.map(|()| report)
    }

    async fn move_locked(
        &self,
        conn: &mut Connection,
        board: &crate::domain::config::Board,
        (source, target, rescale): (&Layout, &Layout, Option<&Rescale>),
        token: &str,
        deadline: DateTime<Utc>,
        report: &mut ReshardReport,
    ) -> Result<(), RestoreError> {
        let (name, targets, sources) = (board.name.as_str(), &target.all(), source.all());
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
            for (source, journal_name) in sources.iter().zip(source.journals()) {
                // Fenced already (a loss a write found, a restore under way): not this move's
                // fence to lift if it is refused. (This move's own, from an invocation killed
                // before it moved a line, is taken up again.)
                let (fence, lost): (Option<String>, bool) =
                    redis::pipe().hget(source.guard(), guard::FENCE).hexists(source.guard(), guard::LOST).query_async(conn).await?;
                let fenced = fence.is_some_and(|fence| fence != guard::MOVING);
                let unborn = !restore::born(conn, source).await?
                    && (journal::len(conn, source).await? > 0
                        || !journal_objects(&self.objects, self.keys.prefix(), &journal_name).await?.is_empty());
                if fenced || lost || unborn {
                    return Err(RestoreError::Invalid(format!(
                        "board {name:?} is lost, fenced or being restored ({} is not born, or fenced): restore it, then move it",
                        source.guard()
                    )));
                }
            }
            super::generations::movable(conn, &self.objects, &self.keys, source).await?;
            for (target, journal_name) in targets.iter().zip(target.journals()) {
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
            let _: () = redis::cmd("HSETNX")
                .arg(source.guard())
                .arg(guard::FENCE)
                .arg(guard::MOVING)
                .query_async(conn)
                .await
                .map_err(StoreError::from)?;
        }
        // A fence of another kind found on a resumed move (a loss a write found, a rollback the
        // drain found): restored first, as at the start; the switch would free it with the rest.
        for source in &sources {
            let (fence, lost, rolled_back): (Option<String>, bool, bool) = redis::pipe()
                .hget(source.guard(), guard::FENCE)
                .hexists(source.guard(), guard::LOST)
                .hexists(source.guard(), guard::ROLLBACK)
                .query_async(conn)
                .await
                .map_err(StoreError::from)?;
            if fence.as_deref() != Some(guard::MOVING) || lost || rolled_back {
                return Err(RestoreError::Invalid(format!(
                    "board {name:?} was lost or fenced while it moved ({}): restore it, then move it",
                    source.guard()
                )));
            }
        }
        // Fenced first, so no write lands a score the check did not see; refused, the fence is
        // lifted and nothing else was written.
        if let Some(rescale) = rescale.filter(|_| starting)
            && let Err(refused) = super::rescale::fits(conn, board, rescale, &sources).await
        {
            for source in &sources {
                restore::lift_fence(conn, source, guard::MOVING).await?;
            }
            return Err(refused);
        }
        if let Some(rescale) = rescale.filter(|_| starting) {
            // The scale the scores are in, recorded (it is absent on a board at the default):
            // every function, the drain included, knows from then on that a move is due.
            layout::record_scale_if_absent(conn, &self.keys, name, rescale.from_max()).await?;
            self.store.forget_layout(&self.keys, name);
        }
        if starting {
            for target in targets {
                // What the move is from, for a move that records the layout and stops before
                // its end (see `moved_from`).
                let _: () = redis::cmd("HSET")
                    .arg(target.reshard_checkpoint())
                    .arg("from")
                    .arg(layout::text(source.shards(), source.generation()))
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
        let mut moving = Moving {
            board,
            rescale,
            target,
            targets,
            token,
            deadline,
            done,
            runs: targets.iter().map(|_| restore::Run::default()).collect(),
            clock: restore::Clock::read(conn).await?,
        };
        // One object in memory at a time, then the stream's tail (the lines not stored yet).
        for (index, journal_name) in source.journals().iter().enumerate() {
            let tail = journal::tail(conn, &sources[index], journal_name, STREAM_PAGE).await?;
            let first = tail.first().and_then(|line| place(index, &line.id));
            // An object every new shard has moved past (its successor's first line included)
            // is not read again by a resumed move.
            let applied = moving.done.iter().copied().min().flatten();
            let objects = journal_objects(&self.objects, self.keys.prefix(), journal_name).await?;
            for (k, object) in objects.iter().enumerate() {
                let next = objects.get(k + 1).and_then(|next| object_order(next)).map(|(_, ms, seq)| (index, ms, seq));
                if next.is_some_and(|next| applied.is_some_and(|applied| next <= applied)) {
                    continue;
                }
                let unreadable = |e: ReadError| RestoreError::Unreadable(object.clone(), e.to_string());
                let text = read_text(&self.objects, object).await.map_err(unreadable)?;
                for line in parse_lines(object, &text) {
                    let line = line.map_err(unreadable)?;
                    // Stored and still in the stream (a drain between the two reads): moved from
                    // the stream. (A line without an id is refused by `move_line`.)
                    if first.is_some_and(|first| place(index, &line.id).is_some_and(|at| at >= first)) {
                        continue;
                    }
                    if !self.move_line(conn, &mut moving, report, index, journal_name, &line).await? {
                        return Ok(());
                    }
                }
            }
            for line in &tail {
                if !self.move_line(conn, &mut moving, report, index, journal_name, line).await? {
                    return Ok(());
                }
            }
        }
        let runs = &mut moving.runs;
        self.flush_all(conn, targets, token, runs).await?;
        let carried = super::closed_seasons::carry(conn, board, &sources, target, rescale, Utc::now()).await?;
        let checked = super::reshard_check::compare(conn, (source, target, rescale), board, &carried, deadline).await?;
        report.periods_checked = checked.compared;
        // A re-encode switches once the drain stored the new generation's journal whole: a
        // restore with Redis lost then finds it complete, by its record (`generations`).
        let waiting = rescale.is_some() && !super::generations::recorded_whole(conn, &self.objects, &self.keys, target).await?;
        if !checked.done || waiting {
            report.status = Status::InProgress;
            return Ok(());
        }
        self.finish_move(conn, name, source, target, rescale).await
    }

    /// The layout a move recorded and did not finish (`from` in a new shard's checkpoint).
    async fn moved_from(&self, conn: &mut Connection, name: &str, targets: &[BoardKeys]) -> Result<Option<Layout>, RestoreError> {
        for target in targets {
            let from: Option<String> = checkpoint(conn, target, "from").await?;
            if let Some(from) = from {
                let (shards, generation) = layout::parse(&from)?;
                return Ok(Some(self.keys.layout_at(name, shards, generation)));
            }
        }
        Ok(None)
    }

    /// The switch, every step of which may run again: the new layout recorded with the scale it
    /// holds, at once (writes resume on every container within 30 s) and born, the old layout's
    /// keys freed (its history is in the new layout's journal now), the checkpoints last.
    async fn finish_move(
        &self,
        conn: &mut Connection,
        name: &str,
        source: &Layout,
        target: &Layout,
        rescale: Option<&Rescale>,
    ) -> Result<(), RestoreError> {
        let (from, targets) = (source.shards(), &target.all());
        layout::record(conn, &self.keys, name, (target.shards(), target.generation()), rescale.map(Rescale::to_max)).await?;
        self.store.forget_layout(&self.keys, name);
        // The old layout's guards go before any new shard takes a write: a container whose probe
        // of the layout predates the switch finds the board's guard gone and reads the new layout
        // (`Reader::on_layout`), never the old one once writes land in the new.
        let guards: Vec<String> = source.all().iter().map(BoardKeys::guard).collect();
        for guard in &guards {
            let _: () = redis::cmd("UNLINK").arg(guard).query_async(conn).await.map_err(StoreError::from)?;
        }
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
        for source in source.all() {
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

    /// Line `line` of old shard `index` into its user's new shard (a run sent when full). False:
    /// the deadline stopped the move before it, every run sent.
    async fn move_line(
        &self,
        conn: &mut Connection,
        moving: &mut Moving<'_>,
        report: &mut ReshardReport,
        index: usize,
        journal_name: &str,
        line: &Line,
    ) -> Result<bool, RestoreError> {
        // Every invocation moves a line at least: one past its deadline still goes on.
        if report.moved > 0 && Utc::now() >= moving.deadline {
            self.flush_all(conn, moving.targets, moving.token, &mut moving.runs).await?;
            report.status = Status::InProgress;
            return Ok(false);
        }
        let at =
            place(index, &line.id).ok_or_else(|| RestoreError::Invalid(format!("line {} of {journal_name}: no stream id", line.id)))?;
        // An earlier move's settling of its shard's records: this move settles its own.
        // A season's release: this move carries closed seasons itself (closed_seasons).
        if matches!(line.entry.get("kind").and_then(|k| k.as_str()), Some("reshard" | "season_release")) {
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
        let entry = serde_json::Value::Object(entry).to_string();
        let (id, fields) = (format!("{index}/{}", line.id), [entry, line.outcome.clone(), recorded]);
        moving.runs[t].push_copied(&moving.targets[t], &id, &effects, moving.clock.now_ms(), fields);
        report.moved += 1;
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
}
