//! Restore (docs/journal.md#restore): a board brought back from its journal after Redis lost
//! some or all of it. Every line carries what its write did (`Effects`); the restore applies
//! that, in the board's order of writes, to the keys that were lost, and never decides a write
//! again under today's rules. Lines of releases that recorded no effects are decided again
//! (`crate::services::replay`), as those releases did.
//!
//! The journal's objects in S3 come first, then the board's stream as it stood when the restore
//! began (the tail not drained yet). Each run of lines is applied in one script call with the
//! checkpoint after it (`restore_lines.lua`), so a restore stopped at any instant (its
//! deadline, a SIGKILL, a failover) goes on from exactly there; the lock it holds has a short
//! lease renewed by every run, so a killed restore's lock is gone within `LOCK_LEASE_MS`.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::domain::config::Config;
use crate::domain::journal::{Effects, Line, stream_order};
use crate::redis::error::StoreError;
use crate::redis::journal;
use crate::redis::keys::{
    BoardKeys, CATALOG_JOURNAL, Keys, PROFILE_SHARDS, PROFILES_JOURNAL, is_profile_journal, journal_board, profile_journal,
};
use crate::redis::restore::{self, Applied, Campaign, Clock, Run, rollback};
use crate::redis::store::{Connection, Store};
use crate::services::catalog::{boards_now, retired_now};
use crate::services::journal::legacy_profiles;
use crate::services::journal::marks::{self, Marks};
use crate::services::replay::Replayer;
use chrono::{DateTime, Utc};

use crate::archive::objects::{Objects, ReadError, journal_listing, parse_lines, read_text};

/// A restore's lock lives this long past its last run: a killed restore holds up the next one
/// at most this long.
pub const LOCK_LEASE_MS: u64 = 30_000;
/// Lines, and arguments, one script call carries at most.
const RUN_LINES: usize = 200;
const RUN_WEIGHT: usize = 16_000;
/// Stream entries read per page of the undrained tail.
const TAIL_PAGE: usize = 1_000;
/// Runs sent to Redis and not answered yet, at most.
const IN_FLIGHT: usize = 2;

mod campaign;
mod older_writes;
mod redecide;
mod runs;

pub use super::error::RestoreError;
pub use super::report::{BoardRestore, RestoreReport, Status};

pub struct Restorer<O> {
    config: Arc<Config>,
    keys: Keys,
    store: Store,
    objects: O,
    replayer: Replayer,
    lease_ms: u64,
}

/// One board's restore under way: where it stands, the run it is filling, and the runs sent
/// to Redis meanwhile (at most `IN_FLIGHT`, so Redis always has the next at hand; each applies
/// only if the checkpoint is where the one before it left it, so a call that fails stops the
/// restore at its checkpoint).
struct Progress<'a> {
    conn: &'a mut Connection,
    keys: &'a BoardKeys,
    token: &'a str,
    run: Run,
    in_flight: VecDeque<tokio::task::JoinHandle<Result<Applied, StoreError>>>,
    /// The checkpoint after the last run sent (`None`: no line applied yet).
    sent: Option<String>,
    /// Whether the last run sent was applied, once it has answered.
    last_applied: Option<oneshot::Receiver<bool>>,
    report: BoardRestore,
    /// The board's scale is recorded (`feed`).
    scale_recorded: bool,
    /// A rollback's point not passed yet (docs/journal.md#rollbacks): no run mixes lines from
    /// both sides of it.
    point: Option<String>,
    clock: Clock,
}

