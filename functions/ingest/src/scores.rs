//! `POST /v1/boards/{board}/scores` and `POST /v1/boards/{board}/scores:batch`: submitted
//! scores for a score board.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use standings::domain::ids;
use standings::domain::scores::Submission;
use standings::http::{ApiError, ErrorDetail, JsonBody};
use standings::services::ingestion::MAX_BATCH;
use standings::services::scores::ScoreReceipt;

use crate::App;
use crate::observe::Tally;

pub async fn post_score(
    State(app): State<Arc<App>>,
    Path(board): Path<String>,
    JsonBody(submission): JsonBody<Submission>,
) -> Result<Json<ScoreReceipt>, ApiError> {
    tracing::Span::current().record("event_id", &*ids::loggable(&submission.event_id));
    let result = app.timed("/v1/boards/{board}/scores", app.scores.submit(&board, &submission, (app.clock)())).await;
    let mut tally = Tally::of("ScoreSubmissions");
    tally.record_score(&board, &submission.event_id, &result);
    tally.flush(&app.metrics);
    Ok(Json(result?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoreBatch {
    scores: Vec<Submission>,
}

#[derive(Serialize)]
pub struct ScoreBatchReceipt {
    results: Vec<ScoreBatchItem>,
}

/// One submission's answer in a batch: its receipt, or its own error with the status (and
/// `retry_after` seconds, for 429 and 503) a single submission would have had.
#[derive(Serialize)]
#[serde(untagged)]
enum ScoreBatchItem {
    Submitted(ScoreReceipt),
    Failed {
        event_id: String,
        status: u16,
        error: ErrorDetail,
        #[serde(skip_serializing_if = "Option::is_none")]
        retry_after: Option<u64>,
    },
}

pub async fn post_score_batch(
    State(app): State<Arc<App>>,
    Path(board): Path<String>,
    JsonBody(batch): JsonBody<ScoreBatch>,
) -> Result<Json<ScoreBatchReceipt>, ApiError> {
    if batch.scores.len() > MAX_BATCH {
        return Err(ApiError::too_large(format!("a batch holds at most {MAX_BATCH} scores")));
    }
    let outcomes = app.timed("/v1/boards/{board}/scores:batch", app.scores.submit_batch(&board, &batch.scores, (app.clock)())).await?;
    let mut tally = Tally::of("ScoreSubmissions");
    for (submission, outcome) in batch.scores.iter().zip(&outcomes) {
        tally.record_score(&board, &submission.event_id, outcome);
    }
    tally.flush(&app.metrics);
    let results = batch
        .scores
        .iter()
        .zip(outcomes)
        .map(|(submission, outcome)| match outcome {
            Ok(receipt) => ScoreBatchItem::Submitted(receipt),
            Err(error) => {
                let error = ApiError::from(error);
                let (status, retry_after) = (error.status.as_u16(), error.retry_after);
                ScoreBatchItem::Failed { event_id: submission.event_id.clone(), status, retry_after, error: error.detail() }
            }
        })
        .collect();
    Ok(Json(ScoreBatchReceipt { results }))
}
