//! A router that lists its own routes. Each API function builds its router from one
//! `routes()` list, and the OpenAPI test compares that same list with the document, so a
//! route cannot exist without being described (or be described without existing).

use axum::Router;
use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{MethodFilter, on};

/// An axum router plus the `(method, path)` of every route added to it.
pub struct Routes<S> {
    router: Router<S>,
    listed: Vec<(Method, &'static str)>,
}

impl<S: Clone + Send + Sync + 'static> Default for Routes<S> {
    fn default() -> Self {
        Self { router: Router::new(), listed: Vec::new() }
    }
}

impl<S: Clone + Send + Sync + 'static> Routes<S> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `handler` for `method` at `path` (axum syntax: `/v1/boards/{board}/top`).
    pub fn route<H, T>(mut self, method: Method, path: &'static str, handler: H) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
    {
        let filter = MethodFilter::try_from(method.clone()).expect("routes use standard HTTP methods");
        self.router = self.router.route(path, on(filter, handler));
        self.listed.push((method, path));
        self
    }

    /// Adds every route of `other`, with whatever layers it already has.
    pub fn merge(mut self, other: Routes<S>) -> Self {
        self.router = self.router.merge(other.router);
        self.listed.extend(other.listed);
        self
    }

    /// Every `(method, path)` added, in order.
    pub fn listed(&self) -> &[(Method, &'static str)] {
        &self.listed
    }

    pub fn into_router(self) -> Router<S> {
        self.router
    }
}
