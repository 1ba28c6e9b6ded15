//! The `ingest` function: the write side of the HTTP API (SPEC §4).

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::middleware::from_fn_with_state;
use axum::http::Method;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use standings::config::Config;
use standings::http::{method_not_allowed, require_write, unknown_route, ApiError, AuthMode, ErrorDetail, JsonBody, MAX_BODY_BYTES};
use standings::ids;
use standings::ingestion::{EventReceipt, Ingestor, MAX_BATCH};
use standings::keys::Keys;
use standings::profiles::{self, Profile};
use standings::routing::Routes;
use standings::scoring::Event;
use standings::store::Store;
use standings::Clock;

/// Everything a request needs, built once per container.
pub struct App {
    pub ingestor: Ingestor,
    pub store: Store,
    pub keys: Keys,
    pub clock: Clock,
    pub auth: AuthMode,
}

impl App {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, clock: Clock, auth: AuthMode) -> Self {
        Self { ingestor: Ingestor::new(config, keys.clone(), store.clone()), store, keys, clock, auth }
    }

    pub fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Arc::new(Config::from_env()?);
        let keys = Keys::new(&standings::key_prefix_from_env())?;
        let store = Store::from_env()?;
        Ok(Self::new(config, keys, store, standings::system_clock(), AuthMode::from_env()?))
    }
}

/// Every route of this function: the router is built from this list, and the OpenAPI test
/// compares it with the document.
pub fn routes() -> Routes<Arc<App>> {
    Routes::new()
        .route(Method::POST, "/v1/events", post_event)
        .route(Method::POST, "/v1/events:batch", post_batch)
        .route(Method::PUT, "/v1/users/{user_id}/profile", put_profile)
}

pub fn router(app: Arc<App>) -> Router {
    routes()
        .into_router()
        .route_layer(from_fn_with_state(app.auth, require_write))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(app)
}

async fn post_event(State(app): State<Arc<App>>, JsonBody(event): JsonBody<Event>) -> Result<Json<EventReceipt>, ApiError> {
    let receipt = app.ingestor.record(&event, (app.clock)()).await?;
    tracing::info!(event_id = %receipt.event_id, duplicate = receipt.duplicate, "event recorded");
    Ok(Json(receipt))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Batch {
    events: Vec<Event>,
}

#[derive(Serialize)]
struct BatchReceipt {
    results: Vec<BatchItem>,
}

/// One event's answer in a batch: its receipt, or its own error with the status a single
/// `POST /v1/events` would have had.
#[derive(Serialize)]
#[serde(untagged)]
enum BatchItem {
    Recorded(EventReceipt),
    Failed { event_id: String, status: u16, error: ErrorDetail },
}

async fn post_batch(
    State(app): State<Arc<App>>,
    JsonBody(batch): JsonBody<Batch>,
) -> Result<Json<BatchReceipt>, ApiError> {
    if batch.events.len() > MAX_BATCH {
        return Err(ApiError::too_large(format!("a batch holds at most {MAX_BATCH} events")));
    }
    let outcomes = app.ingestor.record_batch(&batch.events, (app.clock)()).await?;
    let results: Vec<_> = batch
        .events
        .iter()
        .zip(outcomes)
        .map(|(event, outcome)| match outcome {
            Ok(receipt) => BatchItem::Recorded(receipt),
            Err(error) => {
                let error = ApiError::from(error);
                BatchItem::Failed { event_id: event.event_id.clone(), status: error.status.as_u16(), error: error.detail() }
            }
        })
        .collect();
    Ok(Json(BatchReceipt { results }))
}

async fn put_profile(
    State(app): State<Arc<App>>,
    Path(user_id): Path<String>,
    JsonBody(profile): JsonBody<Profile>,
) -> Result<Json<Profile>, ApiError> {
    ids::validate_id("user_id", &user_id).map_err(|e| ApiError::new(axum::http::StatusCode::BAD_REQUEST, "invalid_id", e.to_string()))?;
    profile.validate()?;
    profiles::put_profile(&app.store, &app.keys, &user_id, &profile).await?;
    Ok(Json(profile))
}
