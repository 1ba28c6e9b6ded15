//! The `archive` function: the season archive job (`standings::archive::job`) triggered by an EventBridge schedule — every archived
//! board's last finished season — or by a manual event for one season, optionally one shard:
//! `{"board": "points", "season": "2026-10", "shard_index": 0, "shard_total": 2}`. The
//! scheduled run also closes every ended league period (docs/leagues.md); one period can be
//! closed by hand with `{"league": {"board": "xp", "period_id": "2026-W47"}}`.

use std::sync::Arc;

use aws_lambda_events::eventbridge::EventBridgeEvent;
use chrono::{DateTime, Utc};
use lambda_runtime::{Diagnostic, LambdaEvent};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use standings::Clock;
use standings::archive::bus::{EventBridgeBus, eventbridge_client};
use standings::archive::ends_known::EndsKnown;
use standings::archive::job::{ArchiveError, Archiver, OVERDUE_AFTER, SeasonReport, Settings};
use standings::archive::table::{ArchiveSink, SeasonTable, Shard};
use standings::archive::tournament_end::InstanceEnd;
use standings::domain::config::Config;
use standings::domain::period::Period;
use standings::redis::store::Store;
use standings::runtime::deadline::invocation_deadline;
use standings::runtime::metrics::Unit;
use standings::services::catalog::Catalog;
use standings::services::leagues::{CloseReport, Leagues};
use standings::services::runtime_boards::{self, DefineError, EndReport, RuntimeBoards};

/// One season (one shard of it), named by the caller.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManualRequest {
    pub board: String,
    pub season: String,
    #[serde(default)]
    pub shard_index: u32,
    #[serde(default = "one")]
    pub shard_total: u32,
}

fn one() -> u32 {
    1
}

/// One ended league period, named by the caller.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeagueRequest {
    pub board: String,
    pub period_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct LeagueEnvelope {
    league: LeagueRequest,
}

/// `{"runtime": {}}`: end every deleted runtime board (docs/runtime-boards.md#deleting).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeEnvelope {
    runtime: RuntimeRequest,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeRequest {}

/// What an invocation asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum ArchiveRequest {
    /// EventBridge's scheduled event: archive whatever is due, close every ended league period.
    Scheduled(EventBridgeEvent),
    Manual(ManualRequest),
    League(LeagueRequest),
    /// End every deleted runtime board (the every-minute schedule).
    Runtime,
}

impl TryFrom<Value> for ArchiveRequest {
    type Error = ArchiveError;

    /// An EventBridge event carries `detail-type`; anything else must be a manual request, so
    /// a malformed one gets that shape's own error (e.g. "missing field `season`").
    fn try_from(payload: Value) -> Result<Self, ArchiveError> {
        let bad = |e: serde_json::Error| ArchiveError::BadRequest(e.to_string());
        if payload.get("detail-type").is_some() {
            serde_json::from_value(payload).map(Self::Scheduled).map_err(bad)
        } else if payload.get("runtime").is_some() {
            serde_json::from_value::<RuntimeEnvelope>(payload).map(|_| Self::Runtime).map_err(bad)
        } else if payload.get("league").is_some() {
            serde_json::from_value::<LeagueEnvelope>(payload).map(|e| Self::League(e.league)).map_err(bad)
        } else {
            serde_json::from_value(payload).map(Self::Manual).map_err(bad)
        }
    }
}

/// The invocation's result: one report per season and per league period it worked on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArchiveResponse {
    pub results: Vec<SeasonReport>,
    pub leagues: Vec<CloseReport>,
    /// Deleted runtime boards this run worked on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ended: Vec<EndReport>,
    /// Tournament instances whose end this run worked on (docs/tournaments.md#the-end).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tournaments: Vec<InstanceEnd>,
}

/// The metric a scheduled run puts: league periods ended more than `OVERDUE_AFTER` ago that
/// are still not closed after the run (the `LeaguesOverdueAlarm`'s metric).
pub const LEAGUES_OVERDUE: &str = "LeaguesOverdue";

/// The league closes of a run: every board's league, on the job's clock and grace.
pub struct LeagueCloser {
    pub config: Arc<Config>,
    pub leagues: Leagues,
    pub clock: Clock,
    pub grace: chrono::Duration,
}

impl LeagueCloser {
    /// Every ended period not closed yet, of every board with a league, until `deadline`.
    pub async fn close_due(&self, deadline: DateTime<Utc>) -> Result<Vec<CloseReport>, ArchiveError> {
        let now = (self.clock)();
        let mut reports = Vec::new();
        let mut failures = Vec::new();
        // One board's failure does not hold up the others; the first is the run's error.
        for board in self.config.boards().iter().filter(|b| b.league.is_some()) {
            match self.leagues.close_due(board, now, self.grace, deadline).await {
                Ok(closed) => reports.extend(closed),
                Err(error) => {
                    tracing::error!(board = %board.name, %error, "league periods not closed");
                    failures.push(error);
                }
            }
        }
        match failures.into_iter().next() {
            Some(first) => Err(first.into()),
            None => Ok(reports),
        }
    }

