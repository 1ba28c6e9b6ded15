//! The `ingest` function: the write side of the HTTP API (docs/api.md).

mod admin;
mod hot;
pub mod observe;
mod scores;
mod sign_ins;
mod tournaments;

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::Method;
use axum::middleware::from_fn_with_state;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use standings::Clock;
use standings::domain::config::Config;
use standings::domain::ids;
use standings::domain::scoring::Event;
use standings::http::routing::Routes;
use standings::http::{ApiError, AuthMode, ErrorDetail, JsonBody, require_admin, require_write};
use standings::redis::keys::Keys;
use standings::redis::store::Store;
use standings::runtime::metrics::{Metrics, Unit};
use standings::services::catalog::Catalog;
use standings::services::hot::HotBoards;
use standings::services::ingestion::{EventReceipt, Ingestor, MAX_BATCH};
use standings::services::moderation::Moderation;
use standings::services::profiles::{self, Profile};
use standings::services::runtime_boards::{self, RuntimeBoards};
use standings::services::scores::Scores;
use standings::services::sign_ins::SignIns;
use standings::services::tournaments::{TournamentAdmin, Tournaments};

use crate::observe::Tally;

/// What a request needs from the boards as of now (`Catalog`): built once per catalog version.
pub struct Services {
    pub ingestor: Ingestor,
    pub scores: Scores,
    pub hot: HotBoards,
    pub sign_ins: SignIns,
    pub moderation: Moderation,
    pub tournaments: Tournaments,
}

impl Services {
    fn new(config: Arc<Config>, keys: &Keys, store: &Store) -> Self {
        Self {
            ingestor: Ingestor::new(config.clone(), keys.clone(), store.clone()),
            scores: Scores::new(config.clone(), keys.clone(), store.clone()),
            hot: HotBoards::new(config.clone(), keys.clone(), store.clone()),
            sign_ins: SignIns::new(config.clone(), keys.clone(), store.clone()),
            moderation: Moderation::new(config.clone(), keys.clone(), store.clone()),
            tournaments: Tournaments::new(config, keys.clone(), store.clone()),
        }
    }
}

/// Everything a request needs, built once per container.
pub struct App {
    pub catalog: Catalog<Services>,
    pub boards: RuntimeBoards,
    pub tournaments: TournamentAdmin,
    pub store: Store,
    pub keys: Keys,
    pub clock: Clock,
    pub auth: AuthMode,
    pub metrics: Metrics,
}

impl App {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, clock: Clock, auth: AuthMode, metrics: Metrics) -> Self {
        let (built_keys, built_store) = (keys.clone(), store.clone());
        Self {
            catalog: Catalog::new(config.clone(), keys.clone(), store.clone(), move |config| {
                Services::new(config, &built_keys, &built_store)
            }),
            boards: RuntimeBoards::new(config.clone(), keys.clone(), store.clone(), runtime_boards::limit_from_env()),
            tournaments: TournamentAdmin::new(config, keys.clone(), store.clone(), runtime_boards::limit_from_env()),
            store,
            keys,
            clock,
            auth,
            metrics,
        }
    }

    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Arc::new(Config::from_env()?);
        let keys = standings::keys_from_env()?;
        let store = Store::from_env().await?;
        standings::services::journal::births::at_start_from_env(&config, &keys, &store).await;
        Ok(Self::new(config, keys, store, standings::system_clock(), AuthMode::from_env()?, Metrics::stdout("ingest")))
    }

    /// The services for the boards as of now (declared and runtime, docs/runtime-boards.md).
    pub async fn services(&self) -> Result<Arc<Services>, ApiError> {
        Ok(self.catalog.current().await?)
    }

    /// The services as of now, with `board` when it is a deleted one (`Catalog::naming`): its
    /// writes refused as ended, as a function serving it answers.
    pub async fn services_naming(&self, board: &str) -> Result<Arc<Services>, ApiError> {
        Ok(self.catalog.naming(board).await?)
    }

    /// A ban (or unban) of `user_id` recorded for the deployment first, then the services of
    /// every board as of a catalog read after that: a board defined meanwhile either carries
    /// the record or is in this catalog (docs/moderation.md).
    async fn recorded(&self, user_id: &str, banned: bool) -> Result<Arc<Services>, ApiError> {
        self.services().await?.moderation.record(user_id, banned, (self.clock)()).await?;
        self.catalog.invalidate();
        self.services().await
    }

    /// After `board` was defined (or defined again: a retry finishes what a first call left):
    /// the catalog read again, and the bans made before it carried onto it (docs/moderation.md).
    async fn defined(&self, board: &str) -> Result<(), ApiError> {
        self.catalog.invalidate();
        self.services().await?.moderation.carry_bans(board, (self.clock)()).await?;
        Ok(())
    }

    /// Times the store work of one request for the `RedisLatency` metric.
    async fn timed<T>(&self, route: &str, work: impl std::future::Future<Output = T>) -> T {
        let started = std::time::Instant::now();
        let result = work.await;
        let millis = started.elapsed().as_secs_f64() * 1000.0;
        self.metrics.put("RedisLatency", Unit::Milliseconds, millis, &[("Route", route)]);
        result
    }
}

