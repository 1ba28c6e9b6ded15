//! Documents embedded in the binary: the live leaderboard page (`GET /`, `GET /assets/{file}`)
//! and the OpenAPI description of both API functions (`GET /v1/openapi.json`). Plain files,
//! no front-end build step: what is in `functions/query/web/` is what the browser gets.

use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use standings::http::ApiError;

/// The OpenAPI 3.1 description of every route of `ingest` and `query`.
pub const OPENAPI: &str = include_str!("openapi.json");

/// The page talks only to its own origin: scripts, styles, images and API calls from `self`,
/// nothing inline, never framed.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'";

const PAGE: &str = include_str!("../web/index.html");

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: &[Asset] = &[
    Asset { name: "app.js", content_type: "text/javascript; charset=utf-8", body: include_str!("../web/app.js") },
    Asset { name: "panels.js", content_type: "text/javascript; charset=utf-8", body: include_str!("../web/panels.js") },
    Asset { name: "app.css", content_type: "text/css; charset=utf-8", body: include_str!("../web/app.css") },
    Asset { name: "favicon.svg", content_type: "image/svg+xml", body: include_str!("../web/favicon.svg") },
];

fn document(content_type: &'static str, cache_control: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache_control));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// `GET /v1/openapi.json`. It changes only with a deployment.
pub async fn openapi() -> Response {
    document("application/json", "public, max-age=300", OPENAPI)
}

/// `GET /`: the page revalidates on every load so a deployment shows at once.
pub async fn page() -> Response {
    let mut response = document("text/html; charset=utf-8", "no-cache", PAGE);
    response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    response
}

/// `GET /assets/{file}`: the page's script, style sheet and icon.
pub async fn asset(Path(file): Path<String>) -> Result<Response, ApiError> {
    let asset = ASSETS.iter().find(|asset| asset.name == file).ok_or_else(|| ApiError::not_found(format!("no asset named {file:?}")))?;
    Ok(document(asset.content_type, "public, max-age=300", asset.body))
}
