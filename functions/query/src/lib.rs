//! The `query` function: the read side of the HTTP API (docs/api.md). Read routes are open.

pub mod boards;
pub mod catalog;
pub mod health;
mod hot;
mod seasons;
mod sign_ins;
pub mod web;

use std::sync::Arc;

use axum::Router;
use axum::http::Method;
use standings::Clock;
use standings::archive::table::SeasonTable;
use standings::domain::config::Config;
use standings::http::routing::Routes;
use standings::redis::keys::Keys;
use standings::redis::store::Store;
use standings::services::health::HealthCache;
use standings::services::hot::HotBoards;
use standings::services::reads::Reader;
use standings::services::sign_ins::SignIns;

/// Everything a request needs, built once per container.
pub struct App {
    pub config: Arc<Config>,
    pub keys: Keys,
    pub store: Store,
    pub reader: Reader,
    pub hot: HotBoards,
    pub sign_ins: SignIns,
    pub clock: Clock,
    /// Archived seasons (`STANDINGS_TABLE`); without it the season routes answer 404.
    pub archive: Option<SeasonTable>,
    pub health: HealthCache,
}

impl App {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, clock: Clock) -> Self {
        Self {
            reader: Reader::new(keys.clone(), store.clone()),
            hot: HotBoards::new(config.clone(), keys.clone(), store.clone()),
            sign_ins: SignIns::new(config.clone(), keys.clone(), store.clone()),
            config,
            keys,
            store,
            clock,
            archive: None,
            health: HealthCache::default(),
        }
    }

    pub fn with_archive(self, table: SeasonTable) -> Self {
        Self { archive: Some(table), ..self }
    }

    /// Adds the archived seasons' table named by `STANDINGS_TABLE`, when it is set.
    pub async fn with_archive_from_env(self) -> Self {
        match SeasonTable::from_env().await {
            Ok(table) => self.with_archive(table),
            Err(error) => {
                tracing::warn!(%error, "no season archive: the archived season routes answer 404");
                self
            }
        }
    }

    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Arc::new(Config::from_env()?);
        let keys = Keys::new(&standings::key_prefix_from_env())?;
        Ok(Self::new(config, keys, Store::from_env().await?, standings::system_clock()))
    }
}

/// Every route of this function: the router is built from this list, and the OpenAPI test
/// compares it with the document.
pub fn routes() -> Routes<Arc<App>> {
    Routes::new()
        .route(Method::GET, "/v1/boards/{board}/top", boards::top)
        .route(Method::GET, "/v1/boards/{board}/users/{user_id}", boards::user)
        .route(Method::POST, "/v1/boards/{board}/ranks", boards::ranks)
        .route(Method::GET, "/v1/boards", catalog::list)
        .route(Method::GET, "/v1/hot/{board}", hot::get_hot)
        .route(Method::GET, "/v1/boards/{board}/seasons/{season}/top", seasons::season_top)
        .route(Method::GET, "/v1/boards/{board}/seasons/{season}/users/{user_id}", seasons::season_user)
        .route(Method::GET, "/v1/users/{user_id}/seasons", seasons::user_seasons)
        .route(Method::GET, "/v1/users/{user_id}/sign-ins", sign_ins::get_sign_ins)
        .route(Method::GET, "/v1/health", health::check)
        .route(Method::GET, "/v1/openapi.json", web::openapi)
        .route(Method::GET, "/", web::page)
        .route(Method::GET, "/assets/{file}", web::asset)
}

pub fn router(app: Arc<App>) -> Router {
    standings::http::finish(routes().into_router()).with_state(app)
}
