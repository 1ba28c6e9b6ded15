//! `POST /v1/boards/{board}/scores`: a submitted score for a score board.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use standings::domain::ids;
use standings::domain::scores::Submission;
use standings::http::{ApiError, JsonBody};
use standings::services::scores::ScoreReceipt;

use crate::App;

pub async fn post_score(
    State(app): State<Arc<App>>,
    Path(board): Path<String>,
    JsonBody(submission): JsonBody<Submission>,
) -> Result<Json<ScoreReceipt>, ApiError> {
    tracing::Span::current().record("event_id", &*ids::loggable(&submission.event_id));
    let receipt = app.timed("/v1/boards/{board}/scores", app.scores.submit(&board, &submission, (app.clock)())).await?;
    Ok(Json(receipt))
}
