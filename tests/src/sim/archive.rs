//! Season archives in the simulation: the archive function's scheduled run over the forum's
//! seasons (into a DynamoDB table of the world's own on moto_server), alone and meeting a loss
//! of the whole deployment, and the reads of every season the history reached, live or
//! archived.

use std::collections::HashSet;

use axum::http::StatusCode;
use standings::archive::job::Archiver;
use standings::archive::table::SeasonTable;

use super::world::{START, World, restoring};
use crate::archive::ArchiveHarness;
use crate::at;

impl World {
    fn archiver(&self) -> Archiver<SeasonTable> {
        let app = &self.app;
        let (config, keys, store) = (app.config.clone(), app.keys.clone(), app.store.clone());
        Archiver::new(config, keys, store, self.table.clone(), self.table.clone(), app.clock(), ArchiveHarness::settings())
    }

    /// The run's deadline, on the clock the archive job reads (the world's).
    fn deadline(&self) -> chrono::DateTime<chrono::Utc> {
        self.app.now() + chrono::Duration::minutes(5)
    }

    fn start() -> i64 {
        at(START).timestamp()
    }

    /// The scheduled run, on a deployment restored first when a fault left a part of it lost
    /// (which part the model cannot say: `archive_lost` is the run meeting a loss).
    pub(super) async fn archive(&mut self) -> Result<(), String> {
        if self.forum_lost || self.others_lost {
            self.restore(false).await?;
        }
        self.archive_run().await
    }

    /// A loss of every key after a drain, met by the scheduled run; then the runbook. Only when
    /// every due season with members was seen running: else the run archives it empty, as
    /// docs/archival.md says.
    pub(super) async fn archive_lost(&mut self) -> Result<(), String> {
        if self.forum_lost || self.others_lost {
            self.restore(false).await?;
        }
        if !self.model.due_seen(Self::start(), self.now()) {
            return self.archive_run().await;
        }
        self.drain().await?;
        let keys = self.app.written_keys().await;
        super::faults::delete(&self.app, &keys).await;
        (self.forum_lost, self.others_lost) = (true, true);
        self.archive_run().await
    }

    async fn archive_run(&mut self) -> Result<(), String> {
        let (start, now, lost) = (Self::start(), self.now(), self.forum_lost);
        let due = self.model.due(start, now);
        let run = self.archiver().archive_due(self.deadline()).await;
        if !lost {
            run.map_err(|e| format!("archive run: {e}"))?;
            self.model.archive(start, now, false, &HashSet::new());
            return Ok(());
        }
        // Whatever the run answered, nothing lost may be archived: a season with members is
        // refused (`live_board_lost`); an empty one may be archived empty or refused.
        let mut refused = HashSet::new();
        for season in &due {
            if self.table.completed("forum", season).await.map_err(|e| format!("the season table: {e}"))?.is_none() {
                refused.insert(season.clone());
            }
        }
        let must_refuse = self.model.archive(start, now, true, &refused);
        if let Some(season) = must_refuse.iter().find(|s| !refused.contains(*s)) {
            return Err(format!("archive run after a loss: season {season} archived though its board was lost ({run:?})"));
        }
        if refused.is_empty() {
            return Ok(());
        }
        // The runbook for `live_board_lost`: let each season take writes again, restore, run.
        let guard = self.app.keys.board("forum").guard();
        let mut conn = self.app.redis.clone();
        for season in &refused {
            let _: () = redis::cmd("HDEL").arg(&guard).arg(format!("closed|season:{season}")).query_async(&mut conn).await.expect("Redis");
        }
        self.restore(false).await?;
        self.archive_run_after_restore().await
    }

    async fn archive_run_after_restore(&mut self) -> Result<(), String> {
        self.archiver().archive_due(self.deadline()).await.map_err(|e| format!("archive run after the restore: {e}"))?;
        self.model.archive(Self::start(), self.now(), false, &HashSet::new());
        Ok(())
    }

    /// Every season the history reached: its top, live or (the `seasons` routes) archived.
    pub(super) async fn check_seasons(&mut self) -> Result<(), String> {
        for season in self.model.seasons(Self::start(), self.now()) {
            self.stats.reads += 1;
            let path = if self.model.is_archived(&season) {
                format!("/v1/boards/forum/seasons/{season}/top?limit=100")
            } else {
                format!("/v1/boards/forum/top?period=season&at={season}-01&limit=100")
            };
            let (status, top) = self.app.get(&path).await;
            if self.forum_lost && restoring(status, &top) {
                continue;
            }
            let expected = self.model.season_top(&season);
            let entries = top["entries"].as_array().cloned().unwrap_or_default();
            let got: Vec<(String, i64)> =
                entries.iter().map(|e| (e["user_id"].as_str().unwrap_or("?").to_owned(), e["score"].as_i64().unwrap_or(-1))).collect();
            if status != StatusCode::OK || got != expected {
                return Err(format!("forum season {season}: expected {expected:?}, got {status} {top}"));
            }
        }
        Ok(())
    }
}
