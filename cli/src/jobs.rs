//! The jobs run through the Lambda Invoke API (docs/operations.md#the-standings-command): each
//! is invoked again until its answer says it completed, with progress between invocations.
//! Every job resumes where the last invocation stopped, so a second run of a command stopped
//! by Ctrl-C (between invocations) goes on from there.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use aws_sdk_lambda::operation::invoke::{InvokeError, InvokeOutput};
use aws_sdk_lambda::primitives::Blob;
use serde_json::{Value, json};

use crate::Failure;
use crate::target::Target;

/// A job and its payload (the raw payloads stay documented for automation).
#[derive(Debug, Clone, PartialEq)]
pub enum Job {
    /// `campaign`: the one a restore stopped part-way answered, to go on with it.
    Restore {
        board: Option<String>,
        campaign: Option<String>,
    },
    Verify {
        board: Option<String>,
    },
    Reshard {
        board: String,
    },
    Drain {
        release_held: bool,
    },
    Archive {
        board: String,
        season: String,
        shard: Option<(u32, u32)>,
    },
    LeagueClose {
        board: String,
        period_id: String,
    },
    DryRun {
        board: String,
        period: String,
        period_id: String,
        config: String,
    },
}

/// The most invocations one command makes: a job that never completes is stopped, not looped.
const MAX_INVOCATIONS: usize = 500;

impl Job {
    pub fn name(&self) -> &'static str {
        match self {
            Job::Restore { .. } => "restore",
            Job::Verify { .. } => "verify",
            Job::Reshard { .. } => "reshard",
            Job::Drain { .. } => "drain",
            Job::Archive { .. } => "archive",
            Job::LeagueClose { .. } => "league close",
            Job::DryRun { .. } => "dry-run",
        }
    }

    pub fn payload(&self) -> Value {
        let board = |board: &Option<String>| board.as_ref().map_or_else(|| json!({}), |b| json!({"board": b}));
        match self {
            Job::Restore { board: b, campaign: None } => json!({"restore": board(b)}),
            Job::Restore { board: b, campaign: Some(campaign) } => {
                let mut restore = board(b);
                restore["campaign"] = json!(campaign);
                json!({"restore": restore})
            }
            Job::Verify { board: b } => json!({"verify": board(b)}),
            Job::Reshard { board } => json!({"reshard": {"board": board}}),
            Job::Drain { release_held: false } => json!({"drain": {}}),
            Job::Drain { release_held: true } => json!({"drain": {"release_held": true}}),
            Job::Archive { board, season, shard: None } => json!({"board": board, "season": season}),
            Job::Archive { board, season, shard: Some((index, total)) } => {
                json!({"board": board, "season": season, "shard_index": index, "shard_total": total})
            }
            Job::LeagueClose { board, period_id } => json!({"league": {"board": board, "period_id": period_id}}),
            Job::DryRun { board, period, period_id, config } => {
                json!({"dry_run": {"board": board, "period": period, "period_id": period_id, "config": config}})
            }
        }
    }

    /// The payload of the invocation after one that answered `answer`: a restore goes on with
    /// the campaign it answered (docs/journal.md#restore), not reading again what it completed.
    pub fn next_payload(&self, answer: &Value) -> Value {
        let mut payload = self.payload();
        if let (Job::Restore { .. }, Some(campaign)) = (self, answer["campaign"].as_str()) {
            payload["restore"]["campaign"] = json!(campaign);
        }
        payload
    }

    fn function<'a>(&self, target: &'a Target) -> &'a str {
        match self {
            Job::Archive { .. } | Job::LeagueClose { .. } => &target.archive_function,
            _ => &target.journal_function,
        }
    }

    /// Whether `answer` is a report of this job at all (an error body a function returned
    /// without failing is not: it would be invoked again for ever).
    fn answered(&self, answer: &Value) -> bool {
        match self {
            Job::Restore { .. } | Job::Reshard { .. } => answer["status"].is_string(),
            Job::Archive { .. } | Job::LeagueClose { .. } => answer[self.reports()].is_array(),
            Job::Verify { .. } | Job::Drain { .. } => answer["boards"].is_array(),
            Job::DryRun { .. } => answer.is_object(),
        }
    }

    /// The archive function's reports of this job: a season's (`results`) or a league
    /// period's (`leagues`).
    fn reports(&self) -> &'static str {
        if matches!(self, Job::LeagueClose { .. }) { "leagues" } else { "results" }
    }

    /// Whether `answer` is the last one: a restore or reshard `complete`, an archive (or league
    /// close) whose every season (period) report is past `in_progress`, a drain that ended
    /// before its deadline (`complete`, absent from a function older than it); a verify or
    /// dry-run in one call.
    pub fn completed(&self, answer: &Value) -> bool {
        match self {
            Job::Restore { .. } | Job::Reshard { .. } => answer["status"] == "complete",
            Job::Archive { .. } | Job::LeagueClose { .. } => {
                answer[self.reports()].as_array().is_some_and(|reports| reports.iter().all(|report| report["status"] != "in_progress"))
            }
            Job::Drain { .. } => answer["complete"] != false,
            Job::Verify { .. } | Job::DryRun { .. } => true,
        }
    }
}

