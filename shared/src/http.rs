//! HTTP glue shared by the API functions: the one place where errors become status codes,
//! JSON bodies with our error shape, and scope checks on API Gateway's JWT claims.

use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::Extensions;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use lambda_http::aws_lambda_events::apigw::ApiGatewayRequestAuthorizerJwtDescription;
use lambda_http::request::RequestContext;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::hot::HotError;
use crate::ingestion::{BatchRefusal, IngestError};
use crate::moderation::ModerationError;
use crate::profiles::ProfileError;
use crate::scoring::Refusal;
use crate::scripts::GuardRefusal;
use crate::sign_ins::SignInError;
use crate::store::StoreError;

/// Largest request body accepted by the API functions.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

pub const WRITE_SCOPE: &str = "standings/write";
pub const ADMIN_SCOPE: &str = "standings/admin";

/// The `error` object of every error body.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ErrorDetail {
    pub code: &'static str,
    pub message: String,
}

/// `{"error":{"code","message"}}` with its status, and a `Retry-After` header when set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Seconds the client should wait before retrying (503, 429).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), retry_after: None }
    }

    pub fn with_retry_after(self, seconds: u64) -> Self {
        Self { retry_after: Some(seconds), ..self }
    }

    pub fn malformed(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "malformed", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    /// The store could not answer. The cause is logged here and never sent to the client.
    pub fn unavailable(cause: &dyn std::error::Error) -> Self {
        tracing::error!(error = %cause, "store unavailable");
        Self::store_unreachable()
    }

    /// The store could not answer, its cause logged where it was seen.
    pub fn store_unreachable() -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", "the leaderboard store is unavailable; retry shortly")
            .with_retry_after(1)
    }

    pub fn detail(self) -> ErrorDetail {
        ErrorDetail { code: self.code, message: self.message }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, retry_after) = (self.status, self.retry_after);
        let mut response = (status, Json(json!({"error": self.detail()}))).into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// Status and code of a refused event: the one table mapping refusals to HTTP.
pub fn refusal_status(refusal: &Refusal) -> (StatusCode, &'static str) {
    let status = match refusal {
        Refusal::InvalidId(_) | Refusal::MissingTarget(_) => StatusCode::BAD_REQUEST,
        Refusal::UnknownAction(_)
        | Refusal::NotReversible(_)
        | Refusal::PointsNotAllowed(_)
        | Refusal::PointsOutOfRange { .. }
        | Refusal::OutOfRange(_)
        | Refusal::EventTime(_) => StatusCode::UNPROCESSABLE_ENTITY,
    };
    (status, refusal.code())
}

/// Status and code of a failed event.
pub fn ingest_status(error: &IngestError) -> (StatusCode, &'static str) {
    let status = match error {
        IngestError::Refused(refusal) => return refusal_status(refusal),
        IngestError::Conflict(_) => StatusCode::CONFLICT,
        IngestError::ScoreOutOfRange(_) | IngestError::Banned(..) | IngestError::PeriodClosed { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        IngestError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        IngestError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    (status, error.code())
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        let (status, code) = refusal_status(&refusal);
        Self::new(status, code, refusal.to_string())
    }
}

impl From<HotError> for ApiError {
    fn from(error: HotError) -> Self {
        let unprocessable = |code| Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, error.to_string());
        match &error {
            HotError::UnknownBoard(_) => Self::new(StatusCode::NOT_FOUND, "unknown_board", error.to_string()),
            HotError::InvalidId(_) => Self::new(StatusCode::BAD_REQUEST, "invalid_id", error.to_string()),
            HotError::LimitOutOfRange => Self::new(StatusCode::BAD_REQUEST, "out_of_range", error.to_string()),
            HotError::DeltaOutOfRange(_) => unprocessable("out_of_range"),
            HotError::EventTime(time) => unprocessable(time.code()),
            HotError::Conflict(_) => Self::new(StatusCode::CONFLICT, "idempotency_conflict", error.to_string()),
            HotError::Store(store) => Self::store(store),
        }
    }
}

