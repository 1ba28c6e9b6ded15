//! HTTP glue shared by the API functions: the one place where errors become status codes,
//! JSON bodies with our error shape, and scope checks on API Gateway's JWT claims.

use axum::extract::{FromRequest, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use lambda_http::request::RequestContext;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::ingestion::{BatchRefusal, IngestError};
use crate::profiles::ProfileError;
use crate::scoring::Refusal;
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

/// `{"error":{"code","message"}}` with its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into() }
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
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", "the leaderboard store is unavailable; retry shortly")
    }

    pub fn detail(self) -> ErrorDetail {
        ErrorDetail { code: self.code, message: self.message }
    }

    /// Seconds a client should wait before retrying, when the status calls for it.
    fn retry_after(&self) -> Option<u32> {
        (self.status == StatusCode::SERVICE_UNAVAILABLE).then_some(1)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, retry_after) = (self.status, self.retry_after());
        let mut response = (status, Json(json!({"error": self.detail()}))).into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        let code = match &refusal {
            Refusal::InvalidId(_) => "invalid_id",
            Refusal::MissingTarget(_) => "malformed",
            Refusal::UnknownAction(_) => "unknown_action",
            Refusal::NotReversible(_) => "not_reversible",
            Refusal::PointsNotAllowed(_) => "points_not_allowed",
            Refusal::PointsOutOfRange { .. } | Refusal::OutOfRange(_) => "out_of_range",
            Refusal::EventTime(crate::period::EventTimeError::TooLate(_)) => "too_late",
            Refusal::EventTime(crate::period::EventTimeError::InFuture(_)) => "in_future",
        };
        let status = match &refusal {
            Refusal::InvalidId(_) | Refusal::MissingTarget(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        Self::new(status, code, refusal.to_string())
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
            IngestError::Refused(refusal) => refusal.into(),
            IngestError::Conflict(_) => Self::new(StatusCode::CONFLICT, "idempotency_conflict", error.to_string()),
            IngestError::ScoreOutOfRange(_) => Self::new(StatusCode::UNPROCESSABLE_ENTITY, "out_of_range", error.to_string()),
            IngestError::Store(store) => store.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        if error.is_out_of_memory() {
            tracing::error!(error = %error, "store out of memory");
            return Self::new(StatusCode::SERVICE_UNAVAILABLE, "store_full", "the leaderboard store is full; nothing was written; retry later");
        }
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

/// Answer for any path no route matches.
pub async fn unknown_route() -> ApiError {
    ApiError::not_found("no such route")
}

/// Answer for a known path with a method it does not take.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this route does not take that method")
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
        let jwt = match request.extensions().get::<RequestContext>() {
            Some(RequestContext::ApiGatewayV2(context)) => context.authorizer.as_ref().and_then(|a| a.jwt.as_ref()),
            _ => None,
        };
        let Some(jwt) = jwt else {
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