impl<O: Objects> Restorer<O> {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, objects: O) -> Self {
        let replayer = Replayer::new(config.clone(), keys.clone(), store.clone());
        Self { config, keys, store, objects, replayer, lease_ms: LOCK_LEASE_MS }
    }

    /// The lock's lease (tests stop restores and take the lock over again at once).
    pub fn with_lease_ms(mut self, lease_ms: u64) -> Self {
        self.lease_ms = lease_ms;
        self
    }

    /// Restores `board` (every board when `None`) until done or `deadline`, a restore of its own
    /// (`resume` without a campaign).
    pub async fn restore(&self, board: Option<&str>, deadline: DateTime<Utc>) -> Result<RestoreReport, RestoreError> {
        self.resume(board, None, deadline).await
    }

    /// What one invocation of `campaign` restores, until done or `deadline`; `known`: the
    /// boards as of now, when the caller has read them for a board asked for.
    pub(super) async fn restore_some(
        &self,
        board: Option<&str>,
        known: Option<Arc<Config>>,
        campaign: &mut Campaign,
        deadline: DateTime<Utc>,
    ) -> Result<Vec<BoardRestore>, RestoreError> {
        // Profiles: every shard's journal, each with its share of the journal before shards.
        let profiles = || (0..PROFILE_SHARDS).map(profile_journal);
        let mut reports_before = Vec::new();
        // Whether this call restored a journal (it goes on past the deadline until one).
        let mut worked = false;
        // The boards as of now, runtime ones included (a restore settles their closed periods by
        // their kinds, a cron tournament's included); the declared ones until the catalog is back.
        let mut config = self.config.clone();
        let boards: Vec<String> = match board {
            Some(PROFILES_JOURNAL) => profiles().collect(),
            Some(shard) if profiles().any(|name| name == shard) => vec![shard.to_owned()],
            Some(CATALOG_JOURNAL) => vec![CATALOG_JOURNAL.to_owned()],
            // A sharded board's name restores every shard; a shard's, that one.
            Some(name) => {
                config = match known {
                    Some(known) => known,
                    None => Arc::new(boards_now(&self.config, &self.keys, &self.store).await?),
                };
                let board = config.board(journal_board(name)).ok_or_else(|| RestoreError::UnknownBoard(name.to_owned()))?;
                let mut conn = self.store.write_connection().await?;
                let journals = super::generations::configured(&mut conn, &self.objects, &self.keys, board).await?.journals();
                match journals.iter().find(|journal| *journal == name) {
                    Some(shard) if board.name != name => vec![shard.clone()],
                    _ if board.name == name => journals,
                    _ => return Err(RestoreError::UnknownBoard(name.to_owned())),
                }
            }
            // The runtime boards' definitions first: they say which boards there are to restore.
            None => {
                let marks = Marks::load(&self.objects, self.keys.prefix()).await?;
                let catalog = self.restore_in(campaign, &mut worked, CATALOG_JOURNAL, &config, deadline, &marks).await?;
                if catalog.status != Status::Complete {
                    return Ok(vec![catalog]);
                }
                reports_before.push(catalog);
                // Boards whose end is done: their guards alone (their keys were freed on purpose).
                let retired = retired_now(&self.keys, &self.store).await?;
                restore::retired_guards(&mut self.store.write_connection().await?, &self.keys, &retired).await?;
                config = Arc::new(boards_now(&self.config, &self.keys, &self.store).await?);
                let mut conn = self.store.write_connection().await?;
                let mut journals = Vec::new();
                for board in config.boards() {
                    journals.extend(super::generations::configured(&mut conn, &self.objects, &self.keys, board).await?.journals());
                }
                journals.into_iter().chain(profiles()).collect()
            }
        };
        // What the journal knows and a Redis rolled back to a snapshot does not.
        let marks = Marks::load(&self.objects, self.keys.prefix()).await?;
        let mut reports = reports_before;
        for name in boards {
            if worked && Utc::now() >= deadline {
                reports.push(BoardRestore::pending(&name));
                continue;
            }
            reports.push(self.restore_in(campaign, &mut worked, &name, &config, deadline, &marks).await?);
        }
        self.older_writes_of(&mut reports, &config, deadline).await?;
        Ok(reports)
    }

    /// One board's restore, under its lock: one restore of a board at a time (a caller that
    /// retries a slow invocation must not start a second).
    /// `marks`: the drain's record of how far it stored each journal.
    async fn restore_board(
        &self,
        name: &str,
        config: &Config,
        deadline: DateTime<Utc>,
        marks: &Marks,
    ) -> Result<BoardRestore, RestoreError> {
        let keys = self.keys.board(name);
        let mut conn = self.store.write_connection().await?;
        let clock = Clock::read(&mut conn).await?;
        let token = format!("{:016x}", fastrand::u64(..));
        if !restore::lock(&mut conn, &keys, &token, self.lease_ms).await? {
            return Err(RestoreError::Running(name.to_owned()));
        }
        let renewer = restore::LockRenewer::start(conn.clone(), keys.clone(), token.clone(), self.lease_ms);
        let mut progress = Progress {
            conn: &mut conn,
            keys: &keys,
            token: &token,
            run: Run::default(),
            in_flight: VecDeque::new(),
            sent: None,
            last_applied: None,
            report: BoardRestore::pending(name),
            scale_recorded: false,
            point: None,
            clock,
        };
        let mut restored = self.restore_locked(name, config, deadline, marks, &mut progress).await;
        // Whatever ended the restore, the run Redis is applying is awaited before the lock goes.
        let landed = self.landed(&mut progress).await;
        if restored.is_ok() {
            restored = landed;
        }
        let report = progress.report;
        drop(renewer);
        if let Err(error) = restore::unlock(&mut conn, &keys, &token).await {
            tracing::warn!(board = name, error = %error, "the restore lock is left to its lease");
        }
        restored.map(|()| report)
    }

    async fn restore_locked(
        &self,
        name: &str,
        config: &Config,
        deadline: DateTime<Utc>,
        marks: &Marks,
        progress: &mut Progress<'_>,
    ) -> Result<(), RestoreError> {
        let profiles = is_profile_journal(name);
        let rolled_back =
            !profiles && marks::prepare(progress.conn, progress.keys, (&self.objects, self.keys.prefix()), marks, name).await?;
        // Writes a rolled-back store took before its fence, left to decide again once the
        // board was rebuilt (docs/journal.md#rollbacks): the rebuild is done when it is born.
        let redecide = if profiles { None } else { rollback::redecide(progress.conn, progress.keys).await? };
        if let Some(window) = &redecide
            && restore::born(progress.conn, progress.keys).await?
        {
            return self.redecide(name, config, progress, window, deadline).await;
        }
        if !profiles {
            restore::begin(progress.conn, progress.keys).await?;
        }
        if rolled_back {
            progress.point = rollback::point(progress.conn, progress.keys).await?;
        }
        // A shard of a sharded board: its layout recorded before any line (the loss took the
        // record too, or the store is older than the switch to it).
        super::switches::record_restored(progress.conn, &self.objects, &self.keys, name).await?;
        // What this container probed of the board's layout before (the older store's) is not
        // where its writes go now.
        self.store.forget_layout(&self.keys, crate::redis::keys::journal_board(name));
        let mut through = restore::through(progress.conn, progress.keys).await?;
        progress.report.through.clone_from(&through);
        progress.sent.clone_from(&through);
        if profiles && through.as_deref().is_none_or(|done| done == legacy_profiles::PHASE) {
            for effects in legacy_profiles::effects(&self.objects, &self.keys, progress.conn, name).await? {
                progress.run.push(progress.keys, legacy_profiles::PHASE, &effects, progress.clock.now_ms());
                if progress.run.lines() >= RUN_LINES || progress.run.weight() >= RUN_WEIGHT {
                    self.flush(progress).await?;
                }
            }
            // Every run of this phase ends at the same checkpoint: the next may not go before
            // them.
            self.flush(progress).await?;
            self.landed(progress).await?;
        }
        // The undrained tail as it stands now; the board takes no writes while it is restored.
        // A rebuild whose stream holds writes to decide again applies the stream up to them only.
        let until = match &redecide {
            _ if rolled_back => None,
            Some((after, _)) => Some(after.clone()),
            None => journal::newest_id(progress.conn, progress.keys).await?,
        };
        let listed = journal_listing(&self.objects, self.keys.prefix(), name).await?;
        progress.report.journal_bytes = listed.iter().map(|(_, bytes)| bytes).sum();
        // Every object is read again by a resumed invocation, its lines up to the checkpoint
        // skipped: objects may overlap (a store rolled back drains its stream again from where
        // its copy stood, lines after the next object's first among them), so an object whose
        // successor starts before the checkpoint may still hold lines after it, and an
        // invocation resumed there feeds exactly the lines one that never stopped would.
        for (index, (object, bytes)) in listed.iter().enumerate() {
            // Each line read as it is fed: Redis applies the run before while the next is read.
            let text = read_text(&self.objects, object).await?;
            // Counted once a line of it is fed: an object read again wholly behind the
            // checkpoint is not progress (the CLI's rates count the bytes an invocation read).
            let mut counted = false;
            for line in parse_lines(object, &text) {
                let line = line?;
                if self.stop(progress, deadline).await? {
                    progress.report.left_bytes = listed[index..].iter().map(|(_, bytes)| bytes).sum();
                    return Ok(());
                }
                if through.as_deref().and_then(stream_order) >= stream_order(&line.id) {
                    continue;
                }
                if !counted {
                    progress.report.read_bytes += bytes;
                    counted = true;
                }
                self.feed(name, progress, &line).await?;
                through = Some(line.id.clone());
            }
        }
        let objects_through = through.clone();
        if let Some(until) = until {
            loop {
                let page = journal::after_until(progress.conn, progress.keys, name, through.as_deref(), &until, TAIL_PAGE).await?;
                let Some(last) = page.last() else { break };
                let last = last.id.clone();
                for line in &page {
                    if self.stop(progress, deadline).await? {
                        return Ok(());
                    }
                    self.feed(name, progress, line).await?;
                }
                through = Some(last);
            }
        }
        // Records among the writes to decide again (a season released after them) come back
        // with the rebuild, which settles what they closed: they hold whatever the writes decide.
        if let (false, Some((_, end))) = (rolled_back, &redecide)
            && self.records_after(name, progress, through.clone(), end, deadline).await?
        {
            return Ok(());
        }
        self.flush(progress).await?;
        self.landed(progress).await?;
        // A runtime board being deleted comes back refusing writes (its guard's `ended` is not
        // journaled: the catalog says it ends).
        let ending = crate::redis::catalog::is_ending(progress.conn, &self.keys, journal_board(name)).await?;
        // The guard this restore judged intact, lost while it ran: finishing would make an empty
        // guard born (its bans, closed seasons and records gone). The next invocation starts
        // over (`restore::begin`).
        if !profiles && restore::guard_lost_since_judged(progress.conn, progress.keys).await? {
            progress.report.status = Status::InProgress;
            progress.report.left_bytes = progress.report.journal_bytes;
            return Ok(());
        }
        // Redis holds every line the journal's objects hold (and the drain's record says, when
        // objects it counted are gone): no rollback to see from them.
        let read = [objects_through.as_deref(), marks.get(name)].into_iter().flatten().max_by_key(|id| stream_order(id));
        if let (false, Some(through)) = (profiles, read) {
            rollback::raise_drained(progress.conn, progress.keys, through).await?;
        }
        if !profiles && name != CATALOG_JOURNAL {
            super::closed_seasons::settle_closed(progress.conn, config.board(journal_board(name)), progress.keys, Utc::now()).await?;
        }
        // Finished only under a lock held throughout: one that lapsed (a Redis stalled past the
        // lease) let a drain trim lines this restore had still to read from the stream. Renewed
        // now, the lock has been this restore's since it began (a lapsed one never comes back).
        if !restore::renew(progress.conn, progress.keys, progress.token, self.lease_ms).await? {
            return Err(RestoreError::Running(name.to_owned()));
        }
        restore::finish(progress.conn, progress.keys, !profiles, ending && name != CATALOG_JOURNAL).await?;
        progress.report.status = Status::Complete;
        match &redecide {
            Some(window) => self.redecide(name, config, progress, window, deadline).await,
            None => Ok(()),
        }
    }

    /// At the deadline (once this invocation has made progress): applies what it gathered and
    /// answers true, so the restore goes on from there in the next invocation.
    async fn stop(&self, progress: &mut Progress<'_>, deadline: DateTime<Utc>) -> Result<bool, RestoreError> {
        if progress.report.replayed == 0 || Utc::now() < deadline {
            return Ok(false);
        }
        self.flush(progress).await?;
        Ok(true)
    }

    /// Adds `line` to the run (sent when full); a line without effects is decided again on its
    /// own, after the run before it.
    async fn feed(&self, name: &str, progress: &mut Progress<'_>, line: &Line) -> Result<(), RestoreError> {
        progress.report.replayed += 1;
        if progress.point.as_deref().is_some_and(|point| stream_order(&line.id) > stream_order(point)) {
            self.flush(progress).await?;
            progress.point = None;
        }
        // The scale a score board's lines were written in comes back with them (the first
        // line that says one; the lines of a board at the default say none).
        if !progress.scale_recorded
            && let Some(max_score) = line.entry.get("max_score").and_then(serde_json::Value::as_i64)
        {
            crate::redis::layout::record_scale_if_absent(progress.conn, &self.keys, journal_board(name), max_score).await?;
            progress.scale_recorded = true;
        }
        match line.effects.as_ref().map(Effects::parse) {
            Some(Ok(effects)) => {
                progress.run.push(progress.keys, &line.id, &effects, progress.clock.now_ms());
                progress.report.applied += 1;
                progress.report.passed(&line.id);
                if progress.run.lines() >= RUN_LINES || progress.run.weight() >= RUN_WEIGHT {
                    self.flush(progress).await?;
                }
            }
            Some(Err(why)) => progress.report.refuse(&line.id, why),
            // Decided again against the snapshot, which holds its effects already (a rollback's
            // restore, before its point): passed.
            None if progress.point.is_some() => progress.report.passed(&line.id),
            None => {
                self.flush(progress).await?;
                self.landed(progress).await?;
                let replayed = self.replayer.replay(name, line).await?;
                restore::save_through(progress.conn, progress.keys, &line.id).await?;
                progress.sent = Some(line.id.clone());
                progress.report.passed(&line.id);
                progress.report.count(&line.id, replayed);
            }
        }
        Ok(())
    }
}

impl From<ReadError> for RestoreError {
    fn from(error: ReadError) -> Self {
        match error {
            ReadError::Unavailable(error) => RestoreError::Objects(error),
            ReadError::Unreadable(name, why) => RestoreError::Unreadable(name, why),
        }
    }
}