    /// League periods that ended more than `OVERDUE_AFTER` ago and are still not closed (the
    /// `LeaguesOverdueAlarm`'s metric, put after every scheduled run).
    pub async fn overdue(&self) -> Result<u64, ArchiveError> {
        let now = (self.clock)();
        let mut overdue = 0;
        for board in self.config.boards().iter().filter(|b| b.league.is_some()) {
            let unclosed = match self.leagues.unclosed(board, now, self.grace).await {
                Ok(unclosed) => unclosed,
                // Waiting for its restore (`BoardsLost` counts it): the other boards still are.
                Err(standings::redis::error::StoreError::Restoring) => continue,
                Err(error) => return Err(error.into()),
            };
            overdue += unclosed.iter().filter(|p| p.end.is_some_and(|end| end.with_timezone(&Utc) + OVERDUE_AFTER <= now)).count() as u64;
        }
        Ok(overdue)
    }

    /// One named period, which must have ended `grace` ago.
    pub async fn close(&self, request: &LeagueRequest, deadline: DateTime<Utc>) -> Result<CloseReport, ArchiveError> {
        let board = self.config.board(&request.board).ok_or_else(|| ArchiveError::UnknownBoard(request.board.clone()))?;
        let league = board.league.as_ref().ok_or_else(|| ArchiveError::BadRequest(format!("board {:?} has no league", board.name)))?;
        let period = Period::named(league.period, &request.period_id, board.timezone)
            .map_err(|e| ArchiveError::BadRequest(format!("period_id {:?}: {e}", request.period_id)))?;
        let now = (self.clock)();
        let ready_at = period.end.map(|end| end.with_timezone(&Utc) + self.grace);
        if ready_at.is_none_or(|ready| ready > now) {
            return Err(ArchiveError::BadRequest(format!(
                "{} {} has not ended (with its grace window)",
                league.period.as_str(),
                period.id
            )));
        }
        // Tiers move one period at a time: the periods before this one close first.
        if let Some(older) = self.leagues.unclosed(board, now, self.grace).await?.into_iter().find(|p| p.start < period.start) {
            return Err(ArchiveError::BadRequest(format!("{} {} is not closed yet: close it first", league.period.as_str(), older.id)));
        }
        Ok(self.leagues.close(board, league, &period, now, deadline).await?)
    }
}

/// The error result Lambda reports (`errorType` is the stable code).
pub fn diagnostic(error: ArchiveError) -> Diagnostic {
    tracing::error!(code = error.code(), error = %error, "archive invocation failed");
    Diagnostic { error_type: error.code().to_owned(), error_message: error.to_string() }
}

/// Serves one invocation's payload until `deadline`.
pub async fn run<S: ArchiveSink>(
    archiver: &Archiver<S>,
    closer: &LeagueCloser,
    payload: Value,
    deadline: DateTime<Utc>,
) -> Result<ArchiveResponse, ArchiveError> {
    let (results, leagues) = match ArchiveRequest::try_from(payload)? {
        ArchiveRequest::Scheduled(event) => {
            tracing::info!(scheduled_for = ?event.time, "scheduled archive run");
            // A failed season does not hold up the leagues, nor the other way round.
            let seasons = archiver.archive_due(deadline).await;
            let leagues = closer.close_due(deadline).await;
            if let Ok(overdue) = closer.overdue().await {
                archiver.metrics().put(LEAGUES_OVERDUE, Unit::Count, overdue as f64, &[]);
            }
            (seasons?, leagues?)
        }
        ArchiveRequest::Manual(request) => {
            let shard = Shard { index: request.shard_index, total: request.shard_total };
            (vec![archiver.archive_season(&request.board, &request.season, shard, deadline).await?], Vec::new())
        }
        ArchiveRequest::League(request) => (Vec::new(), vec![closer.close(&request, deadline).await?]),
        // `App::handle`'s (the deleted boards' ends need the catalog's own service).
        ArchiveRequest::Runtime => (Vec::new(), Vec::new()),
    };
    for report in &leagues {
        tracing::info!(board = %report.board, period_id = %report.period_id, status = report.status, cohorts = report.cohorts_closed, "league close");
    }
    for report in &results {
        tracing::info!(board = %report.board, season = %report.season, status = ?report.status, items = report.items_written, "archive run");
    }
    Ok(ArchiveResponse { results, leagues, ended: Vec::new(), tournaments: Vec::new() })
}

/// Everything an invocation needs, built once per container.
pub struct App {
    /// The archive job for the boards as of each invocation (declared and runtime).
    pub archiver: Catalog<Archiver<SeasonTable>>,
    pub closer: LeagueCloser,
    pub boards: RuntimeBoards,
    /// Where tournaments' results are announced (`STANDINGS_EVENT_BUS`; none: archived only).
    pub bus: Option<EventBridgeBus>,
    pub clock: Clock,
}

