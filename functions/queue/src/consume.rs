//! What each message of a batch comes to: applied (or a duplicate), worth retrying, or never
//! applicable. Events go through `Ingestor::record_batch_with` (one script call per board per
//! chunk), score submissions through `Scores::submit_batch` per board, sign-ins through
//! `SignIns::record_batch` (one script call per chunk). The HTTP status an error would get (standings::http,
//! the one mapping) decides: 429 and 503 pass with time, anything else never will.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use standings::domain::message::{Malformed, Message, write_time};
use standings::domain::period::EventWindow;
use standings::domain::scores::Submission;
use standings::domain::scoring::Event;
use standings::http::ApiError;
use standings::http::{ingest_status, score_status};
use standings::services::ingestion::{EventReceipt, IngestError, Ingestor};
use standings::services::scores::{ScoreError, ScoreReceipt, Scores};
use standings::services::sign_ins::SignIns;

/// Receives of a take-back that finds nothing to take back before it stops waiting for its
/// give and counts as nothing (the redrive policy's `maxReceiveCount` must be larger).
pub const TAKE_BACK_WAITS: u32 = 5;

/// One message of a batch.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub id: String,
    pub body: String,
    /// SQS's `ApproximateReceiveCount`: 1 on the first delivery.
    pub receive_count: u32,
    /// Its `MessageGroupId` on a FIFO queue (`None` on a standard one).
    pub group: Option<String>,
    /// When SQS took it (`SentTimestamp`): when a message that names no time of its own
    /// happened (`domain::message::write_time`).
    pub sent_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Applied now, or earlier (a duplicate), on every board that takes it.
    Done,
    /// Refused for a reason that can pass: handed back to SQS for redelivery.
    Retry { code: &'static str },
    /// Can never apply (on at least one of its boards): to the dead-letter queue with its
    /// reason. Boards that took it keep it; a redrive answers them as duplicates.
    Dead { code: String, message: String },
}

/// Board refusals a redelivery can get past.
const PASSING: [&str; 3] = ["rate_limited", "store_unavailable", "take_back_deferred"];

impl Verdict {
    fn of_error(error: ApiError) -> Self {
        let transient = matches!(error.status.as_u16(), 429 | 503);
        if transient || error.code == "take_back_deferred" {
            Verdict::Retry { code: error.code }
        } else {
            Verdict::Dead { code: error.code.to_owned(), message: error.message }
        }
    }

    /// An event some boards took: retried when any board refused it for a reason that passes
    /// (those boards apply it on redelivery, the others answer it as a duplicate);
    /// dead-lettered when a board refused it for good, so no board's share goes unseen.
    fn of_event(result: Result<EventReceipt, IngestError>) -> Self {
        match result {
            Ok(receipt) => {
                let refused: Vec<_> = receipt.results.iter().filter(|r| r.refused).collect();
                let reason = |r: &standings::services::ingestion::BoardResult| r.outcome.reason.clone().unwrap_or_default();
                if let Some(code) = refused.iter().find_map(|r| PASSING.iter().find(|&&c| c == reason(r))) {
                    return Verdict::Retry { code };
                }
                match refused.first() {
                    None => Verdict::Done,
                    Some(first) => {
                        let took: Vec<&str> = receipt.results.iter().filter(|r| !r.refused).map(|r| r.board.as_str()).collect();
                        let refusals: Vec<String> = refused.iter().map(|r| format!("{}: {}", r.board, reason(r))).collect();
                        let message = format!("refused on {}; applied on {}", refusals.join(", "), took.join(", "));
                        Verdict::Dead { code: reason(first), message }
                    }
                }
            }
            Err(error) => {
                let (status, code) = ingest_status(&error);
                Self::of_error(ApiError::new(status, code, error.to_string()))
            }
        }
    }

    fn of_score(result: Result<ScoreReceipt, ScoreError>) -> Self {
        match result {
            Ok(_) => Verdict::Done,
            Err(error) => {
                let (status, code) = score_status(&error);
                Self::of_error(ApiError::new(status, code, error.to_string()))
            }
        }
    }
}

/// Each delivery's message, parsed once for the batch.
pub fn parse(deliveries: &[Delivery]) -> Vec<Result<Message, Malformed>> {
    deliveries.iter().map(|delivery| Message::parse(&delivery.body)).collect()
}

/// The boards the batch's score messages name (their function must know them, deleted ones
/// included: `Catalog::naming_all`).
pub fn scored_boards(messages: &[Result<Message, Malformed>]) -> Vec<&str> {
    messages
        .iter()
        .filter_map(|message| match message {
            Ok(Message::Score { board, .. }) => Some(board.as_str()),
            _ => None,
        })
        .collect()
}

