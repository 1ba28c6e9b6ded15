//! The `void` function: `POST /v1/admin/boards/{board}/users/{user_id}/void` (scope
//! `standings/admin`, docs/journal.md#void) takes back the points a user's events earned in a
//! time range. A function of its own because it reads the journal in S3: `ingest`, on every
//! write's path, is built without the AWS SDK.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::Method;
use axum::middleware::from_fn_with_state;
use axum::{Json, Router};
use standings::Clock;
use standings::archive::s3::{S3Objects, s3_client};
use standings::domain::config::Config;
use standings::http::routing::Routes;
use standings::http::{ApiError, AuthMode, JsonBody, Subject, require_admin};
use standings::redis::keys::Keys;
use standings::redis::store::Store;
use standings::services::catalog::Catalog;
use standings::services::moderation::Moderation;
use standings::services::voids::{VoidReceipt, VoidRequest, Voids};

/// `STANDINGS_JOURNAL_RETENTION_DAYS`: how long the journal bucket keeps objects (the template's
/// `JournalRetentionDays`); a void reaching further back is refused.
pub const RETENTION_ENV: &str = "STANDINGS_JOURNAL_RETENTION_DAYS";
/// The template's default.
pub const DEFAULT_RETENTION_DAYS: i64 = 3650;

/// Everything a request needs, built once per container.
pub struct App {
    /// Voids for the boards as of now (declared and runtime, docs/runtime-boards.md).
    pub voids: Catalog<Voids<S3Objects>>,
    pub clock: Clock,
    pub auth: AuthMode,
}

impl App {
    pub fn new(
        config: Arc<Config>,
        keys: Keys,
        store: Store,
        objects: Option<S3Objects>,
        retention_days: i64,
        clock: Clock,
        auth: AuthMode,
    ) -> Self {
        let (built_keys, built_store) = (keys.clone(), store.clone());
        let build =
            move |config| Voids::new(Moderation::new(config, built_keys.clone(), built_store.clone()), objects.clone(), retention_days);
        Self { voids: Catalog::new(config, keys, store, build), clock, auth }
    }

    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Arc::new(Config::from_env()?);
        let keys = standings::keys_from_env()?;
        let objects = match standings::journal_bucket_from_env() {
            Some(bucket) => Some(S3Objects::new(s3_client().await, bucket)),
            None => {
                tracing::warn!("{} is not set: every void answers 409 journal_off", standings::JOURNAL_BUCKET_ENV);
                None
            }
        };
        let retention = match std::env::var(RETENTION_ENV) {
            Ok(days) => days.parse().map_err(|_| format!("{RETENTION_ENV} must be a whole number of days, not {days:?}"))?,
            Err(_) => DEFAULT_RETENTION_DAYS,
        };
        let store = Store::from_env().await?;
        if let Some(objects) = &objects {
            standings::services::journal::births::at_start(&config, &keys, &store, objects).await;
        }
        Ok(Self::new(config, keys, store, objects, retention, standings::system_clock(), AuthMode::from_env()?))
    }
}

/// Every route of this function (admin routes): the router is built from this list, and the
/// OpenAPI test compares it with the document.
pub fn routes() -> Routes<Arc<App>> {
    Routes::new().route(Method::POST, "/v1/admin/boards/{board}/users/{user_id}/void", void)
}

pub fn router(app: Arc<App>) -> Router {
    let routes = routes().into_router().route_layer(from_fn_with_state(app.auth, require_admin));
    standings::http::finish(routes).with_state(app)
}

async fn void(
    State(app): State<Arc<App>>,
    Path((board, user_id)): Path<(String, String)>,
    Subject(actor): Subject,
    JsonBody(request): JsonBody<VoidRequest>,
) -> Result<Json<VoidReceipt>, ApiError> {
    let receipt = app.voids.naming(&board).await?.void(&board, &user_id, &request, actor.as_deref(), (app.clock)()).await?;
    let removed: i64 = receipt.periods.iter().map(|period| period.delta).sum();
    tracing::warn!(board = %board, user_id = %user_id, void_id = %request.void_id, removed, actor = ?actor, "points voided");
    Ok(Json(receipt))
}