impl From<BatchRefusal> for ApiError {
    fn from(refusal: BatchRefusal) -> Self {
        let message = refusal.to_string();
        Self { message, ..refusal.refusal.into() }
    }
}

impl From<IngestError> for ApiError {
    fn from(error: IngestError) -> Self {
        match error {
            IngestError::Store(store) => store.into(),
            other => {
                let (status, code) = ingest_status(&other);
                let error = Self::new(status, code, other.to_string());
                match other {
                    IngestError::RateLimited { retry_after_secs, .. } => error.with_retry_after(retry_after_secs),
                    _ => error,
                }
            }
        }
    }
}

impl From<&GuardRefusal> for ApiError {
    fn from(refusal: &GuardRefusal) -> Self {
        let code = match refusal {
            GuardRefusal::Banned { .. } => "user_banned",
            GuardRefusal::PeriodClosed { .. } => "period_closed",
        };
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, refusal.to_string())
    }
}

impl From<SignInError> for ApiError {
    fn from(error: SignInError) -> Self {
        let (status, code) = match &error {
            SignInError::NotConfigured => (StatusCode::NOT_FOUND, "not_found"),
            SignInError::InvalidId(_) => (StatusCode::BAD_REQUEST, "invalid_id"),
            SignInError::BadMonth(_) => (StatusCode::BAD_REQUEST, "malformed"),
            SignInError::InFuture { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "in_future"),
            SignInError::TooLate { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "too_late"),
            SignInError::OutOfRange(_) | SignInError::ScoreOutOfRange(_) => (StatusCode::UNPROCESSABLE_ENTITY, "out_of_range"),
            SignInError::Conflict(_) => (StatusCode::CONFLICT, "idempotency_conflict"),
            SignInError::Guard(refusal) => return refusal.into(),
            SignInError::Store(store) => return Self::store(store),
        };
        Self::new(status, code, error.to_string())
    }
}

impl From<ModerationError> for ApiError {
    fn from(error: ModerationError) -> Self {
        let (status, code) = match &error {
            ModerationError::UnknownBoard(_) => (StatusCode::NOT_FOUND, "unknown_board"),
            ModerationError::InvalidId(_) => (StatusCode::BAD_REQUEST, "invalid_id"),
            ModerationError::BadReason | ModerationError::BadPeriod(_) => (StatusCode::BAD_REQUEST, "malformed"),
            ModerationError::Conflict(_) => (StatusCode::CONFLICT, "idempotency_conflict"),
            ModerationError::BadLimit => (StatusCode::BAD_REQUEST, "out_of_range"),
            ModerationError::DeltaOutOfRange | ModerationError::Time(_) | ModerationError::ScoreOutOfRange(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "out_of_range")
            }
            ModerationError::Guard(refusal) => return refusal.into(),
            ModerationError::Store(store) => return Self::store(store),
        };
        Self::new(status, code, error.to_string())
    }
}

/// True on a cluster where only one node is full: the write it refused changed nothing, but
/// other boards of the same request (on other nodes) may have applied it.
pub const STORE_FULL: &str = "the leaderboard store is out of memory on at least one node; retry later with the same ids: \
    whatever was already applied is answered as a duplicate, never applied twice";

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        Self::store(&error)
    }
}

impl ApiError {
    /// The one answer for every store failure: full, misconfigured, or unavailable.
    pub fn store(error: &StoreError) -> Self {
        if error.is_out_of_memory() {
            tracing::error!(error = %error, "store out of memory");
            // Memory is freed by expiring keys or by an operator, not within a second.
            return Self::new(StatusCode::SERVICE_UNAVAILABLE, "store_full", STORE_FULL)
                .with_retry_after(5);
        }
        if let StoreError::EvictingPolicy(policy) = &error {
            tracing::error!(maxmemory_policy = %policy, "writes refused: the store may evict keys");
            let message = "the leaderboard store is configured to evict keys under memory pressure, which could lose \
                scores and double-count retries; writes are refused until its maxmemory-policy is noeviction";
            return Self::new(StatusCode::SERVICE_UNAVAILABLE, "store_misconfigured", message).with_retry_after(60);
        }
        Self::unavailable(error)
    }
}

