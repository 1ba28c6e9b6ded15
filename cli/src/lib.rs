//! `standings`, the operators' command line (docs/operations.md#the-standings-command): the
//! jobs through the Lambda Invoke API, invoked until they complete; the admin routes and the
//! reads through the HTTP API. `main.rs` only parses, runs and prints.

mod api;
pub mod args;
pub mod jobs;
pub mod output;
mod routes;
pub mod target;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde_json::Value;

pub use args::Cli;
use args::Command;
use jobs::Job;
use target::Target;

/// Why a command did not complete; printed as the route's (or function's) code and message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Failure {
    #[error("{code} ({status}): {message}")]
    Api { status: u16, code: String, message: String },
    #[error("{kind}: {message}")]
    Function { kind: String, message: String },
    #[error("{0}")]
    Transport(String),
    #[error("{0}")]
    Usage(String),
    /// The invocations' limit reached; `summary` is what they did (the same command goes on).
    #[error("{message}")]
    Incomplete { message: String, summary: Option<Value> },
    /// Ctrl-C between invocations; `summary` is what the invocations before it did.
    #[error("{job} stopped between invocations: the same command again resumes it (a restore: with --campaign, its summary's)")]
    Stopped { job: &'static str, summary: Option<Value> },
    /// A call failed after earlier ones had done work (a job's invocation, a listing's page):
    /// `cause`, and what the calls before it did.
    #[error("{cause}")]
    PartWay { cause: Box<Failure>, summary: Value },
}

impl Failure {
    /// The process's exit status: 2 for usage, 130 for Ctrl-C, 1 for every other failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Stopped { .. } => 130,
            Failure::PartWay { cause, .. } => cause.exit_code(),
            _ => 1,
        }
    }

    /// What a job stopped part-way had done: its summary so far, printed beside the failure.
    pub fn summary(&self) -> Option<&Value> {
        match self {
            Failure::Incomplete { summary, .. } | Failure::Stopped { summary, .. } => summary.as_ref(),
            Failure::PartWay { summary, .. } => Some(summary),
            _ => None,
        }
    }

    /// `self`, with what the calls before it did when they did anything.
    pub fn after(self, summary: Option<Value>) -> Failure {
        match summary {
            Some(summary) => Failure::PartWay { cause: Box::new(self), summary },
            None => self,
        }
    }

    /// The failure as `--json` prints it: the routes' own shape, `{"error": {"code", "message"}}`
    /// (with the HTTP status of a route's refusal), the exit status, and a job stopped
    /// part-way's `summary` so far.
    pub fn json(&self) -> Value {
        let (code, message) = match self {
            Failure::PartWay { cause, summary } => {
                let mut json = cause.json();
                json["summary"] = summary.clone();
                return json;
            }
            Failure::Api { status, code, message } => {
                return serde_json::json!({"error": {"code": code, "status": status, "message": message}, "exit": self.exit_code()});
            }
            Failure::Function { kind, message } => (kind.as_str(), message.clone()),
            Failure::Transport(message) => ("unreachable", message.clone()),
            Failure::Usage(message) => ("usage", message.clone()),
            Failure::Incomplete { message, .. } => ("incomplete", message.clone()),
            Failure::Stopped { .. } => ("stopped", self.to_string()),
        };
        let mut json = serde_json::json!({"error": {"code": code, "message": message}, "exit": self.exit_code()});
        if let Some(summary) = self.summary() {
            json["summary"] = summary.clone();
        }
        json
    }
}

/// Runs `cli`'s command; its answer (a job's last report, a route's JSON). `stop` is set by
/// Ctrl-C: a job stops before its next invocation.
pub async fn run(cli: &Cli, stop: Arc<AtomicBool>) -> Result<Value, Failure> {
    let target = Target::resolve(&cli.target).await?;
    if let Some(job) = job_of(&cli.command)? {
        let mut reporter = output::Reporter::new(job.name());
        // On stderr: the JSON on stdout stays one document.
        let answer = jobs::run(&target, &job, stop, |progress, rate| reporter.report(progress, rate)).await;
        reporter.finish();
        return answer;
    }
    routes::run(&target, &cli.command).await
}

/// Whether `command` is a job (invoked until complete, stopped by Ctrl-C between invocations).
pub fn runs_a_job(command: &Command) -> bool {
    matches!(
        command,
        Command::Restore { .. }
            | Command::Verify { .. }
            | Command::Reshard { .. }
            | Command::Drain { .. }
            | Command::Archive { .. }
            | Command::League(_)
            | Command::DryRun { .. }
    )
}

fn job_of(command: &Command) -> Result<Option<Job>, Failure> {
    Ok(Some(match command {
        Command::Restore { board, campaign } => Job::Restore { board: board.clone(), campaign: campaign.clone() },
        Command::Verify { board } => Job::Verify { board: board.clone() },
        Command::Reshard { board } => Job::Reshard { board: board.clone() },
        Command::Drain { release_held } => Job::Drain { release_held: *release_held },
        Command::Archive { board, season, shard_index, shard_total } => {
            Job::Archive { board: board.clone(), season: season.clone(), shard: shard_index.zip(*shard_total) }
        }
        Command::League(args::League::Close { board, period_id }) => {
            Job::LeagueClose { board: board.clone(), period_id: period_id.clone() }
        }
        Command::DryRun { config, board, period, period_id } => Job::DryRun {
            board: board.clone(),
            period: period.clone(),
            period_id: period_id.clone(),
            config: std::fs::read_to_string(config).map_err(|e| Failure::Usage(format!("{}: {e}", config.display())))?,
        },
        _ => return Ok(None),
    }))
}