/// Every route of this function: the router is built from these lists, and the OpenAPI test
/// compares them with the document.
pub fn routes() -> Routes<Arc<App>> {
    write_routes().merge(admin_routes())
}

/// Routes that need the `standings/admin` scope.
fn admin_routes() -> Routes<Arc<App>> {
    admin::routes().merge(tournaments::admin_routes())
}

/// Routes that need the `standings/write` scope.
fn write_routes() -> Routes<Arc<App>> {
    Routes::new()
        .route(Method::POST, "/v1/events", post_event)
        .route(Method::POST, "/v1/events:batch", post_batch)
        .route(Method::POST, "/v1/boards/{board}/scores", scores::post_score)
        .route(Method::POST, "/v1/boards/{board}/scores:batch", scores::post_score_batch)
        .route(Method::PUT, "/v1/users/{user_id}/profile", put_profile)
        .route(Method::POST, "/v1/hot/{board}/items/{item_id}", hot::post_heat)
        .route(Method::POST, "/v1/sign-ins", sign_ins::post_sign_in)
        .merge(tournaments::write_routes())
}

pub fn router(app: Arc<App>) -> Router {
    let admin = admin_routes().into_router().route_layer(from_fn_with_state(app.auth, require_admin));
    let routes = write_routes().into_router().route_layer(from_fn_with_state(app.auth, require_write)).merge(admin);
    standings::http::finish(routes).with_state(app)
}

async fn post_event(State(app): State<Arc<App>>, JsonBody(event): JsonBody<Event>) -> Result<Json<EventReceipt>, ApiError> {
    tracing::Span::current().record("event_id", &*ids::loggable(&event.event_id));
    let result = app.timed("/v1/events", app.services().await?.ingestor.record(&event, (app.clock)())).await;
    let mut tally = Tally::default();
    tally.record(&event.event_id, &result);
    tally.flush(&app.metrics);
    Ok(Json(result?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Batch {
    events: Vec<Event>,
}

/// The answer to a batch (of events or of scores): one item per write, in request order.
#[derive(Serialize)]
pub struct BatchReceipt<R> {
    results: Vec<BatchItem<R>>,
}

/// One write's answer in a batch: its receipt, or its own error with the status (and
/// `retry_after` seconds, for 429 and 503) a single write would have had.
#[derive(Serialize)]
#[serde(untagged)]
enum BatchItem<R> {
    Done(R),
    Failed {
        event_id: String,
        status: u16,
        error: ErrorDetail,
        #[serde(skip_serializing_if = "Option::is_none")]
        retry_after: Option<u64>,
    },
}

impl<R> BatchReceipt<R> {
    /// The receipt of writes identified by `event_ids`, from their outcomes in the same order.
    pub fn of<'a, E: Into<ApiError>>(event_ids: impl Iterator<Item = &'a str>, outcomes: Vec<Result<R, E>>) -> Self {
        let results = event_ids
            .zip(outcomes)
            .map(|(event_id, outcome)| match outcome {
                Ok(receipt) => BatchItem::Done(receipt),
                Err(error) => {
                    let error: ApiError = error.into();
                    let (status, retry_after) = (error.status.as_u16(), error.retry_after);
                    BatchItem::Failed { event_id: event_id.to_owned(), status, retry_after, error: error.detail() }
                }
            })
            .collect();
        Self { results }
    }
}

async fn post_batch(State(app): State<Arc<App>>, JsonBody(batch): JsonBody<Batch>) -> Result<Json<BatchReceipt<EventReceipt>>, ApiError> {
    if batch.events.len() > MAX_BATCH {
        return Err(ApiError::too_large(format!("a batch holds at most {MAX_BATCH} events")));
    }
    let outcomes = app.timed("/v1/events:batch", app.services().await?.ingestor.record_batch(&batch.events, (app.clock)())).await?;
    let mut tally = Tally::default();
    for (event, outcome) in batch.events.iter().zip(&outcomes) {
        tally.record(&event.event_id, outcome);
    }
    tally.flush(&app.metrics);
    Ok(Json(BatchReceipt::of(batch.events.iter().map(|e| e.event_id.as_str()), outcomes)))
}

async fn put_profile(
    State(app): State<Arc<App>>,
    Path(user_id): Path<String>,
    JsonBody(profile): JsonBody<Profile>,
) -> Result<Json<Profile>, ApiError> {
    ids::validate_id("user_id", &user_id)?;
    profile.validate()?;
    profiles::put_profile(&app.store, &app.keys, &user_id, &profile, (app.clock)()).await?;
    Ok(Json(profile))
}
