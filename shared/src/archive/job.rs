//! The archive job for one season: freeze it, page through the frozen board by rank into
//! DynamoDB, move a checkpoint forward after every page, stop before the deadline, and — once
//! every shard is done — verify the count, store the season's distribution, mark the season
//! complete and only then free Redis.
//!
//! Every step is safe to repeat: freezing is idempotent, items are keyed by rank (a rewrite
//! replaces the same item), the checkpoint never moves backwards, completion is recorded once,
//! and a completed season is never written again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration as StdDuration;

use super::ends_known::EndsKnown;
use super::freeze::{self, Standing};
use super::schedule::{Backoff, stopping_margin, unarchived_candidates};
pub use super::table::MAX_SHARDS;
use super::table::{ArchiveSink, MAX_BATCH_WRITE, SeasonTable, Shard, entry_item, put_request};
use crate::Clock;
use crate::domain::config::{Board, Config};
use crate::domain::period::{Period, PeriodKind};
use crate::domain::scores;
use crate::domain::tiebreak::Scale;
use crate::redis::keys::{BoardKeys, Keys, Layout};
use crate::redis::store::{Connection, Store};
use crate::runtime::metrics::{Metrics, Unit};
use aws_sdk_dynamodb::types::WriteRequest;
use chrono::{DateTime, Duration, Utc};
use futures::{StreamExt, TryStreamExt};
use serde::Serialize;

pub use super::error::ArchiveError;

/// Members read from the frozen board per page, written as 40 batches of 25.
/// Fixed: shards split the season by page number, so every invocation must agree on it.
pub const PAGE_SIZE: u64 = 1000;

#[derive(Debug, Clone)]
pub struct Settings {
    /// How long after a season's end it is frozen. Longer than the event window's lateness, so
    /// no event that could still count is refused with `period_closed`.
    pub grace: Duration,
    /// No page (nor the final verification) starts closer than this to the deadline — or than
    /// a quarter of the time the invocation had, when that is less (short local invocations).
    pub deadline_margin: Duration,
    /// BatchWriteItem calls in flight at once within a page.
    pub concurrency: usize,
    pub backoff: Backoff,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            grace: Duration::minutes(30),
            deadline_margin: Duration::seconds(30),
            concurrency: 4,
            backoff: Backoff { base: StdDuration::from_millis(50), cap: StdDuration::from_secs(5), max_attempts: 10 },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// This invocation verified the archive, marked it complete and freed Redis.
    Complete,
    /// The season was complete before this invocation; nothing was written.
    AlreadyComplete,
    /// The deadline came first; the next invocation resumes from the checkpoint.
    InProgress,
    /// This shard is done; another shard is still archiving and will complete the season.
    ShardDone,
}

/// What one invocation did for one season.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeasonReport {
    pub board: String,
    pub season: String,
    pub status: Status,
    pub shard_index: u32,
    pub shard_total: u32,
    /// Members of the season.
    pub total: u64,
    /// The rank this shard archives next, while it has pages left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_rank: Option<u64>,
    /// Items this invocation wrote, and the BatchWriteItem calls (retries included) it made.
    pub items_written: u64,
    pub batch_calls: u64,
}

/// Counters of one invocation, shared by the concurrent batches of a page.
#[derive(Default)]
struct Progress {
    items_written: AtomicU64,
    batch_calls: AtomicU64,
}

/// The season being archived by one invocation.
struct Job<'a> {
    board: &'a str,
    season: Period,
    /// How the season's composites decode (score boards have their own).
    scale: Scale,
    /// The board keeps statements: they are released with the season.
    statements: bool,
    shard: Shard,
    /// The board's keys, one per shard it is spread over (docs/scaling.md).
    shards: Vec<BoardKeys>,
    progress: Progress,
    /// No work starts once the clock is past this.
    stop_at: DateTime<Utc>,
}

impl Job<'_> {
    fn report(&self, status: Status, total: u64, next_rank: Option<u64>) -> SeasonReport {
        SeasonReport {
            board: self.board.to_owned(),
            season: self.season.id.clone(),
            status,
            shard_index: self.shard.index,
            shard_total: self.shard.total,
            total,
            next_rank,
            items_written: self.progress.items_written.load(Ordering::Relaxed),
            batch_calls: self.progress.batch_calls.load(Ordering::Relaxed),
        }
    }
}

pub struct Archiver<S> {
    pub(super) config: Arc<Config>,
    pub(super) keys: Keys,
    pub(super) store: Store,
    pub(super) table: SeasonTable,
    sink: S,
    pub(super) clock: Clock,
    settings: Settings,
    metrics: Metrics,
    pub(super) ends_known: EndsKnown,
}

