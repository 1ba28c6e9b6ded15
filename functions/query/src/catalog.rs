//! `GET /v1/boards` (`standings::services::reads::catalog`), cached for a minute.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use standings::http::{ApiError, with_cache};
use standings::services::reads::catalog::catalog;

use crate::App;

pub async fn list(State(app): State<Arc<App>>) -> Result<axum::response::Response, ApiError> {
    // Resets move the periods on, runtime boards come and go (docs/runtime-boards.md): ten
    // seconds of caching keeps both accurate enough.
    Ok(with_cache("public, max-age=10", Json(catalog(&*app.config().await?, (app.clock)()))))
}
