//! Moving a board to the number of shards its configuration now says (docs/scaling.md#changing-
//! shards): `{"reshard": {"board": …}}` on the `journal` function. The journal's recorded
//! effects of every line of the old layout are applied in the user's shard of the new one
//! (`reshard_lines`, with the line copied into that shard's journal in the same call, so the new
//! layout's journal holds the board's whole history and a restore needs nothing else); archived
//! seasons are carried as they were (`closed_seasons`), every period set of either layout is
//! then compared, the layout recorded and the old keys freed.
//!
//! Online: writes go on to the old layout (every function writes where the data is) while the
//! lines up to the point the move started at are moved; then the old shards' guards are fenced
//! (`moving`: writes answer 503 `board_resharding`, reads go on) for the last step only: the
//! lines written since, the closed seasons, the check and the switch. A `max_score` move too:
//! writes go on at the scale the old layout holds (`scores::held_at`). Resumable: each
//! shard of the new layout records how far it got in the call that applies a run
//! (`<range>/<stream id>`), and the move's starting points are recorded beside it, so an
//! invocation stopped by its deadline, or killed, goes on where the lines it applied end.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::reshard_lines::{Lines, Moving, Place, Range, STREAM_PAGE, parse_place};
use super::restore::{RestoreError, Status};
use crate::archive::objects::Objects;
use crate::domain::catch_up::{Next, ROUND_MS, Round};
use crate::domain::config::{BoardKind, Config};
use crate::domain::journal::{Entry, Stamp};
use crate::domain::rescale::Rescale;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys, Layout};
use crate::redis::period_sets::PeriodSets;
use crate::redis::store::{Connection, Store};
use crate::redis::{layout, restore};

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
    /// Whether the move reached its last step: the board's writes wait (503 `board_resharding`)
    /// until it completes. Before it, writes go on to the old layout.
    pub last_step: bool,
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
    pub(super) config: Arc<Config>,
    pub(super) keys: Keys,
    pub(super) store: Store,
    pub(super) objects: O,
    pub(super) lease_ms: u64,
    /// A round that ended within this of its start is the last before the fence (`ROUND_MS`).
    round_ms: i64,
    /// Stream entries read at once (`reshard_lines::STREAM_PAGE`).
    stream_page: usize,
}

/// A field of a new shard's reshard checkpoint (`through`, `from`).
async fn checkpoint<T: redis::FromRedisValue>(conn: &mut Connection, target: &BoardKeys, field: &str) -> Result<Option<T>, StoreError> {
    Ok(redis::cmd("HGET").arg(target.reshard_checkpoint()).arg(field).query_async(conn).await?)
}

