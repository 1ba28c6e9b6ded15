//! Season archives in the simulation: the archive function's scheduled run over the forum's
//! seasons (into a DynamoDB table of the world's own on moto_server), alone and meeting a loss
//! of the whole deployment, and the reads of every season the history reached, live or
//! archived.

use axum::http::StatusCode;
use standings::archive::job::Archiver;
use standings::archive::table::SeasonTable;
use standings::services::catalog::Catalog;
use standings::services::runtime_boards::{RuntimeBoards, limit_from_env};

use super::world::{START, World, restoring};
use crate::archive::ArchiveHarness;
use crate::at;

impl World {
    /// The archive function's job on the boards as it reads them on every run (declared and
    /// runtime, tournaments and boards being deleted included).
    async fn archiver(&self) -> Result<Archiver<SeasonTable>, String> {
        self.archiver_on(self.table.clone()).await
    }

    async fn archiver_on(&self, table: SeasonTable) -> Result<Archiver<SeasonTable>, String> {
        let app = &self.app;
        let catalog = Catalog::new(app.config.clone(), app.keys.clone(), app.store.clone(), |_| ());
        let config = catalog.with_refresh(std::time::Duration::ZERO).config().await.map_err(|e| format!("the catalog: {e}"))?;
        let (keys, store) = (app.keys.clone(), app.store.clone());
        let quiet = standings::runtime::metrics::Metrics::with_sink(standings::archive::job::FUNCTION, std::sync::Arc::new(|_| ()));
        Ok(Archiver::new(config, keys, store, table.clone(), table, app.clock(), ArchiveHarness::settings()).with_metrics(quiet))
    }

    /// The run's deadline, on the clock the archive job reads (the world's).
    fn deadline(&self) -> chrono::DateTime<chrono::Utc> {
        self.app.now() + chrono::Duration::minutes(5)
    }

    pub(super) fn start() -> i64 {
        at(START).timestamp()
    }

    /// The scheduled run, on a deployment restored first when a fault left a part of it lost
    /// (which part the model cannot say: `archive_lost` is the run meeting a whole loss).
    pub(super) async fn archive(&mut self) -> Result<(), String> {
        if self.forum_lost || self.others_lost {
            self.restore(false).await?;
        }
        self.archive_run().await
    }

    /// Fault: the scheduled run on a season table failing a share of calls (`pick` seeds which),
    /// seasons and tournaments' ends alike: it may fail part-way anywhere; then the next run,
    /// which must leave every season and instance archived whole, once.
    pub(super) async fn failing_archive(&mut self, pick: u64) -> Result<(), String> {
        if self.forum_lost || self.others_lost {
            self.restore(false).await?;
        }
        let archiver = self.archiver_on(super::faults::failing_table(&self.table, pick)).await?;
        let _ = archiver.archive_due(self.deadline()).await;
        let _ = archiver.end_tournaments(None::<&standings::archive::bus::EventBridgeBus>, self.deadline()).await;
        self.archive_run().await
    }

    /// The scheduled run meeting what a partial loss left (a board's period sets, markers or
    /// guard fields gone, its guard born): every job answers or refuses (`board_restoring`), and
    /// none completes anything from a board short of its history: a season, a league day or an
    /// instance archived from a lost set stays wrong after the restore (it is never done again),
    /// which the reads after compare. Then the runbook: a restore, and the next run.
    pub(super) async fn archive_unrestored(&mut self) -> Result<(), String> {
        if !(self.forum_lost || self.others_lost) {
            return self.archive_run().await;
        }
        self.stats.faults += 1;
        let archiver = self.archiver().await?;
        if let Err(error) = archiver.archive_due(self.deadline()).await
            && error.code() != "board_restoring"
        {
            return Err(format!("an archive run on a partly lost deployment: {error}"));
        }
        // A failed end is tried again by the next run, which must then end it whole.
        let _ = archiver.end_tournaments(None::<&standings::archive::bus::EventBridgeBus>, self.deadline()).await;
        let boards = self.runtime_boards();
        if let Ok(ends) = archive::end_boards(&boards, &archiver, self.app.now(), self.deadline()).await {
            self.ended(ends)?;
        }
        if let Err(error) = self.app.closer().close_due(super::world::far()).await
            && error.code() != "board_restoring"
        {
            return Err(format!("league closes on a partly lost deployment: {error}"));
        }
        self.restore(false).await?;
        self.archive_run().await
    }

