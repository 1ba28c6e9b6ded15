//! A recurring tournament's records of instances that ended long ago, forgotten
//! (docs/tournaments.md#the-end): each released instance keeps a `closed|` field in the board's
//! guard (so a restore that replays its writes closes it again), which nothing reads once the
//! instance's keys have expired, and which a schedule every 15 minutes would otherwise grow by
//! 35,000 a year. Each run that ends an instance forgets the next ones, oldest first, from where
//! the last stopped (the guard's `pruned` mark): a backlog from years of instances goes in steps
//! of `PRUNED_AT_ONCE`.

use chrono::{DateTime, Duration, Utc};

use super::freeze;
use super::job::{ArchiveError, Archiver};
use super::table::ArchiveSink;
use crate::domain::config::tournament::Tournament;

/// How long past its keys' expiry an instance's record is kept: beyond any clock skew between
/// the functions and Redis, and the bans that look back over a kind's retention.
const KEPT_PAST_EXPIRY: Duration = Duration::days(1);
/// Instances forgotten by one call at most (one script call, one journal line).
pub const PRUNED_AT_ONCE: usize = 1_000;

impl<S: ArchiveSink> Archiver<S> {
    /// Forgets the records of `tournament`'s instances that ended before `watermark` (the end of
    /// its latest finished instance, whose record stays) and whose keys expired a day ago or
    /// more, up to `PRUNED_AT_ONCE` of them. How many fields it removed.
    pub(super) async fn prune_instances(&self, tournament: &Tournament, watermark: DateTime<Utc>) -> Result<u64, ArchiveError> {
        let keys = self.keys.board(&tournament.id);
        let mut conn = self.store.write_connection().await?;
        let after = freeze::pruned_through(&mut conn, &keys).await?.unwrap_or(tournament.start - Duration::seconds(1));
        let now = (self.clock)();
        let mut periods = Vec::new();
        let mut through = None;
        for instance in tournament.ended_between(after, watermark - Duration::milliseconds(1), PRUNED_AT_ONCE) {
            let Ok(period) = tournament.period_named(&instance.id) else { break };
            // A one-off's instance never expires: its one record stays.
            match period.expires_at().and_then(|at| DateTime::from_timestamp(at, 0)) {
                Some(expires) if expires + KEPT_PAST_EXPIRY <= now => {}
                _ => break,
            }
            periods.push(period);
            through = Some(instance.end);
        }
        let Some(through) = through else { return Ok(0) };
        let removed = freeze::prune_instances(&mut conn, &keys, &periods, through, now, self.store.replica_wait()).await?;
        Ok(removed.unwrap_or(0))
    }
}
