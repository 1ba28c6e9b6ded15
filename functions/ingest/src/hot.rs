//! `POST /v1/hot/{board}/items/{item_id}`: heat for a decaying board.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use standings::http::{ApiError, JsonBody};
use standings::services::hot::{Heat, HeatReceipt};

use crate::App;

pub async fn post_heat(
    State(app): State<Arc<App>>,
    Path((board, item_id)): Path<(String, String)>,
    JsonBody(heat): JsonBody<Heat>,
) -> Result<Json<HeatReceipt>, ApiError> {
    let receipt = app.services().await?.hot.add_heat(&board, &item_id, &heat, (app.clock)()).await?;
    tracing::debug!(board = %receipt.board, item_id = %receipt.item_id, duplicate = receipt.duplicate, "heat recorded");
    Ok(Json(receipt))
}
