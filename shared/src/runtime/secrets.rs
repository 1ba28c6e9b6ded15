//! The Redis URL from Secrets Manager, read once at start through the AWS Parameters and
//! Secrets Lambda Extension (a layer serving `GET localhost:2773/secretsmanager/get`), so the
//! password never sits in a function's configuration, a rotated secret reaches every new
//! container without a redeploy, and the functions carry no AWS SDK for it.
//!
//! `REDIS_URL_SECRET` names the secret (its SecretString is the whole `REDIS_URL`); without it
//! `REDIS_URL` is used as it is. The value is never logged, not even in an error.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use serde::Deserialize;

/// The variable naming the secret.
pub const SECRET_VAR: &str = "REDIS_URL_SECRET";
/// The extension's port unless `PARAMETERS_SECRETS_EXTENSION_HTTP_PORT` says otherwise.
pub const EXTENSION_PORT: u16 = 2773;

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("{SECRET_VAR} is set but AWS_SESSION_TOKEN is not: the extension needs it to authenticate the call")]
    NoSessionToken,
    #[error("the Parameters and Secrets extension could not be reached: {0}")]
    Unreachable(String),
    #[error("the Parameters and Secrets extension answered {0} for the Redis URL secret")]
    Status(u16),
    #[error("the Redis URL secret's answer has no SecretString")]
    NoSecretString,
}

#[derive(Deserialize)]
struct SecretValue {
    #[serde(rename = "SecretString")]
    secret_string: Option<String>,
}

/// The Redis URL the secret named by `SECRET_VAR` holds, or `None` when no secret is named.
/// `lookup` reads environment variables (a closure, so tests need not touch the process's).
pub async fn redis_url(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<String>, SecretError> {
    let Some(secret) = lookup(SECRET_VAR).filter(|s| !s.is_empty()) else { return Ok(None) };
    let token = lookup("AWS_SESSION_TOKEN").filter(|t| !t.is_empty()).ok_or(SecretError::NoSessionToken)?;
    let port = lookup("PARAMETERS_SECRETS_EXTENSION_HTTP_PORT").and_then(|p| p.parse().ok()).unwrap_or(EXTENSION_PORT);
    let id: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    let request = hyper::Request::get(format!("http://localhost:{port}/secretsmanager/get?secretId={id}"))
        .header("X-Aws-Parameters-Secrets-Token", token)
        .body(Empty::<Bytes>::new())
        .map_err(|e| SecretError::Unreachable(e.to_string()))?;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
    let response = client.request(request).await.map_err(|e| SecretError::Unreachable(e.to_string()))?;
    if !response.status().is_success() {
        return Err(SecretError::Status(response.status().as_u16()));
    }
    let body = response.into_body().collect().await.map_err(|e| SecretError::Unreachable(e.to_string()))?.to_bytes();
    let value: SecretValue = serde_json::from_slice(&body).map_err(|_| SecretError::NoSecretString)?;
    value.secret_string.filter(|s| !s.is_empty()).map(Some).ok_or(SecretError::NoSecretString)
}
