//! The end of a tournament's instance (docs/tournaments.md#the-end), on the archive function's
//! every-minute run: its results archived rank for rank as a season is (frozen, then stored in
//! DynamoDB and verified), its players and attempts freed, then announced as `Standings
//! Tournament Ended` events, a page of ranked results with their prizes each. Every step is
//! checkpointed in the table, so a run cut short resumes where it stood; a tournament with no
//! instance ended after the watermark a warm function knows costs no read (`EndsKnown`).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::{Value, json};

use super::bus::Announce;
use super::job::{ArchiveError, Archiver, Status};
use super::table::{ArchiveSink, Shard};
use crate::domain::config::tournament::{Instance, Prize, Tournament, ended_through, prize_in};

/// Where the announcement of an instance stands in the table: the next rank to send.
const ANNOUNCED: Shard = Shard { index: 0, total: 0 };
/// Where a tournament's ends stand in the table (under this name in place of an instance's):
/// the end (Unix milliseconds) of its latest instance such that it and every earlier one are
/// finished. A run looks only at instances that ended after it.
const ENDED_THROUGH_MS: &str = "~ended-ms";
/// The watermark as runs kept it before, in whole seconds: read while no other is kept. An
/// instance ended early or by a deletion ends part-way through a second, above a watermark
/// rounded down to its second: its tournament's end was never done, the instance read again
/// every run.
const ENDED_THROUGH: &str = "~ended";
/// Instances of one tournament walked back from now at most (27 years of a daily one, 104 days
/// of a cron one every 15 minutes, the closest a schedule may fire, `MIN_SPACING_MINUTES`): a
/// backlog longer than this keeps the watermark where it is (logged), so none is skipped.
const INSTANCES_WALKED: usize = 10_000;
/// A page's results, as JSON, stay under this (EventBridge takes 256 KB a request).
const PAGE_BYTES: usize = 200 * 1024;
/// Ranks read from the table at a time while pages are packed.
const READ_RANKS: u64 = 500;

