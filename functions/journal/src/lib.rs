//! The `journal` function (docs/journal.md): wiring only. Every minute, EventBridge Scheduler's
//! event drains each board's journal of applied writes from Redis to S3, where it outlives Redis,
//! and its rank-change notifications to EventBridge (docs/notifications.md). `{"drain": {}}` runs
//! a drain by hand; `{"restore": {"board"?, "campaign"?}}` brings boards back from the journal
//! after Redis lost them; `{"verify": {"board"?}}` compares boards with their journal and
//! `{"dry_run": {…}}` replays one under candidate rules; `{"reshard": {"board"}}` moves a board
//! to the shards its configuration says (docs/scaling.md). The jobs themselves live in the shared
//! crate (`standings::services::journal`).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use lambda_runtime::{Diagnostic, LambdaEvent};
use serde::Deserialize;
use serde_json::Value;
use standings::Clock;
use standings::domain::config::Config;
use standings::redis::keys::Keys;
use standings::redis::store::Store;
use standings::runtime::deadline::invocation_deadline;
use standings::runtime::metrics::Metrics;
use standings::services::catalog::Catalog;

pub use standings::archive::bus::{Bus, BusError, EventBridgeBus, Unsent, eventbridge_client};
pub use standings::archive::objects::{ObjectError, Objects, Put, board_objects, object_name};
pub use standings::archive::s3::{S3Objects, s3_client};
pub use standings::services::journal::{
    BoardDrain, BoardRestore, CHUNK_ENTRIES, Checker, DRAINED_METRIC, DrainError, DrainReport, Drainer, DryRunReport, DryRunRequest,
    LAG_METRIC, MISMATCH_METRIC, NOTICE_CHUNK, NOTICE_LAG_METRIC, NOTICES_DROPPED_METRIC, NOTICES_SENT_METRIC, Notifier, Resharder,
    RestoreError, RestoreReport, Restorer, Status, VerifyReport,
};

/// The `Function` dimension of this function's metrics.
pub const FUNCTION: &str = "journal";
/// Time kept back from the Lambda deadline to finish the object being stored and answer.
const DEADLINE_MARGIN_SECS: i64 = 10;
/// How long one drain runs at most: the next minute's run takes over.
const DRAIN_BUDGET_SECS: i64 = 50;

/// What an invocation asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// EventBridge Scheduler's event, or `{"drain": {}}`.
    Drain,
    /// `{"drain": {"release_held": true}}`: a drain that also sends every crossing a quiet time
    /// holds (docs/notifications.md).
    DrainReleasing,
    /// `{"restore": {"board": <name, or absent for all>, "campaign"?: <the last answer's>}}`.
    Restore(RestoreRequest),
    /// `{"verify": {"board": <name, or absent for all>}}` (also on a daily schedule).
    Verify(VerifyRequest),
    /// `{"dry_run": {"board", "period", "period_id", "config"}}`.
    DryRun(DryRunRequest),
    /// `{"reshard": {"board": <name>}}` (docs/scaling.md#changing-shards).
    Reshard(ReshardRequest),
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReshardRequest {
    pub board: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    #[serde(default)]
    pub board: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    #[serde(default)]
    pub board: Option<String>,
    /// Accepted from runbooks of earlier releases and ignored: a restore never writes a key
    /// that was not lost, so there is nothing to overwrite.
    #[serde(default)]
    pub overwrite: bool,
    /// The `campaign` the last invocation answered: go on with that restore (docs/journal.md#restore).
    #[serde(default)]
    pub campaign: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{0}")]
    BadRequest(String),
    #[error("the journal of {0} board(s) could not be drained; their entries stay in Redis for the next run")]
    Incomplete(usize),
    #[error(transparent)]
    Restore(#[from] RestoreError),
}

impl JournalError {
    pub fn code(&self) -> &'static str {
        match self {
            JournalError::BadRequest(_) => "bad_request",
            JournalError::Incomplete(_) => "drain_incomplete",
            JournalError::Restore(error) => error.code(),
        }
    }
}