/// The verdict of every delivery, in order (`messages`: `parse` of them).
pub async fn consume(
    ingestor: &Ingestor,
    scores: &Scores,
    sign_ins: &SignIns,
    deliveries: &[Delivery],
    messages: Vec<Result<Message, Malformed>>,
    now: DateTime<Utc>,
) -> Vec<Verdict> {
    let mut verdicts: Vec<Option<Verdict>> = vec![None; deliveries.len()];
    let mut events: Vec<(usize, Event)> = Vec::new();
    let mut submissions: BTreeMap<String, Vec<(usize, Submission)>> = BTreeMap::new();
    let mut requests = Vec::new();
    // When each message's write happens: an untimed one when SQS took it.
    let mut times = vec![now; deliveries.len()];
    for (i, (delivery, message)) in deliveries.iter().zip(messages).enumerate() {
        if let Ok(message) = &message {
            times[i] = write_time(message.timed(), delivery.sent_at, now, &EventWindow::default());
        }
        match message {
            Ok(Message::Event(event)) => events.push((i, event)),
            Ok(Message::Score { board, submission }) => submissions.entry(board).or_default().push((i, submission)),
            Ok(Message::SignIn(request)) => requests.push((i, request)),
            Err(malformed) => verdicts[i] = Some(Verdict::Dead { code: "malformed".into(), message: malformed.to_string() }),
        }
    }
    apply_events(ingestor, deliveries, events, &mut verdicts, &times).await;
    for (board, items) in submissions {
        apply_scores(scores, &board, items, &mut verdicts, &times).await;
    }
    let (at, requests): (Vec<usize>, Vec<_>) = requests.into_iter().unzip();
    let request_times: Vec<DateTime<Utc>> = at.iter().map(|&i| times[i]).collect();
    for (i, answer) in at.into_iter().zip(sign_ins.record_batch_at(&requests, &request_times).await) {
        verdicts[i] = Some(match answer {
            Ok(_) => Verdict::Done,
            Err(error) => Verdict::of_error(error.into()),
        });
    }
    verdicts.into_iter().map(|v| v.expect("every delivery gets a verdict")).collect()
}

/// One batch call for every event. An invalid event refuses a batch as a whole and writes
/// nothing, so it is set aside (dead) and the rest sent again.
async fn apply_events(
    ingestor: &Ingestor,
    deliveries: &[Delivery],
    mut events: Vec<(usize, Event)>,
    verdicts: &mut [Option<Verdict>],
    times: &[DateTime<Utc>],
) {
    while !events.is_empty() {
        let batch: Vec<Event> = events.iter().map(|(_, event)| event.clone()).collect();
        let defer: Vec<bool> = events.iter().map(|&(i, _)| deliveries[i].receive_count < TAKE_BACK_WAITS).collect();
        let at: Vec<DateTime<Utc>> = events.iter().map(|&(i, _)| times[i]).collect();
        match ingestor.record_batch_with(&batch, &defer, &at).await {
            Ok(results) => {
                for ((i, _), result) in events.iter().zip(results) {
                    verdicts[*i] = Some(Verdict::of_event(result));
                }
                return;
            }
            Err(refusal) => {
                let (i, _) = events.remove(refusal.index);
                verdicts[i] = Some(Verdict::of_error(refusal.refusal.into()));
            }
        }
    }
}

/// One batch call per board, in the messages' order; an invalid submission is set aside as
/// for events, an unknown board refuses all of its messages.
async fn apply_scores(
    scores: &Scores,
    board: &str,
    mut items: Vec<(usize, Submission)>,
    verdicts: &mut [Option<Verdict>],
    times: &[DateTime<Utc>],
) {
    while !items.is_empty() {
        let batch: Vec<Submission> = items.iter().map(|(_, submission)| submission.clone()).collect();
        let at: Vec<DateTime<Utc>> = items.iter().map(|&(i, _)| times[i]).collect();
        match scores.submit_batch_at(board, &batch, &at).await {
            Ok(results) => {
                for ((i, _), result) in items.iter().zip(results) {
                    verdicts[*i] = Some(Verdict::of_score(result));
                }
                return;
            }
            Err(refusal) => {
                let dead = Verdict::of_error(refusal.error.into());
                match refusal.index {
                    Some(index) => verdicts[items.remove(index).0] = Some(dead),
                    None => {
                        for (i, _) in items.drain(..) {
                            verdicts[i] = Some(dead.clone());
                        }
                    }
                }
            }
        }
    }
}