/// How far a job has come, from its last answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    pub invocations: usize,
    pub boards_done: usize,
    pub boards: usize,
    /// Lines (restore) or entries (reshard, archive items) handled so far.
    pub units: u64,
    /// A restore's journal in bytes: read so far by this command, all of it, and what is left
    /// (the journal's lines are counted only as they are read).
    pub read_bytes: u64,
    pub journal_bytes: u64,
    pub left_bytes: u64,
}

impl Progress {
    /// `answer`: one invocation's report (its counters are its own).
    pub fn of(invocations: usize, answer: &Value) -> Self {
        let boards = answer["boards"].as_array().map_or(&[][..], Vec::as_slice);
        let sum = |field: &str| boards.iter().map(|board| board[field].as_u64().unwrap_or(0)).sum::<u64>();
        // A restore's boards by their status; a verify's or drain's (one call, no status) are
        // done once reported; a reshard is of one board; an archive's seasons and a league
        // close's periods count as boards.
        let reports: Vec<&Value> = ["results", "leagues"].iter().flat_map(|rows| answer[*rows].as_array().into_iter().flatten()).collect();
        let (done, count) = if answer["results"].is_array() || answer["leagues"].is_array() {
            (reports.iter().filter(|report| report["status"] != "in_progress").count(), reports.len())
        } else if answer["boards"].is_array() {
            (boards.iter().filter(|board| board["status"].is_null() || board["status"] == "complete").count(), boards.len())
        } else if answer["board"].is_string() {
            (usize::from(answer["status"] == "complete"), 1)
        } else {
            (0, 0)
        };
        let units = sum("replayed")
            + answer["moved"].as_u64().unwrap_or(0)
            + reports.iter().filter_map(|report| report["items_written"].as_u64().or(report["cohorts_closed"].as_u64())).sum::<u64>();
        Progress {
            invocations,
            boards_done: done,
            boards: count,
            units,
            read_bytes: sum("read_bytes"),
            journal_bytes: sum("journal_bytes"),
            left_bytes: sum("left_bytes"),
        }
    }

    /// Bytes of the journal behind the restore.
    pub fn passed(&self) -> u64 {
        self.journal_bytes.saturating_sub(self.left_bytes)
    }

    /// Seconds left at `bytes_per_sec` of the journal a second, once something was read.
    pub fn eta_secs(&self, bytes_per_sec: f64) -> Option<u64> {
        (self.journal_bytes > 0 && bytes_per_sec > 0.0).then(|| (self.left_bytes as f64 / bytes_per_sec).ceil() as u64)
    }
}

/// Per second since the command started: units, and bytes of the journal passed (what is
/// left shrinking, not every read: an invocation counts the object it resumes in again, not
/// the objects behind it that it reads again and skips).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    pub units: f64,
    pub bytes: f64,
}

/// Invokes `job` until it completes, calling `report` after each invocation with the progress
/// and the rates since the command started. `stop` (Ctrl-C) ends the loop
/// between invocations.
pub async fn run(target: &Target, job: &Job, stop: Arc<AtomicBool>, mut report: impl FnMut(Progress, Rates)) -> Result<Value, Failure> {
    let client = lambda_client(target).await;
    let function = job.function(target);
    let mut payload = serde_json::to_vec(&job.payload()).expect("a payload serializes");
    let started = Instant::now();
    let mut summary: Option<Value> = None;
    // Where the journal stood when the command started: the first report's place less what
    // its invocation read (a resumed restore starts part-way).
    let mut passed_before: Option<u64> = None;
    let mut last = Progress::default();
    for invocation in 1..=MAX_INVOCATIONS {
        if stop.load(Ordering::SeqCst) {
            return Err(Failure::Stopped { job: job.name(), summary });
        }
        let call = client.invoke().function_name(function).payload(Blob::new(payload.clone())).send();
        tokio::pin!(call);
        // One invocation may run for minutes: the progress so far again every few seconds.
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + TICK, TICK);
        let answer = loop {
            tokio::select! {
                answer = &mut call => break answer,
                _ = ticks.tick() => report(last, rates(last, started, passed_before)),
            }
        };
        let body = match report_of(job, function, answer) {
            Ok(body) => body,
            // What the invocations before it did is kept: the same command resumes from there.
            Err(failure) => return Err(failure.after(summary)),
        };
        let read_now = Progress::of(invocation, &body).read_bytes;
        payload = serde_json::to_vec(&job.next_payload(&body)).expect("a payload serializes");
        // The progress is the summary's: each board's counters summed over the invocations, as
        // its last report left it.
        summary = Some(match summary.take() {
            Some(before) => merged(before, body),
            None => body,
        });
        last = summary.as_ref().map(|answer| Progress::of(invocation, answer)).unwrap_or_default();
        passed_before.get_or_insert(last.passed().saturating_sub(read_now));
        report(last, rates(last, started, passed_before));
        if summary.as_ref().is_some_and(|answer| job.completed(answer)) {
            return Ok(summary.unwrap_or_default());
        }
    }
    let message = format!(
        "{} did not complete in {MAX_INVOCATIONS} invocations: run it again to go on (a restore: with --campaign, its summary's)",
        job.name()
    );
    Err(Failure::Incomplete { message, summary })
}

