//! Cache headers: each read route says how long shared caches may keep its answer.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

pub fn with_cache(cache_control: &'static str, body: impl IntoResponse) -> Response {
    let mut response = body.into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static(cache_control));
    response
}
