//! `GET /v1/hot/{board}?limit=`: a decaying board's top items.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use serde::Deserialize;
use standings::http::{ApiError, QueryParams};

use crate::App;

/// The board changes once a minute; a short shared cache takes the read load off Redis
/// without serving a board much older than its schedule.
const CACHE_CONTROL: HeaderValue = HeaderValue::from_static("public, max-age=15");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HotParams {
    limit: Option<u32>,
}

pub async fn get_hot(
    State(app): State<Arc<App>>,
    Path(board): Path<String>,
    QueryParams(params): QueryParams<HotParams>,
) -> Result<impl IntoResponse, ApiError> {
    let top = app.services().await?.hot.top(&board, params.limit, (app.clock)()).await?;
    Ok(([(header::CACHE_CONTROL, CACHE_CONTROL)], Json(top)))
}
