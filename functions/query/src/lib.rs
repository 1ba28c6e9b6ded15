//! The `query` function: the read side of the HTTP API (SPEC §4). Read routes are open.

pub mod boards;
pub mod catalog;
pub mod health;
mod hot;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::middleware::from_fn;
use axum::routing::{get, post};
use axum::Router;
use standings::config::Config;
use standings::http::{method_not_allowed, request_span, unknown_route, MAX_BODY_BYTES};
use standings::keys::Keys;
use standings::reads::Reader;
use standings::store::Store;
use standings::Clock;

/// Everything a request needs, built once per container.
pub struct App {
    pub config: Arc<Config>,
    pub keys: Keys,
    pub store: Store,
    pub reader: Reader,
    pub clock: Clock,
}

impl App {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, clock: Clock) -> Self {
        Self { config, reader: Reader::new(keys.clone(), store.clone()), keys, store, clock }
    }

    pub fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Arc::new(Config::from_env()?);
        let keys = Keys::new(&standings::key_prefix_from_env())?;
        Ok(Self::new(config, keys, Store::from_env()?, standings::system_clock()))
    }
}

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/boards/{board}/top", get(boards::top))
        .route("/v1/boards/{board}/users/{user_id}", get(boards::user))
        .route("/v1/boards/{board}/ranks", post(boards::ranks))
        .route("/v1/boards", get(catalog::list))
        .route("/v1/hot/{board}", get(hot::get_hot))
        .route("/v1/health", get(health::check))
        .route_layer(from_fn(request_span))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(app)
}