/// What a run did for one instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstanceEnd {
    pub tournament_id: String,
    pub instance: String,
    /// `archiving` (its results go on next run), `announcing` (its events go on next run),
    /// `stored` (results stored; no event bus to announce them on), `done`, or `failed`
    /// (logged; tried again next run).
    pub status: &'static str,
    pub total: u64,
    pub pages_sent: u64,
    /// Why it failed (`failed` only); tried again next run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl<S: ArchiveSink> Archiver<S> {
    /// Ends every instance of every tournament that ended by now, as far as `deadline` allows.
    /// `bus`: where results are announced (`None`: archived only, announced once one is set).
    pub async fn end_tournaments<B: Announce>(&self, bus: Option<&B>, deadline: DateTime<Utc>) -> Vec<InstanceEnd> {
        let now = (self.clock)();
        let mut reports = Vec::new();
        // A retired tournament (deleted, its end done) costs nothing.
        for tournament in self.config.boards().iter().filter_map(|board| board.tournament.as_deref()).filter(|t| !t.retired) {
            if self.ends_known.get(&tournament.id).is_some_and(|known| tournament.ended_by(now, known, 1).is_empty()) {
                continue;
            }
            let watermark = match self.watermark(tournament).await {
                Ok(through) => through,
                Err(error) => {
                    tracing::error!(tournament = %tournament.id, %error, "tournament ends not read");
                    continue;
                }
            };
            let mut instances = tournament.ended_by(now, watermark, INSTANCES_WALKED);
            let walked_to_watermark = instances.len() < INSTANCES_WALKED;
            if !walked_to_watermark {
                tracing::error!(tournament = %tournament.id, "more instances to end than a run walks: the oldest wait");
            }
            // The latest first (its results are due within 2 minutes of its end), then a backlog
            // oldest first: each run moves the watermark up from the bottom.
            if let Some(backlog) = instances.get_mut(1..) {
                backlog.reverse();
            }
            // Whether each instance is finished: announced, or stored where no
            // bus announces (a bus set later announces what ends from then on).
            let mut finished = vec![false; instances.len()];
            for (instance, finished) in instances.iter().zip(finished.iter_mut()) {
                let report = match self.end_instance(tournament, instance, bus, deadline).await {
                    Ok(report) => report,
                    Err(error) => {
                        tracing::error!(tournament = %tournament.id, instance = %instance.id, code = error.code(), %error, "tournament instance not ended");
                        InstanceEnd {
                            tournament_id: tournament.id.clone(),
                            instance: instance.id.clone(),
                            status: "failed",
                            total: 0,
                            pages_sent: 0,
                            error: Some(error.to_string()),
                        }
                    }
                };
                *finished = report.status == "done" || (report.status == "stored" && bus.is_none());
                reports.push(report);
                // Each instance's steps stop at the deadline themselves; the rest wait for the
                // next run (a minute later), instead of starting what cannot finish.
                if (self.clock)() >= deadline {
                    break;
                }
            }
            let through = ended_through(&instances, &finished, walked_to_watermark);
            self.advance_ended(tournament, through).await;
            // Behind the watermark read at the start: those instances were finished before.
            if let Some(watermark) = watermark
                && let Err(error) = self.prune_instances(tournament, watermark).await
            {
                tracing::warn!(tournament = %tournament.id, %error, "ended instances' records not forgotten (the next run goes on)");
            }
            if (self.clock)() >= deadline {
                return reports;
            }
        }
        reports
    }

    /// The tournament's watermark: every instance ending then or before is finished.
    async fn watermark(&self, tournament: &Tournament) -> Result<Option<DateTime<Utc>>, ArchiveError> {
        let through = match self.table.checkpoint(&tournament.id, ENDED_THROUGH_MS, ANNOUNCED).await? {
            Some(ms) => i64::try_from(ms).ok().and_then(DateTime::from_timestamp_millis),
            None => {
                let secs = self.table.checkpoint(&tournament.id, ENDED_THROUGH, ANNOUNCED).await?;
                secs.and_then(|secs| DateTime::from_timestamp(i64::try_from(secs).ok()?, 0))
            }
        };
        self.ends_known.set(&tournament.id, through);
        Ok(through)
    }

    /// Whether deleted tournament `tournament` is over: every instance that ran is finished
    /// (stored, and announced where a bus is set), so its keys may go.
    pub async fn tournament_finished(&self, tournament: &Tournament) -> Result<bool, ArchiveError> {
        let now = (self.clock)();
        let deleted = tournament.deleted.is_some_and(|deleted| deleted <= now);
        Ok(deleted && tournament.ended_by(now, self.watermark(tournament).await?, 1).is_empty())
    }

    /// Moves the tournament's watermark to `through`, if anywhere.
    async fn advance_ended(&self, tournament: &Tournament, through: Option<DateTime<Utc>>) {
        let Some(ms) = through.and_then(|end| u64::try_from(end.timestamp_millis()).ok()) else { return };
        match self.table.advance_checkpoint(&tournament.id, ENDED_THROUGH_MS, ANNOUNCED, ms, (self.clock)()).await {
            Ok(_) => self.ends_known.set(&tournament.id, through),
            Err(error) => {
                tracing::warn!(tournament = %tournament.id, %error, "tournament ends' watermark not moved (moved by the next run)")
            }
        }
    }

    async fn end_instance<B: Announce>(
        &self,
        tournament: &Tournament,
        instance: &Instance,
        bus: Option<&B>,
        deadline: DateTime<Utc>,
    ) -> Result<InstanceEnd, ArchiveError> {
        let (id, name) = (tournament.id.as_str(), instance.id.as_str());
        let mut report = InstanceEnd {
            tournament_id: id.to_owned(),
            instance: name.to_owned(),
            status: "archiving",
            total: 0,
            pages_sent: 0,
            error: None,
        };
        let (total, prizes) = match self.table.completed(id, name).await? {
            Some(done) => (done.total, done.prizes),
            None => {
                let archived = self.archive_ended(id, name, deadline).await?;
                if !matches!(archived.status, Status::Complete | Status::AlreadyComplete) {
                    return Ok(report);
                }
                (archived.total, None)
            }
        };
        report.total = total;
        // The prizes it ended with, recorded with its results: every read of them, and its
        // events, are priced from there once an edit has left them out of the definition
        // (`PRIZES_KEPT`). Read whole (the catalog may leave prizes out).
        // A definition gone from the catalog and its tombstone records none (as before: its
        // results are stored, its events need it).
        let mut whole = None;
        let prizes: Vec<Prize> = match prizes.map(|prizes| serde_json::from_str(&prizes)) {
            Some(Ok(prizes)) => prizes,
            _ => match crate::redis::catalog::whole_tournament(&self.store, &self.keys, tournament).await? {
                Some(read) => {
                    let prizes = read.prizes_at(instance.end).to_vec();
                    self.table.record_prizes(id, name, &serde_json::to_string(&prizes).expect("prizes serialize")).await?;
                    whole = Some(read);
                    prizes
                }
                None => Vec::new(),
            },
        };
        let mut next = self.table.checkpoint(id, name, ANNOUNCED).await?;
        if next.is_some_and(|next| next > total) {
            report.status = "done";
            return Ok(report);
        }
        // Until it is announced, every run frees them again (harmless): a run stopped after
        // the archive completed leaves nothing behind.
        self.free_seats(tournament, name).await?;
        let Some(bus) = bus else {
            report.status = "stored";
            return Ok(report);
        };
        // The events carry the metadata the catalog held may leave out.
        let whole = match whole {
            Some(whole) => whole,
            None => self.whole(tournament).await?,
        };
        let tournament = &*whole;
        while next.is_none_or(|next| next <= total) {
            if (self.clock)() >= deadline {
                report.status = "announcing";
                return Ok(report);
            }
            let first = next.unwrap_or(1);
            let (page, after) = self.page(tournament, instance, (total, &prizes), first).await?;
            bus.announce(&[page]).await.map_err(|error| ArchiveError::BadRequest(format!("announcing results: {error}")))?;
            report.pages_sent += 1;
            next = Some(self.table.advance_checkpoint(id, name, ANNOUNCED, after, (self.clock)()).await?);
        }
        report.status = "done";
        tracing::info!(tournament = id, instance = name, total, "tournament instance ended: results stored and announced");
        Ok(report)
    }

    /// `tournament` with the prizes and metadata the catalog may leave out.
    async fn whole<'a>(&self, tournament: &'a Tournament) -> Result<std::borrow::Cow<'a, Tournament>, ArchiveError> {
        crate::redis::catalog::whole_tournament(&self.store, &self.keys, tournament)
            .await?
            .ok_or_else(|| ArchiveError::BadRequest(format!("tournament {}: its definition is gone from the catalog", tournament.id)))
    }

    /// The live board, players and attempts of an archived instance: its results are in the
    /// table now. Journaled with what it freed, so a restore brings the instance back released.
    async fn free_seats(&self, tournament: &Tournament, instance: &str) -> Result<(), ArchiveError> {
        let period = tournament.period_named(instance).map_err(|_| ArchiveError::InvalidSeason(instance.to_owned()))?;
        let mut conn = self.store.write_connection().await?;
        super::freeze::release_instance(&mut conn, &self.keys.board(&tournament.id), &period, (self.clock)(), self.store.replica_wait())
            .await?;
        Ok(())
    }

    /// The page of results from rank `first`, as one event's detail, and the rank after it.
    async fn page(
        &self,
        tournament: &Tournament,
        instance: &Instance,
        (total, prizes): (u64, &[Prize]),
        first: u64,
    ) -> Result<(String, u64), ArchiveError> {
        let mut results: Vec<Value> = Vec::new();
        let (mut bytes, mut next) = (0, first);
        'read: while next <= total {
            let entries = self.table.ranks(&tournament.id, &instance.id, next, (next + READ_RANKS - 1).min(total)).await?;
            if entries.is_empty() {
                return Err(ArchiveError::BadRequest(format!("rank {next} of {} {} is not in the table", tournament.id, instance.id)));
            }
            for entry in entries {
                let row =
                    json!({"rank": entry.rank, "user_id": entry.user_id, "score": entry.points, "prize": prize_in(prizes, entry.rank)});
                let size = row.to_string().len() + 1;
                if bytes + size > PAGE_BYTES && !results.is_empty() {
                    break 'read;
                }
                bytes += size;
                results.push(row);
                next = entry.rank + 1;
            }
        }
        let detail = json!({
            "tournament_id": tournament.id,
            "title": tournament.title,
            "instance": instance.id,
            "started_at": instance.start.to_rfc3339_opts(SecondsFormat::Secs, true),
            "ended_at": instance.end.to_rfc3339_opts(SecondsFormat::Secs, true),
            "total": total,
            "first_rank": first,
            "last": next > total,
            "results": results,
            "metadata": tournament.metadata,
        });
        Ok((detail.to_string(), next.max(first)))
    }
}