    /// A loss of every key after a drain, met by the scheduled run: a journaled board lost is
    /// not frozen (docs/archival.md), so the run refuses every due season with
    /// `board_restoring`, writes nothing into the lost board and archives nothing; then the
    /// runbook: a restore, and the next run archives each season whole.
    pub(super) async fn archive_lost(&mut self) -> Result<(), String> {
        if self.forum_lost || self.others_lost {
            self.restore(false).await?;
        }
        self.drain().await?;
        self.flush().await;
        let due = self.model.due(Self::start(), self.now());
        let run = self.archiver().await?.archive_due(self.deadline()).await;
        match (&run, due.is_empty()) {
            (Ok(_), true) => {}
            (Err(error), false) if error.code() == "board_restoring" => {}
            _ => return Err(format!("an archive run on a lost board, seasons due {due:?}: {run:?}")),
        }
        let written: Vec<String> = self.app.written_keys().await.into_iter().filter(|key| key.contains("{forum}")).collect();
        if !written.is_empty() {
            return Err(format!("an archive run wrote into the lost board: {written:?}"));
        }
        for season in &due {
            if self.table.completed("forum", season).await.map_err(|e| format!("the season table: {e}"))?.is_some() {
                return Err(format!("an archive run archived season {season} of a lost board"));
            }
        }
        self.restore(false).await?;
        self.archive_run().await
    }

    /// The scheduled run: the seasons due, then the league days due.
    /// An operator's close of the arcade's league day `back` days before today: complete, or
    /// refused (400) exactly when the model refuses it, and then the league as the model says.
    pub(super) async fn close_league(&mut self, back: u8) -> Result<(), String> {
        let now = self.app.now().timestamp();
        let day = super::model::day_number(now) - i64::from(back);
        if (day + 1) * 86_400 < now - 30 * 86_400 {
            return Ok(());
        }
        if self.forum_lost || self.others_lost {
            self.restore(false).await?;
        }
        let request = archive::LeagueRequest { board: "arcade".into(), period_id: super::model::day_of(day * 86_400) };
        let closed = self.app.closer().close(&request, super::world::far()).await;
        let model = &mut self.model;
        let (banned, standing) = (model.banned().clone(), model.arcade_day(day));
        let accepted = model.ladder.close_by_hand(day, now, |day| (day + 1) * 86_400, &standing, &banned);
        match (&closed, accepted) {
            (Ok(report), true) if report.status == "complete" => Ok(()),
            (Err(error), false) if error.code() == "bad_request" => Ok(()),
            _ => Err(format!(
                "a league close by hand of {}: {closed:?}, the model {}",
                request.period_id,
                if accepted { "closes it" } else { "refuses it" }
            )),
        }
    }

    pub(super) async fn archive_run(&mut self) -> Result<(), String> {
        let archiver = self.archiver().await?;
        archiver.archive_due(self.deadline()).await.map_err(|e| format!("archive run: {e}"))?;
        self.model.archive(Self::start(), self.now());
        // The every-minute part of the run (`{"runtime": {}}`): tournaments' ends, then deleted
        // runtime boards'; without a bus, an instance's end is done once its results are stored.
        // Their deadlines are on the clock the archive job reads (the world's).
        let ended = archiver.end_tournaments(None::<&standings::archive::bus::EventBridgeBus>, self.deadline()).await;
        if let Some(failed) = ended.iter().find(|end| end.status != "stored") {
            return Err(format!("a tournament's end: {failed:?}"));
        }
        self.model.cups.archive(self.now());
        let boards = self.runtime_boards();
        let ends = archive::end_boards(&boards, &archiver, self.app.now(), self.deadline())
            .await
            .map_err(|e| format!("runtime boards' ends: {e}"))?;
        if let Some(failed) = ends.iter().find(|end| end.status == "failed") {
            return Err(format!("a deleted board's end: {failed:?}"));
        }
        self.ended(ends)?;
        // The closes' deadline is on the real clock (the Lambda's remaining time).
        let closed = self.app.closer().close_due(super::world::far()).await.map_err(|e| format!("league closes: {e}"))?;
        if let Some(report) = closed.iter().find(|r| r.status != "complete") {
            return Err(format!("a league close did not complete: {report:?}"));
        }
        let model = &mut self.model;
        let (banned, days) = (model.banned().clone(), model.clone());
        model.ladder.close_due(self.app.now().timestamp(), |day| (day + 1) * 86_400, |day| days.arcade_day(day), &banned);
        Ok(())
    }