/// A request by hand: exactly one of its fields.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum Manual {
    Drain(DrainFields),
    Restore(RestoreRequest),
    Verify(VerifyRequest),
    DryRun(DryRunRequest),
    Reshard(ReshardRequest),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DrainFields {
    #[serde(default)]
    release_held: bool,
}

impl TryFrom<Value> for Request {
    type Error = JournalError;

    fn try_from(payload: Value) -> Result<Self, JournalError> {
        if payload.get("detail-type").is_some() {
            return Ok(Request::Drain);
        }
        match serde_json::from_value::<Manual>(payload) {
            Ok(Manual::Drain(DrainFields { release_held: false })) => Ok(Request::Drain),
            Ok(Manual::Drain(DrainFields { release_held: true })) => Ok(Request::DrainReleasing),
            Ok(Manual::Restore(request)) => Ok(Request::Restore(request)),
            Ok(Manual::Verify(request)) => Ok(Request::Verify(request)),
            Ok(Manual::DryRun(request)) => Ok(Request::DryRun(request)),
            Ok(Manual::Reshard(request)) => Ok(Request::Reshard(request)),
            Err(e) => Err(JournalError::BadRequest(format!(
                "expected a scheduled event, or one of drain, restore, verify, dry_run, reshard: {e}"
            ))),
        }
    }
}

/// What the function does, over one bucket of objects.
pub struct Jobs<O> {
    pub drainer: Drainer<O>,
    pub restorer: Restorer<O>,
    pub checker: Checker<O>,
    pub resharder: Resharder<O>,
}

impl<O: Objects + Clone> Jobs<O> {
    /// `clock` decides which periods are current (verify's open periods).
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, objects: O, metrics: Metrics, clock: Clock) -> Self {
        Self {
            restorer: Restorer::new(config.clone(), keys.clone(), store.clone(), objects.clone()),
            resharder: Resharder::new(config.clone(), keys.clone(), store.clone(), objects.clone()),
            checker: Checker::new(config.clone(), keys.clone(), store.clone(), objects.clone(), metrics.clone(), clock),
            drainer: Drainer::new(config, keys, store, objects, metrics),
        }
    }

    /// Serves one invocation's payload, stopping before `deadline`: the report of a drain, a
    /// restore (`{"status": "complete" | "in_progress", "boards": […]}`), a verify or a dry-run.
    pub async fn run(&self, payload: Value, deadline: DateTime<Utc>) -> Result<Value, JournalError> {
        let answer = match Request::try_from(payload)? {
            request @ (Request::Drain | Request::DrainReleasing) => {
                let deadline = deadline.min(Utc::now() + chrono::Duration::seconds(DRAIN_BUDGET_SECS));
                let report = self.drainer.drain_releasing(deadline, request == Request::DrainReleasing).await;
                tracing::info!(entries = report.entries, lag_seconds = report.lag_seconds, "journal drained");
                match report.boards.iter().filter(|b| b.error.is_some()).count() {
                    0 => serde_json::to_value(report),
                    failed => return Err(JournalError::Incomplete(failed)),
                }
            }
            Request::Restore(request) => {
                // Boxed, as are the others below: a replay's future nests every service's.
                let report = Box::pin(self.restorer.resume(request.board.as_deref(), request.campaign.as_deref(), deadline)).await?;
                tracing::info!(status = ?report.status, "journal restore");
                serde_json::to_value(report)
            }
            Request::Verify(request) => {
                let report = Box::pin(self.checker.verify(request.board.as_deref(), deadline)).await?;
                if report.mismatches > 0 {
                    tracing::warn!(mismatches = report.mismatches, "boards differ from their journal");
                }
                serde_json::to_value(report)
            }
            Request::DryRun(request) => serde_json::to_value(Box::pin(self.checker.dry_run(&request, deadline)).await?),
            Request::Reshard(request) => {
                let report = Box::pin(self.resharder.reshard(&request.board, deadline)).await?;
                tracing::info!(board = %report.board, from = report.from, to = report.to, status = ?report.status, moved = report.moved, "reshard");
                serde_json::to_value(report)
            }
        };
        Ok(answer.expect("a report always serializes"))
    }
}

