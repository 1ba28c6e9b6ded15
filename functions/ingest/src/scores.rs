//! `POST /v1/boards/{board}/scores` and `POST /v1/boards/{board}/scores:batch`: submitted
//! scores for a score board.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use standings::domain::ids;
use standings::domain::scores::Submission;
use standings::http::{ApiError, JsonBody};
use standings::services::ingestion::MAX_BATCH;
use standings::services::scores::ScoreReceipt;

use crate::observe::Tally;
use crate::{App, BatchReceipt};

pub async fn post_score(
    State(app): State<Arc<App>>,
    Path(board): Path<String>,
    JsonBody(submission): JsonBody<Submission>,
) -> Result<Json<ScoreReceipt>, ApiError> {
    tracing::Span::current().record("event_id", &*ids::loggable(&submission.event_id));
    let result =
        app.timed("/v1/boards/{board}/scores", app.services_naming(&board).await?.scores.submit(&board, &submission, (app.clock)())).await;
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

pub async fn post_score_batch(
    State(app): State<Arc<App>>,
    Path(board): Path<String>,
    JsonBody(batch): JsonBody<ScoreBatch>,
) -> Result<Json<BatchReceipt<ScoreReceipt>>, ApiError> {
    if batch.scores.len() > MAX_BATCH {
        return Err(ApiError::too_large(format!("a batch holds at most {MAX_BATCH} scores")));
    }
    let outcomes = app
        .timed(
            "/v1/boards/{board}/scores:batch",
            app.services_naming(&board).await?.scores.submit_batch(&board, &batch.scores, (app.clock)()),
        )
        .await?;
    let mut tally = Tally::of("ScoreSubmissions");
    for (submission, outcome) in batch.scores.iter().zip(&outcomes) {
        tally.record_score(&board, &submission.event_id, outcome);
    }
    tally.flush(&app.metrics);
    Ok(Json(BatchReceipt::of(batch.scores.iter().map(|s| s.event_id.as_str()), outcomes)))
}
