//! `POST /v1/sign-ins` (write scope).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use standings::domain::sign_in::SignInRequest;
use standings::http::{ApiError, JsonBody};
use standings::services::sign_ins::SignInReceipt;

use crate::App;

pub async fn post_sign_in(
    State(app): State<Arc<App>>,
    JsonBody(request): JsonBody<SignInRequest>,
) -> Result<Json<SignInReceipt>, ApiError> {
    tracing::Span::current().record("event_id", &*standings::domain::ids::loggable(&request.event_id));
    let receipt = app.timed("/v1/sign-ins", app.services().await?.sign_ins.record(&request, (app.clock)())).await?;
    tracing::info!(duplicate = receipt.duplicate, date = %receipt.date, points = receipt.outcome.points_awarded, "sign-in recorded");
    Ok(Json(receipt))
}
