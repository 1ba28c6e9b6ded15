//! The `seasons` function: archived seasons, read from the DynamoDB table the `archive`
//! function writes (docs/archival.md), and tournaments' reads (docs/tournaments.md), whose
//! ended instances are read from it too. Open routes, like `query`'s. A function of its own so
//! that `query`, on every live read's path, is built without the DynamoDB SDK.

mod handlers;
mod tournaments;

use std::sync::Arc;

use axum::Router;
use axum::http::Method;
use standings::Clock;
use standings::archive::table::SeasonTable;
use standings::domain::config::Config;
use standings::http::ApiError;
use standings::http::routing::Routes;
use standings::redis::keys::Keys;
use standings::redis::store::Store;
use standings::services::catalog::Catalog;
use standings::services::reads::Reader;
use standings::services::tournaments::Tournaments;

/// Everything a request needs, built once per container.
pub struct App {
    /// The boards as of now (declared and runtime, docs/runtime-boards.md), and the
    /// tournaments among them.
    pub catalog: Catalog<Tournaments>,
    /// Live and frozen standings of tournaments' instances.
    pub reader: Reader,
    pub clock: Clock,
    pub keys: Keys,
    /// Today's profiles, joined into archived rows.
    pub store: Store,
    /// The season table (`STANDINGS_TABLE`); without it every route answers 404
    /// `archive_not_configured`.
    pub archive: Option<SeasonTable>,
}

impl App {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, archive: Option<SeasonTable>, clock: Clock) -> Self {
        let (built_keys, built_store) = (keys.clone(), store.clone());
        Self {
            catalog: Catalog::new(config, keys.clone(), store.clone(), move |config| {
                Tournaments::new(config, built_keys.clone(), built_store.clone())
            }),
            reader: Reader::new(keys.clone(), store.clone()).with_clock(clock.clone()),
            clock,
            keys,
            store,
            archive,
        }
    }

    pub async fn tournaments(&self) -> Result<Arc<Tournaments>, ApiError> {
        Ok(self.catalog.current().await?)
    }

    pub async fn config(&self) -> Result<Arc<Config>, ApiError> {
        Ok(self.catalog.config().await?)
    }

    /// The tournaments as of now, with `id` when it is a deleted one (`Catalog::naming`).
    pub async fn tournaments_naming(&self, id: &str) -> Result<Arc<Tournaments>, ApiError> {
        Ok(self.catalog.naming(id).await?)
    }

    /// Every board as of now, with `board` when it is a deleted one (`Catalog::naming`).
    pub async fn config_naming(&self, board: &str) -> Result<Arc<Config>, ApiError> {
        Ok(self.catalog.config_naming(board).await?)
    }

    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Arc::new(Config::from_env()?);
        let keys = standings::keys_from_env()?;
        let archive = match SeasonTable::from_env().await {
            Ok(table) => Some(table),
            Err(error) => {
                tracing::warn!(%error, "no season archive: every route answers 404");
                None
            }
        };
        Ok(Self::new(config, keys, Store::from_env().await?, archive, standings::system_clock()))
    }
}

/// Every route of this function: the router is built from this list, and the OpenAPI test
/// compares it with the document.
pub fn routes() -> Routes<Arc<App>> {
    Routes::new()
        .route(Method::GET, "/v1/boards/{board}/seasons/{season}/top", handlers::season_top)
        .route(Method::GET, "/v1/boards/{board}/seasons/{season}/users/{user_id}", handlers::season_user)
        .route(Method::GET, "/v1/boards/{board}/seasons/{season}/distribution", handlers::season_distribution)
        .route(Method::GET, "/v1/users/{user_id}/seasons", handlers::user_seasons)
        .route(Method::GET, "/v1/tournaments", tournaments::list)
        .route(Method::GET, "/v1/tournaments/{tournament_id}", tournaments::one)
        .route(Method::GET, "/v1/tournaments/{tournament_id}/top", tournaments::top)
        .route(Method::GET, "/v1/tournaments/{tournament_id}/users/{user_id}", tournaments::user)
        .route(Method::GET, "/v1/tournaments/{tournament_id}/results", tournaments::results)
}

pub fn router(app: Arc<App>) -> Router {
    standings::http::finish(routes().into_router()).with_state(app)
}
