//! Runtime boards (docs/runtime-boards.md) on a test app: instances of the functions whose
//! catalog is read at a refresh of the test's choosing, as several warm containers would.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::Value;
use standings::http::AuthMode;
use standings::runtime::metrics::Metrics;
use standings::services::runtime_boards::RuntimeBoards;

use crate::{ADMIN, Caller, TestApp, clock_of, read_router};

impl TestApp {
    /// This app with a `query` function that reads the catalog before every request, so a
    /// board the `ingest` function just created is readable at once.
    pub fn reading_runtime_boards(mut self) -> Self {
        self.query = self.query_instance(Duration::ZERO);
        self
    }

    /// Another warm `ingest` container on this app's prefix, store and clock, reading the
    /// catalog at most every `refresh`, and holding at most `limit` runtime boards.
    pub fn ingest_instance(&self, refresh: Duration, limit: u32) -> Router {
        let metrics = Metrics::with_sink("ingest", Arc::new(|_| ()));
        let mut app =
            ingest::App::new(self.config.clone(), self.keys.clone(), self.store.clone(), clock_of(&self.now), AuthMode::Jwt, metrics);
        app.catalog = app.catalog.with_refresh(refresh);
        app.boards = RuntimeBoards::new(self.config.clone(), self.keys.clone(), self.store.clone(), limit);
        ingest::router(Arc::new(app))
    }

    /// Another warm `query` container, reading the catalog at most every `refresh`.
    pub fn query_instance(&self, refresh: Duration) -> Router {
        let mut query = query::App::new(self.config.clone(), self.keys.clone(), self.store.clone(), clock_of(&self.now));
        query.catalog = query.catalog.with_refresh(refresh);
        let seasons = seasons::App::new(self.config.clone(), self.keys.clone(), self.store.clone(), None, clock_of(&self.now));
        read_router(query, seasons)
    }

    /// `PUT /v1/admin/boards/{board}` with `definition`, as an admin.
    pub async fn define(&self, board: &str, definition: &Value) -> (StatusCode, Value) {
        self.call(Method::PUT, &format!("/v1/admin/boards/{board}"), definition.to_string(), ADMIN).await
    }
}

/// A request to `router` (another instance): its status and JSON body.
pub async fn call_on(router: &Router, method: Method, path: &str, body: &Value, caller: Caller<'_>) -> (StatusCode, Value) {
    let body = if body.is_null() { Body::empty() } else { Body::from(body.to_string()) };
    let (status, _, value) = crate::send(router, method, path, body, caller).await;
    (status, value)
}