    fn runtime_boards(&self) -> RuntimeBoards {
        let app = &self.app;
        RuntimeBoards::new(app.config.clone(), app.keys.clone(), app.store.clone(), limit_from_env())
    }

    /// When a deleted board's end is done is the drain's (its journal stored first): observed.
    fn ended(&mut self, ends: Vec<standings::services::runtime_boards::EndReport>) -> Result<(), String> {
        for end in ends.iter().filter(|end| end.status == "done") {
            if end.board.starts_with("cup") {
                self.model.cups.retire(&end.board)?;
            } else {
                self.model.boards.retire(&end.board)?;
            }
        }
        Ok(())
    }

    /// Every season the history reached: its top, live or (the `seasons` routes) archived.
    pub(super) async fn check_seasons(&mut self) -> Result<(), String> {
        let seasons = self.model.seasons(Self::start(), self.now());
        for (board, lost) in [("forum", self.forum_lost), ("guild", self.others_lost)] {
            for season in &seasons {
                self.stats.reads += 1;
                let path = if self.model.is_archived(season) {
                    format!("/v1/boards/{board}/seasons/{season}/top?limit=100")
                } else {
                    format!("/v1/boards/{board}/top?period=season&at={season}-01&limit=100")
                };
                let (status, top) = self.app.get(&path).await;
                if lost && restoring(status, &top) {
                    continue;
                }
                let expected = if board == "forum" { self.model.season_top(season) } else { self.model.guild_season_top(season) };
                let entries = top["entries"].as_array().cloned().unwrap_or_default();
                let got: Vec<(String, i64)> =
                    entries.iter().map(|e| (e["user_id"].as_str().unwrap_or("?").to_owned(), e["score"].as_i64().unwrap_or(-1))).collect();
                if status != StatusCode::OK || got != expected {
                    return Err(format!("{board} season {season}: expected {expected:?}, got {status} {top}"));
                }
                if self.model.is_archived(season) {
                    // Its live route: closed, never an empty board (docs/archival.md#live-routes).
                    self.stats.reads += 1;
                    let (status, live) = self.app.get(&format!("/v1/boards/{board}/top?period=season&at={season}-01&limit=100")).await;
                    if !(lost && restoring(status, &live))
                        && (status, live["error"]["code"].as_str()) != (StatusCode::GONE, Some("period_closed"))
                    {
                        return Err(format!("{board} season {season} archived: its live route answered {status} {live}"));
                    }
                }
            }
        }
        self.check_archived_closed(&seasons).await
    }

    /// An archived season has nothing live left, whatever moved or restored its board since:
    /// no set, no statement (docs/archival.md). A board lost, or part-way through a restore, is
    /// fenced and not looked at; nor is the layout a move of the guild has not switched to yet
    /// (its last step carries closed seasons as the old layout holds them, checked once done).
    async fn check_archived_closed(&mut self, seasons: &[String]) -> Result<(), String> {
        let archived: Vec<&String> = seasons.iter().filter(|season| self.model.is_archived(season)).collect();
        let boards: Vec<&str> = [("{forum}", self.forum_lost), ("{guild", self.others_lost)]
            .into_iter()
            .filter_map(|(tag, lost)| (!lost).then_some(tag))
            .collect();
        if archived.is_empty() || boards.is_empty() {
            return Ok(());
        }
        let keys = self.app.written_keys().await;
        for season in archived {
            let live: Vec<&String> = keys
                .iter()
                .filter(|key| boards.iter().any(|tag| key.contains(tag)))
                .filter(|key| !self.guild_moving_to.iter().any(|base| key.starts_with(base.as_str())))
                .filter(|key| key.ends_with(&format!(":z:season:{season}")) || key.contains(&format!(":stmt:season:{season}:")))
                .collect();
            if !live.is_empty() {
                return Err(format!("archived season {season} is live again: {live:?}"));
            }
        }
        Ok(())
    }
}
