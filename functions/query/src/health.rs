//! `GET /v1/health`: a cheap probe of the store for load balancers and on-call engineers.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::Response;
use serde_json::json;
use standings::http::ApiError;

use crate::App;
use standings::http::with_cache;

/// Short enough that a health check fails fast when the store hangs.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Served from the container's `HealthCache`: calling it in a loop costs the store one probe
/// per few seconds.
pub async fn check(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    let store = app.health.get(&app.store, PROBE_TIMEOUT).await.ok_or_else(ApiError::store_unreachable)?;
    Ok(with_cache("no-store", Json(json!({"status": "ok", "store": store}))))
}