#[cfg(feature = "dynamodb")]
impl From<crate::season_table::TableError> for ApiError {
    fn from(error: crate::season_table::TableError) -> Self {
        Self::unavailable(&error)
    }
}

impl From<ProfileError> for ApiError {
    fn from(error: ProfileError) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "malformed", error.to_string())
    }
}

/// A JSON body whose every failure (syntax, missing or unknown fields, wrong types, too
/// large) is an `ApiError`, never axum's plain-text rejection.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::too_large(format!("the body is larger than {MAX_BODY_BYTES} bytes"))
            } else {
                ApiError::malformed("the body could not be read")
            }
        })?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::malformed(format!("invalid JSON body: {e}")))
    }
}

/// Query parameters whose every failure (unknown names, wrong types) is an `ApiError`.
pub struct QueryParams<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> axum::extract::FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::try_from_uri(&parts.uri)
            .map(|axum::extract::Query(params)| QueryParams(params))
            .map_err(|e| ApiError::malformed(format!("invalid query string: {}", e.body_text())))
    }
}

/// One span per request, under the runtime's per-invocation span (which carries the Lambda
/// request id): route, method, board, and the event id when a handler records it. Ends with
/// one access line (status, latency). Applied with `route_layer`, after routing.
pub async fn request_span(request: Request, next: Next) -> Response {
    use axum::extract::{FromRequestParts, MatchedPath, RawPathParams};
    let (mut parts, body) = request.into_parts();
    let route = parts.extensions.get::<MatchedPath>().map_or("", |p| p.as_str()).to_owned();
    let board = RawPathParams::from_request_parts(&mut parts, &())
        .await
        .ok()
        .and_then(|params| params.iter().find(|(name, _)| *name == "board").map(|(_, value)| value.to_owned()));
    let request = Request::from_parts(parts, body);
    let span = tracing::info_span!(
        "request",
        method = %request.method(),
        route = %route,
        board = board.as_deref().unwrap_or(""),
        event_id = tracing::field::Empty,
    );
    let started = std::time::Instant::now();
    let response = tracing::Instrument::instrument(next.run(request), span.clone()).await;
    let status = response.status().as_u16();
    span.in_scope(|| tracing::info!(status, millis = started.elapsed().as_millis() as u64, "request"));
    response
}

/// What every API function's router ends with: the request span, the JSON answers for unknown
/// routes and methods, the body limit, and the panic guard. `Router<S>` is the routes with
/// their layers, before the state is given.
pub fn finish<S: Clone + Send + Sync + 'static>(routes: axum::Router<S>) -> axum::Router<S> {
    routes
        .route_layer(axum::middleware::from_fn(request_span))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(catch_panic))
}

/// A panic in a handler answers the usual 500 body (the panic is logged, never sent) and the
/// function goes on serving: the release profile unwinds rather than aborts, so one bad
/// request cannot kill the container and make the next caller pay a cold start.
pub async fn catch_panic(request: Request, next: Next) -> Response {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(next.run(request)).catch_unwind().await {
        Ok(response) => response,
        Err(panic) => {
            let message = panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned());
            tracing::error!(panic = message.as_deref().unwrap_or("(not a string)"), "handler panicked");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "an internal error occurred; it has been logged").into_response()
        }
    }
}

/// Answer for any path no route matches.
pub async fn unknown_route() -> ApiError {
    ApiError::not_found("no such route")
}

/// Answer for a known path with a method it does not take.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this route does not take that method")
}

/// The JWT API Gateway's authorizer validated for this request, if any.
fn jwt_of(extensions: &Extensions) -> Option<&ApiGatewayRequestAuthorizerJwtDescription> {
    match extensions.get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(context)) => context.authorizer.as_ref().and_then(|a| a.jwt.as_ref()),
        _ => None,
    }
}

/// How write and admin routes are authorized (`STANDINGS_AUTH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// API Gateway's JWT authorizer ran; its claims must carry the route's scope.
    Jwt,
    /// Local development only: every caller may write.
    Off,
}