/// The `Function` dimension of this function's metrics.
pub const FUNCTION: &str = "archive";

/// The metric a scheduled run puts: seasons ended more than `OVERDUE_AFTER` ago that are still
/// not archived after the run (the `ArchiveOverdueAlarm`'s metric).
pub const SEASONS_OVERDUE: &str = "SeasonsOverdue";
/// How long after its end a season may stay unarchived before it counts as overdue: a day of
/// hourly retries, against a live board that lives 90 days.
pub const OVERDUE_AFTER: Duration = Duration::days(1);

impl<S: ArchiveSink> Archiver<S> {
    /// `table` serves reads, checkpoints and the completion record; `sink` takes the
    /// BatchWriteItem calls (the table itself, or a fault-injecting wrapper around it).
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, table: SeasonTable, sink: S, clock: Clock, settings: Settings) -> Self {
        Self { config, keys, store, table, sink, clock, settings, metrics: Metrics::stdout(FUNCTION), ends_known: EndsKnown::default() }
    }

    /// The same job, knowing the tournaments' watermarks `known` holds (shared by every job a
    /// function builds, so a new catalog version does not read them all again).
    pub fn with_ends_known(self, known: EndsKnown) -> Self {
        Self { ends_known: known, ..self }
    }

    /// Where the job puts its metrics (the function's other jobs put theirs there too).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The same job, putting its metrics into `metrics`.
    pub fn with_metrics(self, metrics: Metrics) -> Self {
        Self { metrics, ..self }
    }

    /// The scheduled run: for every archived board, every season that ended at least `grace`
    /// ago and is not archived yet (`unarchived_candidates`), oldest first, in one shard. A
    /// season that fails does not hold up the others; the first failure is the run's error
    /// once they have all been tried. Stops at the first season left in progress (the
    /// deadline). Puts `SeasonsOverdue` either way.
    pub async fn archive_due(&self, deadline: DateTime<Utc>) -> Result<Vec<SeasonReport>, ArchiveError> {
        let now = (self.clock)();
        let is_overdue = |season: &Period| season.end.expect("a season ends").with_timezone(&Utc) + OVERDUE_AFTER <= now;
        let candidates: Vec<(&Board, Period)> = self
            .config
            .boards()
            .iter()
            .map(|b| &**b)
            .filter(|b| b.archive)
            .flat_map(|board| unarchived_candidates(board, now, self.settings.grace).into_iter().map(move |season| (board, season)))
            .collect();
        self.see_running_seasons(now).await;
        // Every overdue candidate counts until this run finishes it.
        let mut overdue = candidates.iter().filter(|(_, season)| is_overdue(season)).count() as u64;
        let mut reports = Vec::new();
        let mut failures = Vec::new();
        for (board, season) in &candidates {
            match self.archive_season(&board.name, &season.id, Shard::WHOLE, deadline).await {
                Ok(report) => {
                    if matches!(report.status, Status::Complete | Status::AlreadyComplete) && is_overdue(season) {
                        overdue -= 1;
                    }
                    let out_of_time = report.status == Status::InProgress;
                    reports.push(report);
                    if out_of_time {
                        break;
                    }
                }
                Err(error) => {
                    tracing::error!(board = %board.name, season = %season.id, code = error.code(), %error, "season not archived");
                    failures.push(error);
                }
            }
        }
        self.metrics.put(SEASONS_OVERDUE, Unit::Count, overdue as f64, &[]);
        match failures.into_iter().next() {
            Some(first) => Err(first),
            None => Ok(reports),
        }
    }

    /// Records in the table every archived board's running season that has members, once.
    /// A failure only weakens what a later flush can be told apart from (logged, not fatal).
    async fn see_running_seasons(&self, now: DateTime<Utc>) {
        for board in self.config.boards().iter().filter(|b| b.archive) {
            let season = Period::containing(PeriodKind::Season, now, board.timezone);
            if let Err(error) = self.see_running_season(board, &season, now).await {
                tracing::warn!(board = %board.name, season = %season.id, code = error.code(), %error, "running season not recorded");
            }
        }
    }

    async fn see_running_season(&self, board: &Board, season: &Period, now: DateTime<Utc>) -> Result<(), ArchiveError> {
        let mut conn = self.store.connection().await?;
        let layout = self.store.read_layout(&self.keys, board).await?;
        for (keys, name) in layout.all().iter().zip(seen_names(&layout)) {
            if freeze::has_members(&mut conn, keys, season).await? {
                self.table.record_seen(&name, &season.id, now).await?;
            }
        }
        Ok(())
    }

    /// Archives `shard` of `board`'s `season`, resuming from its checkpoint, until done or
    /// until `deadline` (less the margin) is near.
    pub async fn archive_season(
        &self,
        board: &str,
        season: &str,
        shard: Shard,
        deadline: DateTime<Utc>,
    ) -> Result<SeasonReport, ArchiveError> {
        self.archive(board, season, shard, deadline, false).await
    }

    /// Archives the season of a runtime board deleted before it ended (docs/runtime-boards.md):
    /// its writes are refused already (the guard's `ended`), so its season needs no grace.
    pub async fn archive_ended(&self, board: &str, season: &str, deadline: DateTime<Utc>) -> Result<SeasonReport, ArchiveError> {
        self.archive(board, season, Shard { index: 0, total: 1 }, deadline, true).await
    }

    async fn archive(
        &self,
        board: &str,
        season: &str,
        shard: Shard,
        deadline: DateTime<Utc>,
        ended: bool,
    ) -> Result<SeasonReport, ArchiveError> {
        let config = self.config.board(board).ok_or_else(|| ArchiveError::UnknownBoard(board.to_owned()))?;
        if !config.archive && config.tournament.is_none() {
            return Err(ArchiveError::NotArchived(board.to_owned()));
        }
        if !(1..=MAX_SHARDS).contains(&shard.total) || shard.index >= shard.total {
            return Err(ArchiveError::InvalidShard);
        }
        let now = (self.clock)();
        // A tournament's instance (docs/tournaments.md) is archived as a season is, from its end.
        let (period, ends_at) = match &config.tournament {
            Some(tournament) => {
                let instance =
                    tournament.instance_named(Some(season), now).ok_or_else(|| ArchiveError::InvalidSeason(season.to_owned()))?;
                let period = tournament.period_named(season).map_err(|_| ArchiveError::InvalidSeason(season.to_owned()))?;
                (period, instance.end)
            }
            None => {
                let period = freeze::season_named(season, config.timezone).ok_or_else(|| ArchiveError::InvalidSeason(season.to_owned()))?;
                let ends_at = period.end.expect("a season ends").with_timezone(&Utc);
                (period, ends_at)
            }
        };
        let stop_at = deadline - stopping_margin(self.settings.deadline_margin, deadline - now);
        let scale = scores::scale(config, &period);
        let layout = self.store.read_layout(&self.keys, config).await?;
        let shards = layout.all();
        let job =
            Job { board, season: period, scale, statements: config.statements, shard, shards, progress: Progress::default(), stop_at };
        let mut conn = self.store.connection().await?;

        if let Some(done) = self.table.completed(board, season).await? {
            // A run cut short between marking complete and freeing Redis leaves the frozen
            // board behind; freeing it again is harmless.
            let released = config.tournament.is_none().then(|| (done.total, (self.clock)()));
            freeze::shards::release(&mut conn, &job.shards, &job.season, job.statements, released).await?;
            return Ok(job.report(Status::AlreadyComplete, done.total, None));
        }
        // A tournament's writes are decided on their own time: nothing lands after its end.
        let ready_at = if config.tournament.is_some() { ends_at } else { ends_at + self.settings.grace };
        if now < ready_at && !ended {
            return Err(ArchiveError::SeasonNotEnded { board: board.to_owned(), season: season.to_owned(), ready_at });
        }

        let frozen = freeze::shards::freeze(&mut conn, &job.shards, &job.season, self.keys.journal_on().then_some(now)).await?;
        // A flush takes the guard with the board: only what the runs saw can tell it apart
        // from a season nobody played (shard by shard: one may have had no member at all).
        for (name, shard) in seen_names(&layout).iter().zip(&frozen) {
            if shard.lost || (shard.unwitnessed && self.table.seen(name, season).await?) {
                return Err(ArchiveError::LiveBoardLost { board: board.to_owned(), season: season.to_owned() });
            }
        }
        let total = frozen.iter().map(|shard| shard.members).sum::<u64>();
        // A shard whose frozen set is gone while the season is not complete: another job shard
        // completed it since the check above, or the set was lost.
        if frozen.iter().any(|shard| shard.members > 0 && !shard.present) {
            return match self.table.completed(board, season).await? {
                Some(done) => Ok(job.report(Status::AlreadyComplete, done.total, None)),
                None => Err(ArchiveError::FrozenBoardMissing { board: board.to_owned(), season: season.to_owned(), members: total }),
            };
        }

        let first_rank = u64::from(shard.index) * PAGE_SIZE + 1;
        let mut next_rank = self.table.checkpoint(board, season, shard).await?.unwrap_or(first_rank);
        while next_rank <= total {
            if self.out_of_time(&job) {
                return Ok(job.report(Status::InProgress, total, Some(next_rank)));
            }
            let page = freeze::shards::page(&mut conn, &job.shards, &job.season, &job.scale, next_rank - 1, PAGE_SIZE).await?;
            self.write_page(&job, total, &page).await?;
            let after = next_rank + PAGE_SIZE * u64::from(shard.total);
            next_rank = self.table.advance_checkpoint(board, season, shard, after, (self.clock)()).await?;
        }
        // Recorded even when this shard had no page at all, so the others see it done.
        self.table.advance_checkpoint(board, season, shard, next_rank, (self.clock)()).await?;

        let checkpoints = self.table.checkpoints(board, season, shard.total).await?;
        if !(0..shard.total).all(|index| checkpoints.get(&index).is_some_and(|&next| next > total)) {
            return Ok(job.report(Status::ShardDone, total, None));
        }
        if self.out_of_time(&job) {
            return Ok(job.report(Status::InProgress, total, None));
        }
        self.verify(&job, &mut conn, total).await?;
        let histograms = freeze::shards::histograms(&conn, &job.shards, &job.season, &job.scale).await?;
        self.table.put_distribution(board, season, &histograms).await?;
        self.table.mark_complete(board, season, total, (self.clock)()).await?;
        let released = config.tournament.is_none().then(|| (total, (self.clock)()));
        freeze::shards::release(&mut conn, &job.shards, &job.season, job.statements, released).await?;
        tracing::info!(board, season, total, "season archived and verified; frozen board released");
        Ok(job.report(Status::Complete, total, None))
    }

    fn out_of_time(&self, job: &Job<'_>) -> bool {
        (self.clock)() >= job.stop_at
    }

    /// Every rank is an item keyed by that rank, so DynamoDB holding exactly as many entries as
    /// the frozen board has members means every rank is there, once.
    async fn verify(&self, job: &Job<'_>, conn: &mut Connection, total: u64) -> Result<(), ArchiveError> {
        let frozen = freeze::shards::members(conn, &job.shards, &job.season).await?;
        let stored = self.table.count_entries(job.board, &job.season.id).await?;
        if stored == frozen && frozen == total {
            Ok(())
        } else {
            Err(ArchiveError::VerificationFailed { board: job.board.to_owned(), season: job.season.id.clone(), stored, frozen })
        }
    }

    async fn write_page(&self, job: &Job<'_>, total: u64, page: &[Standing]) -> Result<(), ArchiveError> {
        // Built up front, not lazily inside the stream: a lazy iterator's closure held across
        // the await makes the future fail rustc's higher-ranked `Send` check when boxed.
        let batches: Vec<Vec<WriteRequest>> = page
            .chunks(MAX_BATCH_WRITE)
            .map(|chunk| chunk.iter().map(|standing| put_request(entry_item(job.board, &job.season.id, total, standing))).collect())
            .collect();
        futures::stream::iter(batches)
            .map(|batch| self.write_batch(batch, &job.progress))
            .buffer_unordered(self.settings.concurrency.max(1))
            .try_collect()
            .await
    }

    /// One batch, its unprocessed items retried with backoff until none are left.
    async fn write_batch(&self, mut requests: Vec<WriteRequest>, progress: &Progress) -> Result<(), ArchiveError> {
        let backoff = self.settings.backoff;
        for attempt in 1..=backoff.max_attempts {
            let sent = requests.len() as u64;
            progress.batch_calls.fetch_add(1, Ordering::Relaxed);
            let unprocessed = self.sink.batch_write(requests).await?;
            progress.items_written.fetch_add(sent - unprocessed.len() as u64, Ordering::Relaxed);
            if unprocessed.is_empty() {
                return Ok(());
            }
            requests = unprocessed;
            if attempt < backoff.max_attempts {
                tokio::time::sleep(backoff.delay(attempt, fastrand::f64())).await;
            }
        }
        Err(ArchiveError::Unprocessed(backoff.max_attempts))
    }
}

/// The names a season's runs record it seen under: the board's, or each shard's journal name
/// (`<board>:<k>of<n>:<salt>`, never a board's: board names hold no `:`).
fn seen_names(layout: &Layout) -> Vec<String> {
    layout.journals()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::period::EventWindow;

    #[test]
    fn the_freeze_waits_out_every_event_ingest_could_still_accept() {
        let window = EventWindow::default();
        assert!(Settings::default().grace > window.grace + window.max_future);
    }
}
