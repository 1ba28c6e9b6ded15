//! `GET /v1/boards` (`standings::services::reads::catalog`), cached for a minute.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use standings::http::with_cache;
use standings::services::reads::catalog::catalog;

use crate::App;

pub async fn list(State(app): State<Arc<App>>) -> axum::response::Response {
    // Resets move the periods on; a minute of caching keeps them accurate enough.
    with_cache("public, max-age=60", Json(catalog(&app.config, (app.clock)())))
}
