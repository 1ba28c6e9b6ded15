//! The `hotness` function (docs/hot-boards.md): an EventBridge schedule invokes it every minute, and it
//! decays every decaying board for the event's minute — synthesizing window boards from their
//! hourly buckets, scaling scale boards when their period starts. Duplicate or late deliveries
//! of a minute do nothing (see `synthesize_hot.lua`).

use std::sync::Arc;

use aws_lambda_events::eventbridge::EventBridgeEvent;
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use standings::Clock;
use standings::domain::config::Config;
use standings::domain::decay;
use standings::redis::keys::Keys;
use standings::redis::store::Store;
use standings::runtime::metrics::{Metrics, Unit};
use standings::services::hot::{DecayFailure, DecayRun, HotBoards};

/// The `Function` dimension of this function's metrics.
pub const FUNCTION: &str = "hotness";
/// Seconds from a run's scheduled minute to the end of the run, emitted for every board the run
/// brought up to date (dimension `Board`) and once per run without it; the stale-board alarm
/// watches the latter (infra/template.yaml `HotBoardStaleAlarm`): no run, no datapoint.
pub const SYNTHESIS_LAG: &str = "SynthesisLag";

/// How far a scheduled time may run ahead of this function's clock. A run keys the boards'
/// guard by its minute, so a run far in the future would block every real one until then.
const MAX_AHEAD: Duration = Duration::minutes(1);

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the scheduled time {0} is more than {MAX_AHEAD} ahead of the clock; refusing to run")]
    InFuture(DateTime<Utc>),
    #[error("{} board(s) failed: {}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Boards(Vec<DecayFailure>),
}

/// What one invocation did: the minute it ran for and every decaying board's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSummary {
    pub minute: DateTime<Utc>,
    pub boards: Vec<DecayRun>,
}

/// Everything an invocation needs, built once per container.
pub struct App {
    pub hot: HotBoards,
    pub store: Store,
    pub clock: Clock,
    pub metrics: Metrics,
}

impl App {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, clock: Clock, metrics: Metrics) -> Self {
        Self { hot: HotBoards::new(config, keys, store.clone()), store, clock, metrics }
    }

    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Arc::new(Config::from_env()?);
        let keys = standings::keys_from_env()?;
        Ok(Self::new(config, keys, Store::from_env().await?, standings::system_clock(), Metrics::stdout(FUNCTION)))
    }

    /// Runs the schedule's minute: the event's `time`, or the clock's when it has none (a
    /// manual invocation). Every board is attempted; if any fails, the invocation fails so
    /// Lambda retries it, and the retry skips the boards already done.
    pub async fn run(&self, event: EventBridgeEvent) -> Result<RunSummary, RunError> {
        let now = (self.clock)();
        let at = event.time.unwrap_or(now);
        if at > now + MAX_AHEAD {
            return Err(RunError::InFuture(at));
        }
        let minute = decay::minute_of(at);
        let mut boards = Vec::new();
        let mut failures = Vec::new();
        for outcome in self.hot.decay_all(minute).await {
            match outcome {
                Ok(run) => {
                    tracing::info!(board = %run.board, members = run.members, elapsed_ms = run.elapsed_ms, skipped = run.skipped, "decayed");
                    boards.push(run);
                }
                Err(failure) => {
                    tracing::error!(error = %failure, "decay failed");
                    failures.push(failure);
                }
            }
        }
        self.report_lag(minute, &boards);
        if failures.is_empty() { Ok(RunSummary { minute, boards }) } else { Err(RunError::Boards(failures)) }
    }

    /// `SynthesisLag` for the boards this run brought up to date (a failed board gets none).
    fn report_lag(&self, minute: DateTime<Utc>, boards: &[DecayRun]) {
        if boards.is_empty() {
            return;
        }
        let lag = ((self.clock)() - minute).num_milliseconds().max(0) as f64 / 1000.0;
        for run in boards {
            self.metrics.put(SYNTHESIS_LAG, Unit::Seconds, lag, &[("Board", &run.board)]);
        }
        self.metrics.put(SYNTHESIS_LAG, Unit::Seconds, lag, &[]);
    }
}