/// Everything an invocation needs, built once per container.
pub struct App {
    /// The jobs for the boards as of each invocation (declared and runtime, read on every run).
    pub jobs: Catalog<Jobs<S3Objects>>,
    pub store: Store,
}

impl App {
    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let bucket = standings::journal_bucket_from_env()
            .ok_or_else(|| format!("{} is not set: the journal has nowhere to go", standings::JOURNAL_BUCKET_ENV))?;
        let config = Arc::new(Config::from_env()?);
        let keys = standings::keys_from_env()?;
        let store = Store::from_env().await?;
        let objects = S3Objects::new(s3_client().await, bucket);
        let notifier = match standings::event_bus_from_env() {
            Some(bus) => Some(Notifier::new(EventBridgeBus::new(eventbridge_client().await, bus))),
            None => None,
        };
        let (built_keys, built_store, metrics) = (keys.clone(), store.clone(), Metrics::stdout(FUNCTION));
        let build = move |config| {
            let mut jobs =
                Jobs::new(config, built_keys.clone(), built_store.clone(), objects.clone(), metrics.clone(), standings::system_clock());
            if let Some(notifier) = &notifier {
                jobs.drainer = jobs.drainer.with_notifier(notifier.clone());
            }
            jobs
        };
        let jobs = Catalog::new(config, keys, store.clone(), build).with_refresh(std::time::Duration::ZERO);
        Ok(Self { jobs, store })
    }

    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, Diagnostic> {
        let deadline = deadline_of(event.context.deadline, Utc::now());
        let jobs = self.jobs.current().await.map_err(|error| diagnostic(JournalError::from(RestoreError::from(error))))?;
        jobs.run(event.payload, deadline).await.map_err(diagnostic)
    }
}

pub fn diagnostic(error: JournalError) -> Diagnostic {
    tracing::error!(code = error.code(), error = %error, "journal invocation failed");
    Diagnostic { error_type: error.code().to_owned(), error_message: error.to_string() }
}

/// The function's timeout (infra/template.yaml `JournalFunction`): an invocation's deadline
/// when the runtime sends none (the local run).
pub const TIMEOUT: chrono::Duration = chrono::Duration::seconds(900);

/// The runtime's deadline (or the template's timeout without one) less a margin.
pub fn deadline_of(deadline_ms: u64, now: DateTime<Utc>) -> DateTime<Utc> {
    invocation_deadline(deadline_ms, now, TIMEOUT) - chrono::Duration::seconds(DEADLINE_MARGIN_SECS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scheduled_event_or_a_drain_request_drains_and_anything_else_says_what_is_expected() {
        let scheduled: Value = serde_json::from_str(include_str!("../fixtures/scheduled-event.json")).unwrap();
        assert_eq!(Request::try_from(scheduled).unwrap(), Request::Drain);
        assert_eq!(Request::try_from(serde_json::json!({"drain": {}})).unwrap(), Request::Drain);
        assert_eq!(Request::try_from(serde_json::json!({"drain": {"release_held": true}})).unwrap(), Request::DrainReleasing);
        let restore = Request::try_from(serde_json::json!({"restore": {"board": "points"}})).unwrap();
        assert_eq!(restore, Request::Restore(RestoreRequest { board: Some("points".into()), ..RestoreRequest::default() }));
        assert_eq!(Request::try_from(serde_json::json!({"restore": {}})).unwrap(), Request::Restore(RestoreRequest::default()));
        assert!(Request::try_from(serde_json::json!({"restore": {"boards": []}})).is_err());
        let other = Request::try_from(serde_json::json!({"flush": {}})).unwrap_err();
        assert_eq!(other.code(), "bad_request");
        assert!(other.to_string().contains("expected a scheduled event"), "{other}");
    }

    #[test]
    fn the_deadline_keeps_a_margin() {
        let now: DateTime<Utc> = "2026-11-01T01:00:00Z".parse().unwrap();
        let deadline = now + chrono::Duration::seconds(60);
        assert_eq!(deadline_of(deadline.timestamp_millis() as u64, now), deadline - chrono::Duration::seconds(10));
        // The local run's: the template's 15 minutes, as Lambda gives it.
        assert_eq!(deadline_of(600_000, now), now + chrono::Duration::seconds(890));
    }
}