impl App {
    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Arc::new(Config::from_env()?);
        let keys = standings::keys_from_env()?;
        let store = Store::from_env().await?;
        let table = SeasonTable::from_env().await?;
        let settings = Settings::default();
        let closer = LeagueCloser {
            config: config.clone(),
            leagues: Leagues::new(keys.clone(), store.clone()),
            clock: standings::system_clock(),
            grace: settings.grace,
        };
        let boards = RuntimeBoards::new(config.clone(), keys.clone(), store.clone(), runtime_boards::limit_from_env());
        let (built_keys, built_store) = (keys.clone(), store.clone());
        let ends_known = EndsKnown::default();
        let build = move |config| {
            Archiver::new(
                config,
                built_keys.clone(),
                built_store.clone(),
                table.clone(),
                table.clone(),
                standings::system_clock(),
                settings.clone(),
            )
            .with_ends_known(ends_known.clone())
        };
        let archiver = Catalog::new(config, keys, store, build).with_refresh(std::time::Duration::ZERO);
        let bus = match standings::event_bus_from_env() {
            Some(bus) => Some(EventBridgeBus::new(eventbridge_client().await, bus)),
            None => None,
        };
        Ok(Self { archiver, closer, boards, bus, clock: standings::system_clock() })
    }

    /// One invocation, stopping before the Lambda deadline: a scheduled run (or
    /// `{"runtime": {}}`) also ends every deleted runtime board.
    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<ArchiveResponse, Diagnostic> {
        let deadline = invocation_deadline(event.context.deadline, Utc::now(), TIMEOUT);
        let ends = event.payload.get("detail-type").is_some() || event.payload.get("runtime").is_some();
        let archiver = self.archiver.current().await.map_err(|e| diagnostic(ArchiveError::from(e)))?;
        let mut response = run(&archiver, &self.closer, event.payload, deadline).await.map_err(diagnostic)?;
        if ends {
            // Tournaments first, and whatever the deleted boards' ends do: their results are due
            // within 2 minutes of their end (docs/tournaments.md#the-end). On the catalog as it
            // is now: the run above may have taken minutes, and an end moved meanwhile counts.
            let archiver = self.archiver.current().await.map_err(|e| diagnostic(ArchiveError::from(e)))?;
            response.tournaments = archiver.end_tournaments(self.bus.as_ref(), deadline).await;
            response.ended = end_boards(&self.boards, &archiver, (self.clock)(), deadline).await.map_err(diagnostic)?;
        }
        Ok(response)
    }
}

/// Ends every deleted runtime board as far as it goes before `deadline`.
pub async fn end_boards<S: ArchiveSink>(
    boards: &RuntimeBoards,
    archiver: &Archiver<S>,
    now: DateTime<Utc>,
    deadline: DateTime<Utc>,
) -> Result<Vec<EndReport>, ArchiveError> {
    let reports = boards.finish_ended(archiver, now, deadline).await.map_err(|error| match error {
        DefineError::Store(store) => ArchiveError::from(store),
        other => ArchiveError::BadRequest(other.to_string()),
    })?;
    for report in &reports {
        tracing::info!(board = %report.board, status = report.status, "runtime board end");
    }
    Ok(reports)
}

/// The function's timeout (infra/template.yaml `ArchiveFunction`): an invocation's deadline
/// when the runtime sends none (the local run).
pub const TIMEOUT: chrono::Duration = chrono::Duration::seconds(900);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_shapes_parse_and_a_bad_manual_request_says_what_is_wrong() {
        let manual: Value = serde_json::from_str(include_str!("../fixtures/manual-event.json")).unwrap();
        assert!(matches!(ArchiveRequest::try_from(manual), Ok(ArchiveRequest::Manual(r)) if r.shard_total == 1));
        let scheduled: Value = serde_json::from_str(include_str!("../fixtures/scheduled-event.json")).unwrap();
        assert!(matches!(ArchiveRequest::try_from(scheduled), Ok(ArchiveRequest::Scheduled(_))));
        let sharded = serde_json::json!({"board": "points", "season": "2026-10", "shard_index": 1, "shard_total": 4});
        assert!(matches!(ArchiveRequest::try_from(sharded), Ok(ArchiveRequest::Manual(r)) if (r.shard_index, r.shard_total) == (1, 4)));
        let missing = ArchiveRequest::try_from(serde_json::json!({"board": "points"})).unwrap_err();
        assert!(missing.to_string().contains("missing field `season`"), "{missing}");
        let league = serde_json::json!({"league": {"board": "xp", "period_id": "2026-W47"}});
        assert!(matches!(ArchiveRequest::try_from(league), Ok(ArchiveRequest::League(r)) if r.period_id == "2026-W47"));
        let unknown = ArchiveRequest::try_from(serde_json::json!({"board": "points", "season": "2026-10", "shard": 1})).unwrap_err();
        assert!(unknown.to_string().contains("unknown field `shard`"), "{unknown}");
    }

    #[test]
    fn an_error_result_carries_its_code() {
        let diagnostic = diagnostic(ArchiveError::UnknownBoard("nope".into()));
        assert_eq!(diagnostic.error_type, "unknown_board");
        assert_eq!(diagnostic.error_message, "unknown board \"nope\"");
    }
}
