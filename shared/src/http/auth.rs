//! Scope checks on the JWT claims API Gateway's authorizer validated.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{Extensions, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use lambda_http::aws_lambda_events::apigw::ApiGatewayRequestAuthorizerJwtDescription;
use lambda_http::request::RequestContext;

use super::ApiError;

pub const WRITE_SCOPE: &str = "standings/write";
pub const ADMIN_SCOPE: &str = "standings/admin";

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
        if granted { Ok(()) } else { Err(ApiError::new(StatusCode::FORBIDDEN, "forbidden", format!("this route needs the {scope} scope"))) }
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
