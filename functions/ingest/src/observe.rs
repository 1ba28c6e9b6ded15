//! What the on-call engineer sees for each event and score submission: one log line with its
//! outcome (applied, duplicate, refused with its code) and EMF counters per board and outcome
//! (`Events`, `ScoreSubmissions`).

use std::collections::BTreeMap;

use standings::http::{ingest_status, score_status};
use standings::runtime::metrics::{Metrics, Unit};
use standings::services::ingestion::{EventReceipt, IngestError};
use standings::services::scores::{ScoreError, ScoreReceipt};

/// Counts outcomes over one request (a batch holds up to 500 writes) so each distinct
/// (board, outcome, code) becomes one metric line, not one per write.
pub struct Tally {
    metric: &'static str,
    counts: BTreeMap<(String, &'static str, String), u32>,
}

impl Default for Tally {
    fn default() -> Self {
        Self::of("Events")
    }
}

impl Tally {
    /// A tally flushed as the metric `metric`.
    pub fn of(metric: &'static str) -> Self {
        Self { metric, counts: BTreeMap::new() }
    }

    /// Logs a score submission's outcome and counts it (metric `ScoreSubmissions`).
    pub fn record_score(&mut self, board: &str, event_id: &str, result: &Result<ScoreReceipt, ScoreError>) {
        let event_id = &*standings::domain::ids::loggable(event_id);
        // Only a configured board's name becomes a dimension (low cardinality).
        let board = if matches!(result, Err(ScoreError::UnknownBoard(_))) { String::new() } else { board.to_owned() };
        let (outcome, code) = match result {
            Ok(receipt) if receipt.duplicate => ("duplicate", String::new()),
            Ok(receipt) if !receipt.outcome.applied => ("refused", receipt.outcome.reason.clone().unwrap_or_default()),
            Ok(_) => ("applied", String::new()),
            Err(error) => ("refused", score_status(error).1.to_owned()),
        };
        match result {
            Ok(_) => tracing::info!(target: "standings::scores", event_id, outcome, code, board, "score"),
            Err(error) => tracing::info!(target: "standings::scores", event_id, outcome, code, board, %error, "score"),
        }
        *self.counts.entry((board, outcome, code)).or_default() += 1;
    }

    /// Logs the event's outcome and counts it.
    pub fn record(&mut self, event_id: &str, result: &Result<EventReceipt, IngestError>) {
        let event_id = &*standings::domain::ids::loggable(event_id);
        match result {
            Ok(receipt) => {
                let outcome = if receipt.duplicate { "duplicate" } else { "applied" };
                let boards: Vec<&str> = receipt.results.iter().map(|r| r.board.as_str()).collect();
                let points: Vec<i64> = receipt.results.iter().map(|r| r.outcome.delta).collect();
                tracing::info!(target: "standings::events", event_id, outcome, ?boards, ?points, "event");
                for result in &receipt.results {
                    let (outcome, code) = match (&result.outcome.reason, result.refused) {
                        (Some(code), true) => ("refused", code.clone()),
                        _ => (outcome, String::new()),
                    };
                    *self.counts.entry((result.board.clone(), outcome, code)).or_default() += 1;
                }
            }
            Err(error) => {
                let (_, code) = ingest_status(error);
                tracing::info!(target: "standings::events", event_id, outcome = "refused", code, %error, "event");
                *self.counts.entry((String::new(), "refused", code.to_owned())).or_default() += 1;
            }
        }
    }

    pub fn flush(self, metrics: &Metrics) {
        for ((board, outcome, code), count) in self.counts {
            let mut dimensions = vec![("Outcome", outcome)];
            if !board.is_empty() {
                dimensions.push(("Board", board.as_str()));
            }
            if !code.is_empty() {
                dimensions.push(("Code", code.as_str()));
            }
            metrics.put(self.metric, Unit::Count, f64::from(count), &dimensions);
        }
    }
}