/// One invocation's report, or why it is none (the Invoke API failed, the function failed, or
/// it answered something that is not this job's report).
fn report_of(
    job: &Job,
    function: &str,
    answer: Result<InvokeOutput, aws_sdk_lambda::error::SdkError<InvokeError>>,
) -> Result<Value, Failure> {
    let answer = answer.map_err(|e| Failure::Transport(format!("Invoke {function}: {}", aws_sdk_lambda::error::DisplayErrorContext(e))))?;
    let body: Value = answer.payload().map(|blob| serde_json::from_slice(blob.as_ref()).unwrap_or(Value::Null)).unwrap_or(Value::Null);
    if let Some(kind) = answer.function_error() {
        return Err(Failure::Function {
            kind: body["errorType"].as_str().unwrap_or(kind).to_owned(),
            message: body["errorMessage"].as_str().unwrap_or("the function failed").to_owned(),
        });
    }
    if !job.answered(&body) {
        return Err(Failure::Function {
            kind: "unexpected_answer".into(),
            message: format!("{function} answered without a report: {}", shorten(&body.to_string())),
        });
    }
    Ok(body)
}

/// How often the progress is shown while an invocation runs.
const TICK: std::time::Duration = std::time::Duration::from_secs(5);

fn rates(progress: Progress, started: Instant, passed_before: Option<u64>) -> Rates {
    let seconds = started.elapsed().as_secs_f64().max(0.001);
    let passed = progress.passed().saturating_sub(passed_before.unwrap_or(progress.passed()));
    Rates { units: progress.units as f64 / seconds, bytes: passed as f64 / seconds }
}

/// The command's summary: `next` (the last invocation's report), with each board's counters
/// summed over every invocation (a report counts what its own invocation did) and the boards
/// only earlier invocations reported kept.
fn merged(before: Value, mut next: Value) -> Value {
    const COUNTERS: [&str; 13] = [
        "replayed",
        "applied",
        "duplicates",
        "refused",
        "read_bytes",
        "moved",
        "items_written",
        "batch_calls",
        "entries",
        "objects",
        "notifications",
        "cohorts_closed",
        "players_placed_after",
    ];
    let add = |from: &Value, into: &mut Value| {
        for counter in COUNTERS {
            if let (Some(a), Some(b)) = (from[counter].as_u64(), into[counter].as_u64()) {
                into[counter] = (a + b).into();
            }
        }
    };
    add(&before, &mut next);
    // A restore's boards by name; an archive's seasons by board and season; a league's periods
    // by board and period.
    for rows in ["boards", "results", "leagues"] {
        let (Some(earlier), Some(later)) = (before[rows].as_array(), next[rows].as_array_mut()) else { continue };
        for old in earlier {
            let same =
                |row: &&mut Value| row["board"] == old["board"] && row["season"] == old["season"] && row["period_id"] == old["period_id"];
            match later.iter_mut().find(same) {
                // A board complete before is not restored again by a later invocation (a
                // restore of every board passes through it anew): its row stays as it was.
                Some(row) if old["status"] == "complete" => *row = old.clone(),
                Some(row) => add(old, row),
                None => later.push(old.clone()),
            }
        }
    }
    next
}

fn shorten(text: &str) -> String {
    text.chars().take(300).collect()
}

async fn lambda_client(target: &Target) -> aws_sdk_lambda::Client {
    // An invocation may run for the function's whole timeout (15 minutes): one attempt, waited for.
    let config = standings::runtime::aws::sdk_config(1, std::time::Duration::from_secs(16 * 60)).await;
    let mut builder = aws_sdk_lambda::config::Builder::from(&config);
    if let Some(endpoint) = &target.lambda_endpoint {
        builder = builder.endpoint_url(endpoint);
    }
    if target.local {
        // `cargo lambda watch` checks no signature: any credentials and region do.
        builder = builder
            .credentials_provider(aws_sdk_lambda::config::Credentials::new("local", "local", None, None, "standings-cli"))
            .region(aws_sdk_lambda::config::Region::new("us-east-1"));
    }
    aws_sdk_lambda::Client::from_conf(builder.build())
}

#[cfg(test)]
mod tests;
