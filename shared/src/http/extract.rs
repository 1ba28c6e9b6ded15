//! Extractors whose every failure is an `ApiError`, never axum's plain-text rejection.

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use bytes::Bytes;
use serde::de::DeserializeOwned;

use super::{ApiError, MAX_BODY_BYTES};

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
        serde_json::from_slice(&bytes).map(JsonBody).map_err(|e| ApiError::malformed(format!("invalid JSON body: {e}")))
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

/// A list's `limit` (its default and bound are `domain::paging`'s) and `cursor`, checked.
pub fn page_params(limit: Option<u64>, cursor: Option<&str>) -> Result<(usize, Option<&str>), ApiError> {
    use crate::domain::paging::{DEFAULT_LIMIT, MAX_LIMIT};
    let limit = crate::services::reads::rules::bounded("limit", limit, DEFAULT_LIMIT, 1..=MAX_LIMIT)?;
    if let Some(cursor) = cursor {
        crate::domain::ids::validate_id("cursor", cursor)?;
    }
    Ok((usize::try_from(limit).unwrap_or(usize::MAX), cursor))
}
