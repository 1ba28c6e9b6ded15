//! The `query` function: the read side of the HTTP API (SPEC §4). Read routes are open.

mod hot;

use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use standings::config::Config;
use standings::http::{method_not_allowed, unknown_route};
use standings::keys::Keys;
use standings::store::Store;
use standings::Clock;

/// Everything a request needs, built once per container.
pub struct App {
    pub config: Arc<Config>,
    pub keys: Keys,
    pub store: Store,
    pub clock: Clock,
}

impl App {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, clock: Clock) -> Self {
        Self { config, keys, store, clock }
    }

    pub fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Arc::new(Config::from_env()?);
        let keys = Keys::new(&standings::key_prefix_from_env())?;
        Ok(Self::new(config, keys, Store::from_env()?, standings::system_clock()))
    }
}

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/hot/{board}", get(hot::get_hot))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app)
}
