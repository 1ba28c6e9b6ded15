//! What the on-call engineer sees for each event: one log line with its outcome (applied,
//! duplicate, refused with its code) and EMF counters per board and outcome.

use std::collections::BTreeMap;

use standings::http::ingest_status;
use standings::runtime::metrics::{Metrics, Unit};
use standings::services::ingestion::{EventReceipt, IngestError};

/// Counts outcomes over one request (a batch holds up to 500 events) so each distinct
/// (board, outcome, code) becomes one metric line, not one per event.
#[derive(Default)]
pub struct Tally {
    counts: BTreeMap<(String, &'static str, String), u32>,
}

impl Tally {
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
            metrics.put("Events", Unit::Count, f64::from(count), &dimensions);
        }
    }
}
