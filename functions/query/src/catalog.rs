//! `GET /v1/boards?limit=&cursor=` (`standings::services::reads::catalog`), cached for ten
//! seconds.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use standings::http::{ApiError, QueryParams, page_params, with_cache};
use standings::services::reads::catalog::catalog;

use crate::App;

/// Other parameters are ignored, as they were before the list paged (a client's cache-buster).
#[derive(Deserialize)]
pub struct ListParams {
    limit: Option<u64>,
    cursor: Option<String>,
}

pub async fn list(State(app): State<Arc<App>>, QueryParams(params): QueryParams<ListParams>) -> Result<axum::response::Response, ApiError> {
    let (limit, cursor) = page_params(params.limit, params.cursor.as_deref())?;
    // Resets move the periods on, runtime boards come and go (docs/runtime-boards.md): ten
    // seconds of caching keeps both accurate enough.
    Ok(with_cache("public, max-age=10", Json(catalog(&*app.config().await?, cursor, limit, (app.clock)()))))
}
