//! The HTTP API: one call, its answer as JSON, a refusal as the route's own code and message.

use reqwest::Method;
use serde_json::Value;

use crate::Failure;

pub fn http_client() -> Result<reqwest::Client, Failure> {
    // rustls with ring, the crypto the rest of the workspace uses (no second TLS stack).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .user_agent(concat!("standings-cli/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| Failure::Transport(format!("an HTTP client: {e}")))
}

pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Api {
    /// The API at `base`, with `token` on every call when there is one.
    pub fn new(base: &str, token: Option<String>) -> Result<Self, Failure> {
        Ok(Self { http: http_client()?, base: base.to_owned(), token })
    }

    /// `method path?query` with `body`; a 2xx answer's JSON, else the route's error.
    pub async fn call(&self, method: Method, path: &str, query: &[(&str, String)], body: Option<&Value>) -> Result<Value, Failure> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method.clone(), &url).query(query);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let answer = request.send().await.map_err(|e| Failure::Transport(format!("{method} {url}: {}", without_url(&e))))?;
        let status = answer.status();
        let text = answer.text().await.map_err(|e| Failure::Transport(format!("{method} {url}: {}", without_url(&e))))?;
        let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(json);
        }
        let error = &json["error"];
        if status == reqwest::StatusCode::UNAUTHORIZED && self.token.is_none() {
            return Err(Failure::Api {
                status: 401,
                code: error["code"].as_str().unwrap_or("unauthorized").to_owned(),
                message: "this route needs a bearer token: set STANDINGS_TOKEN, or give --client-id and --client-secret".into(),
            });
        }
        // API Gateway's own refusals (a token expired or of the wrong scope, throttling) are
        // `{"message"}` alone: named by their status.
        let gateway = match status.as_u16() {
            401 => "unauthorized",
            403 => "forbidden",
            429 => "too_many_requests",
            _ => "http_error",
        };
        Err(Failure::Api {
            status: status.as_u16(),
            code: error["code"].as_str().unwrap_or(gateway).to_owned(),
            message: error["message"]
                .as_str()
                .or_else(|| json["message"].as_str())
                .map_or_else(|| format!("{method} {path} answered {status}"), str::to_owned),
        })
    }
}

fn without_url(error: &reqwest::Error) -> String {
    let mut shown = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        shown = format!("{shown}: {cause}");
        source = cause.source();
    }
    shown
}

/// A path segment from user input, percent-encoded (an id never builds another route).
pub fn segment(raw: &str) -> String {
    let mut encoded = String::with_capacity(raw.len());
    for byte in raw.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => encoded.push(byte as char),
            other => encoded.push_str(&format!("%{other:02X}")),
        }
    }
    encoded
}