impl<O: Objects> Resharder<O> {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, objects: O) -> Self {
        Self { config, keys, store, objects, lease_ms: super::restore::LOCK_LEASE_MS, round_ms: ROUND_MS, stream_page: STREAM_PAGE }
    }

    /// Rounds until one finds nothing new (tests whose invocations move a line each, `0`) or
    /// ends within `round_ms` of its start.
    pub fn with_round_ms(mut self, round_ms: i64) -> Self {
        self.round_ms = round_ms;
        self
    }

    /// Smaller stream pages (tests: a drain trimming between two pages of a few entries).
    pub fn with_stream_page(mut self, entries: usize) -> Self {
        self.stream_page = entries.max(1);
        self
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
        // Their record names the layout and the switch they followed: a move now would leave
        // them behind another switch (docs/journal.md#rollbacks).
        if crate::redis::restore::older::read(&mut conn, &self.keys, name).await?.is_some() {
            return Err(RestoreError::Lost(format!(
                "board {name:?}: writes an older store took before its fence are still to be decided again: run a restore first"
            )));
        }
        let source = super::generations::held(&self.store, &mut conn, &self.keys, board).await?;
        let (from, to) = (source.shards(), board.shards);
        let rescale = layout::held_scale(&mut conn, &self.keys, board, Utc::now()).await?.and_then(|held| Rescale::new(board, held));
        if let Some(refusal) = rescale.as_ref().and_then(|_| super::rescale::refusal(board)) {
            return Err(RestoreError::Invalid(refusal));
        }

        let max_score = rescale.as_ref().map(|rescale| ScaleMove { from: rescale.from_max(), to: rescale.to_max() });
        let mut report = ReshardReport {
            board: name.to_owned(),
            from,
            to,
            status: Status::Complete,
            moved: 0,
            periods_checked: 0,
            last_step: false,
            max_score,
        };
        // A move that recorded the new layout and stopped before its end: finished now.
        let settled = from == to && rescale.is_none();
        // Re-encoded scores are new keys and a new journal: the next generation's; so is a
        // layout the board had before (its journal objects are another time's).
        let target = match settled {
            true => self.keys.layout_at(name, to, source.generation()),
            false => super::generations::moving_to(&mut conn, &self.objects, &self.keys, board, &source, rescale.is_some()).await?,
        };
        let targets = target.all();
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
        // Held for as long as the move works, whatever it is doing (reading objects with nothing
        // to apply, a compare), not only when a run lands.
        let renewers: Vec<restore::LockRenewer> =
            targets.iter().map(|target| restore::LockRenewer::start(conn.clone(), target.clone(), token.clone(), self.lease_ms)).collect();
        let moved = match unfinished {
            Some(moved_from) => self.finish_move(&mut conn, name, (&moved_from, &target), None, None).await,
            None => {
                let moving = (&source, &target, rescale.as_ref());
                self.move_locked(&mut conn, board, moving, &token, deadline, &mut report).await
            }
        };
        drop(renewers);
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
            self.movable(conn, name, source, target).await?;
        }
        // A re-encode that some held score does not fit is refused before anything is written
        // (the board goes on as it is); checked again once fenced, before the last step's
        // lines, for a score written meanwhile (`rescale::fits_fenced`).
        if let Some(rescale) = rescale.filter(|_| starting) {
            super::rescale::fits(conn, board, rescale, &sources).await?;
        }
        if let Some(rescale) = rescale.filter(|_| !starting) {
            self.begun_scale(conn, name, targets, rescale.to_max()).await?;
        }
        if let Some(rescale) = rescale.filter(|_| starting) {
            // The scale the scores are in, recorded (it is absent on a board at the default):
            // every function, the drain included, knows from then on that a move is due.
            layout::record_scale_if_absent(conn, &self.keys, name, rescale.from_max()).await?;
            self.store.forget_layout(&self.keys, name);
        }
        if starting {
            self.start_targets(conn, source, targets, rescale.map(Rescale::to_max)).await?;
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
            sending: targets.iter().map(|_| None).collect(),
            sent: Default::default(),
            clock: restore::Clock::read(conn).await?,
            moved: 0,
            pre: None,
        };
        let lines = self.lines();
        // Online whatever changes: writes go on to the old layout (at the scale its scores are
        // held at, `scores::held_at`) until the last step.
        let moved = self.catch_up(conn, &mut moving, report, source).await?;
        report.moved = moving.moved;
        if !moved {
            report.status = Status::InProgress;
            return Ok(());
        }
        lines.flush_all(conn, &mut moving).await?;
        let carried = super::closed_seasons::carry(conn, board, &sources, target, rescale, Utc::now()).await?;
        // Both layouts' period sets, read once the last lines and seasons are in (nothing writes
        // them after): the compare's and each new shard's records'. Found without a scan when
        // this invocation compared while writes went on: those it saw, those written since.
        let sets = match &moving.pre {
            Some(pre) => {
                let closed = carried.iter().filter_map(|period| sources[0].relative_of(&sources[0].period(period)).map(str::to_owned));
                let shards: Vec<BoardKeys> = sources.iter().chain(targets).cloned().collect();
                PeriodSets::among(conn, &shards, &pre.candidates(closed)).await?
            }
            None => PeriodSets::scan(conn, &self.keys, name).await?,
        };
        let checked =
            super::reshard_check::compare(conn, (source, target, rescale), board, &carried, (&sets, moving.pre.as_ref()), deadline).await?;
        report.periods_checked = checked.compared;
        // The new layout's journal stored whole before anything names it: a restore with Redis
        // lost right after the switch finds the board's history there (`stored`); a re-encode's
        // generation recorded then (`generations`).
        let stored = super::stored::store_layout(conn, &self.objects, &self.keys, target, deadline).await?;
        let next_generation = target.generation() != source.generation();
        let waiting = !stored || (next_generation && !super::generations::recorded_whole(conn, &self.objects, &self.keys, target).await?);
        if !checked.done || waiting {
            report.status = Status::InProgress;
            return Ok(());
        }
        self.finish_move(conn, name, (source, target), rescale, Some(&sets)).await
    }

    fn lines(&self) -> Lines<'_, O> {
        Lines { objects: &self.objects, keys: &self.keys, lease_ms: self.lease_ms, page: self.stream_page, read: Default::default() }
    }

    /// An online move's lines (`domain::catch_up`): its rounds while writes go on, each old
    /// shard's lines of round `r` at places of index `r·n + shard`; then, fenced, its last step's,
    /// past them all. False: the deadline stopped it.
    async fn catch_up(
        &self,
        conn: &mut Connection,
        moving: &mut Moving<'_>,
        report: &mut ReshardReport,
        source: &Layout,
    ) -> Result<bool, RestoreError> {
        let (name, sources, journals, n) = (moving.board.name.as_str(), source.all(), source.journals(), source.all().len());
        let lines = self.lines();
        let kept = self.kept_rounds(conn, source, moving.targets).await?;
        let mut fenced = self.fenced(conn, name, source).await?;
        // None kept and fenced: begun by a release that fenced a move from its first step (its
        // checkpoints are round 0's places), or left fenced by a move to another layout; round
        // 0 taken now then holds every line, moved before the last step as any round.
        let mut rounds = match kept {
            Some(rounds) => rounds,
            None => self.first_round(conn, source, moving.targets).await?,
        };
        if let Some(points) = self.fenced_at(conn, source, moving.targets).await?
            && !self.all_moving(conn, &sources).await?
        {
            // The last step had begun, and a restore (of every old shard or some) lifted its
            // fence: those shards took writes since its bound.
            self.last_step_as_round(conn, moving.targets, &mut rounds, points).await?;
        }
        if fenced {
            // A fence a killed invocation left on some old shards only (or a restore lifted on
            // some): on all of them now.
            self.fence(conn, name, (source, moving.targets)).await?;
        }
        report.last_step = fenced;
        // Every recorded round, a resumed move's included (what it moved is skipped), before
        // the last step; a round added here is the only one left to move.
        let (mut first, mut pre_tried) = (0, false);
        loop {
            for r in first..rounds.0.len() {
                for (i, journal_name) in journals.iter().enumerate() {
                    let (after, until) = rounds.range(r, i);
                    let range = Range { index: r * n + i, after, until: Some(until) };
                    if !lines.move_range(conn, moving, (&sources[i], journal_name), range).await? {
                        return Ok(false);
                    }
                }
            }
            first = rounds.0.len();
            if fenced {
                break;
            }
            lines.flush_all(conn, moving).await?;
            // Stored while writes go on, so the fenced step stores only its own lines.
            super::stored::store_layout(conn, &self.objects, &self.keys, moving.target, moving.deadline).await?;
            // A lapsed lock is another invocation's move now: it must not find rounds or a
            // fence this one decided on what it read before.
            self.still_held(conn, moving.targets, moving.token).await?;
            let points = self.journal_points(conn, source).await?;
            match rounds.next(Utc::now().timestamp_millis(), points, self.round_ms) {
                Next::Round(round) => {
                    rounds.0.push(round);
                    self.keep_rounds(conn, moving.targets, &rounds).await?;
                }
                // Once an invocation, before its fence: every period set compared while writes
                // go on, then a round for the lines written meanwhile; the fenced compare looks
                // only at what the pre-check found different and what the lines since wrote.
                // One that outlasts the invocation's deadline is given up: the fenced step then
                // compares every set, resumable across invocations, as a resumed move does.
                Next::Fence if !pre_tried => {
                    pre_tried = true;
                    let sets = PeriodSets::scan(conn, &self.keys, name).await?;
                    let layouts = (source, moving.target, moving.rescale);
                    moving.pre = super::reshard_check::pre_check(conn, layouts, moving.board, &sets, moving.deadline).await?;
                    if moving.pre.is_some() {
                        let points = self.journal_points(conn, source).await?;
                        rounds.0.push(Round { start_ms: Utc::now().timestamp_millis(), points });
                        self.keep_rounds(conn, moving.targets, &rounds).await?;
                    } else {
                        self.fence(conn, name, (source, moving.targets)).await?;
                        fenced = true;
                    }
                }
                Next::Fence => {
                    self.fence(conn, name, (source, moving.targets)).await?;
                    fenced = true;
                }
            }
        }
        report.last_step = true;
        // The old layout whole, fenced: a re-encode is refused here, its fence lifted, before
        // any of the last step's places is taken (a run again then goes on with a new round).
        if let Some(rescale) = moving.rescale {
            super::rescale::fits_fenced(conn, moving.board, rescale, &sources).await?;
        }
        // The archive's freezes it left undone, and the losses they find, before the same.
        super::closed_seasons::freeze_unfrozen(conn, moving.board, &sources, Utc::now()).await?;
        // The last step's lines: those written since the last round's points, up to where the
        // fence found each journal (no more come; a move fenced by an older release: all).
        let last = rounds.last().points.clone();
        let bound = self.fenced_at(conn, source, moving.targets).await?;
        for (i, journal_name) in journals.iter().enumerate() {
            let until = bound.as_ref().map(|points| points[i].as_str());
            let range = Range { index: rounds.0.len() * n + i, after: Some(last[i].as_str()), until };
            if !lines.move_range(conn, moving, (&sources[i], journal_name), range).await? {
                return Ok(false);
            }
        }
        Ok(true)
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

    /// The switch, every step of which may run again: each new shard settled (its records made
    /// to say what it holds) and born while no write can reach it yet (none is given a layout
    /// not recorded), so the new layout serves every read and write from its record on; then
    /// the new layout recorded with the scale it holds, the old layout's keys freed (its history
    /// is in the new layout's journal now), the checkpoints last. `sets`: both layouts' period
    /// sets, read fenced after the last lines (`None`: read here if a shard is still to settle).
    async fn finish_move(
        &self,
        conn: &mut Connection,
        name: &str,
        (source, target): (&Layout, &Layout),
        rescale: Option<&Rescale>,
        sets: Option<&PeriodSets>,
    ) -> Result<(), RestoreError> {
        let (from, targets) = (source.shards(), &target.all());
        let settled = Entry::Reshard { at: Stamp(Utc::now()), board: name, from, to: targets.len() as u32 }.json();
        let mut scanned = None;
        for target in targets {
            // A shard this switch finished already takes writes once the layout is recorded:
            // settled again, it could drop the record of a set it lost since, and the fence that
            // loss put up would be lifted.
            if !restore::claimed(conn, target).await? {
                continue;
            }
            let sets = match (sets, &mut scanned) {
                (Some(sets), _) => sets,
                (None, Some(sets)) => &*sets,
                (None, scanned) => scanned.insert(PeriodSets::scan(conn, &self.keys, name).await?),
            };
            restore::settle_kept_records(conn, target, &sets.of(target), &settled).await?;
            restore::finish(conn, target, true, false).await?;
        }
        restore::birth::settle_target(conn, target).await?;
        super::switches::record(conn, &self.objects, &self.keys, target, rescale.map(Rescale::to_max)).await?;
        layout::record(conn, &self.keys, name, (target.shards(), target.generation()), rescale.map(Rescale::to_max)).await?;
        self.store.forget_layout(&self.keys, name);
        // The old layout's guards go at once: no read is answered from the old layout once a
        // write has landed in the new but within that round trip (docs/scaling.md#changing-shards).
        super::switches::free(conn, &self.keys, source, &[]).await?;
        if let Some(board) = self.config.board(name) {
            super::closed_seasons::record_released(conn, board, targets, Utc::now()).await?;
        }
        // The lines the switch itself wrote (each shard's settled records, a season's release)
        // stored too, from where the move's store ended (its record is on the checkpoints).
        super::stored::store_layout(conn, &self.objects, &self.keys, target, Utc::now() + chrono::Duration::seconds(10)).await?;
        for target in targets {
            let _: () = redis::cmd("DEL").arg(target.reshard_checkpoint()).query_async(conn).await.map_err(StoreError::from)?;
        }
        Ok(())
    }
}