impl AuthMode {
    pub fn from_env() -> Result<Self, String> {
        match std::env::var("STANDINGS_AUTH").as_deref() {
            Err(_) | Ok("") | Ok("jwt") => Ok(Self::Jwt),
            Ok("off") => {
                tracing::warn!("STANDINGS_AUTH=off: write and admin routes accept unauthenticated calls; never use this in production");
                Ok(Self::Off)
            }
            Ok(other) => Err(format!("STANDINGS_AUTH must be jwt or off, not {other:?}")),
        }
    }

    /// Checks that the request's JWT claims grant `scope` (`standings/admin` grants both).
    pub fn authorize(self, request: &Request, scope: &str) -> Result<(), ApiError> {
        if self == Self::Off {
            return Ok(());
        }
        let Some(jwt) = jwt_of(request.extensions()) else {
            return Err(ApiError::new(StatusCode::UNAUTHORIZED, "unauthenticated", "this route needs a bearer token"));
        };
        let from_claims = jwt.claims.get("scope").or_else(|| jwt.claims.get("scp"));
        let granted = jwt
            .scopes
            .iter()
            .flatten()
            .map(String::as_str)
            .chain(from_claims.into_iter().flat_map(|s| s.split_whitespace()))
            .any(|s| s == scope || s == ADMIN_SCOPE);
        if granted {
            Ok(())
        } else {
            Err(ApiError::new(StatusCode::FORBIDDEN, "forbidden", format!("this route needs the {scope} scope")))
        }
    }
}

/// The caller's identity (the JWT `sub` claim API Gateway passes), recorded as the actor of
/// admin actions; `None` without a token (e.g. `STANDINGS_AUTH=off`).
pub struct Subject(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for Subject {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(jwt_of(&parts.extensions).and_then(|jwt| jwt.claims.get("sub").cloned())))
    }
}

/// Middleware for write routes.
pub async fn require_write(State(auth): State<AuthMode>, request: Request, next: Next) -> Result<Response, ApiError> {
    auth.authorize(&request, WRITE_SCOPE)?;
    Ok(next.run(request).await)
}

/// Middleware for admin routes.
pub async fn require_admin(State(auth): State<AuthMode>, request: Request, next: Next) -> Result<Response, ApiError> {
    auth.authorize(&request, ADMIN_SCOPE)?;
    Ok(next.run(request).await)
}

/// Serves an API function's router on Lambda: concurrently when `AWS_LAMBDA_MAX_CONCURRENCY`
/// is above 1 (one instance, many requests, one shared Redis connection), one invocation at a
/// time otherwise. The response is converted to the runtime's body type before it leaves the
/// handler, because concurrent mode needs responses that are `Sync`.
pub async fn run_on_lambda(router: axum::Router) -> Result<(), lambda_http::Error> {
    use tower::ServiceExt;
    lambda_http::run_concurrent(lambda_http::service_fn(move |request: lambda_http::Request| {
        let router = router.clone();
        async move {
            let response = router.oneshot(request).await?;
            Ok::<_, std::convert::Infallible>(lambda_http::IntoResponse::into_response(response).await)
        }
    }))
    .await
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::get;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_and_the_router_serves_the_next_request() {
        async fn boom() -> &'static str {
            panic!("forced by the test")
        }
        let router = finish(axum::Router::new().route("/boom", get(boom)).route("/ok", get(|| async { "fine" })));
        let call = |path: &'static str| {
            let router = router.clone();
            async move {
                let response = router.oneshot(Request::builder().uri(path).body(Body::empty()).unwrap()).await.unwrap();
                let status = response.status();
                (status, response.into_body().collect().await.unwrap().to_bytes())
            }
        };
        let (status, body) = call("/boom").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "internal");
        assert!(!body.to_string().contains("forced"), "the panic message is logged, never sent");
        assert_eq!(call("/ok").await.0, StatusCode::OK);
        assert_eq!(call("/boom").await.0, StatusCode::INTERNAL_SERVER_ERROR, "and again: nothing was poisoned");
    }
}
