//! The `query` function: the read side of the HTTP API (SPEC §4). Read routes are open.

mod seasons;

use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use standings::config::Config;
use standings::http::{method_not_allowed, unknown_route};
use standings::keys::Keys;
use standings::season_table::SeasonTable;
use standings::store::Store;
use standings::Clock;

/// Everything a request needs, built once per container.
pub struct App {
    pub config: Arc<Config>,
    pub keys: Keys,
    pub store: Store,
    pub clock: Clock,
    /// Archived seasons (`STANDINGS_TABLE`); without it the season routes answer 404.
    pub archive: Option<SeasonTable>,
}

impl App {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store, clock: Clock) -> Self {
        Self { config, keys, store, clock, archive: None }
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

    pub fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Arc::new(Config::from_env()?);
        let keys = Keys::new(&standings::key_prefix_from_env())?;
        Ok(Self::new(config, keys, Store::from_env()?, standings::system_clock()))
    }
}

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/boards/{board}/seasons/{season}/top", get(seasons::season_top))
        .route("/v1/boards/{board}/seasons/{season}/users/{user_id}", get(seasons::season_user))
        .route("/v1/users/{user_id}/seasons", get(seasons::user_seasons))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app)
}
