//! The `query` function: the read side of the HTTP API (docs/api.md). Read routes are open.

pub mod boards;
pub mod catalog;
pub mod health;
mod hot;
mod leagues;
mod sign_ins;
pub mod web;

use std::sync::Arc;

use axum::Router;
use axum::http::Method;
use standings::Clock;
use standings::domain::config::Config;
use standings::http::ApiError;
use standings::http::routing::Routes;
use standings::redis::keys::Keys;
use standings::redis::store::Store;
use standings::services::catalog::Catalog;
use standings::services::health::HealthCache;
use standings::services::hot::HotBoards;
use standings::services::leagues::Leagues;
use standings::services::reads::Reader;
use standings::services::sign_ins::SignIns;

/// What a request needs from the boards as of now (`Catalog`): built once per catalog version.
pub struct Services {
    pub config: Arc<Config>,
    pub hot: HotBoards,
    pub sign_ins: SignIns,
}

/// Everything a request needs, built once per container.
pub struct App {
    pub catalog: Catalog<Services>,
    pub keys: Keys,
    pub store: Store,
    pub reader: Reader,
    pub leagues: Leagues,
    pub clock: Clock,
    pub health: HealthCache,
}

impl App {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, clock: Clock) -> Self {
        let (built_keys, built_store) = (keys.clone(), store.clone());
        let build = move |config: Arc<Config>| Services {
            hot: HotBoards::new(config.clone(), built_keys.clone(), built_store.clone()),
            sign_ins: SignIns::new(config.clone(), built_keys.clone(), built_store.clone()),
            config,
        };
        Self {
            catalog: Catalog::new(config, keys.clone(), store.clone(), build),
            reader: Reader::new(keys.clone(), store.clone()).with_clock(clock.clone()),
            leagues: Leagues::new(keys.clone(), store.clone()),
            keys,
            store,
            clock,
            health: HealthCache::default(),
        }
    }

    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Arc::new(Config::from_env()?);
        let keys = standings::keys_from_env()?;
        let store = Store::from_env().await?;
        standings::services::journal::births::at_start_from_env(&config, &keys, &store).await;
        Ok(Self::new(config, keys, store, standings::system_clock()))
    }

    /// The services for the boards as of now (declared and runtime, docs/runtime-boards.md).
    pub async fn services(&self) -> Result<Arc<Services>, ApiError> {
        Ok(self.catalog.current().await?)
    }

    /// Every board as of now.
    pub async fn config(&self) -> Result<Arc<Config>, ApiError> {
        Ok(self.services().await?.config.clone())
    }

    /// Every board as of now, with `board` when it is a deleted one (`Catalog::naming`).
    pub async fn config_naming(&self, board: &str) -> Result<Arc<Config>, ApiError> {
        Ok(self.catalog.naming(board).await?.config.clone())
    }
}

/// Every route of this function: the router is built from this list, and the OpenAPI test
/// compares it with the document.
pub fn routes() -> Routes<Arc<App>> {
    Routes::new()
        .route(Method::GET, "/v1/boards/{board}/top", boards::top)
        .route(Method::GET, "/v1/boards/{board}/users/{user_id}", boards::user)
        .route(Method::GET, "/v1/boards/{board}/users/{user_id}/statement", boards::statement)
        .route(Method::POST, "/v1/boards/{board}/ranks", boards::ranks)
        .route(Method::GET, "/v1/boards/{board}/distribution", boards::distribution)
        .route(Method::GET, "/v1/boards/{board}/users/{user_id}/league", leagues::user)
        .route(Method::GET, "/v1/boards/{board}/users/{user_id}/league/history", leagues::history)
        .route(Method::GET, "/v1/boards/{board}/leagues", leagues::cohorts)
        .route(Method::GET, "/v1/boards", catalog::list)
        .route(Method::GET, "/v1/hot/{board}", hot::get_hot)
        .route(Method::GET, "/v1/users/{user_id}/sign-ins", sign_ins::get_sign_ins)
        .route(Method::GET, "/v1/health", health::check)
        .route(Method::GET, "/v1/openapi.json", web::openapi)
        .route(Method::GET, "/", web::page)
        .route(Method::GET, "/assets/{file}", web::asset)
}

pub fn router(app: Arc<App>) -> Router {
    standings::http::finish(routes().into_router()).with_state(app)
}
