//! Logging: JSON lines inside Lambda (CloudWatch parses them), plain text locally.

use tracing_subscriber::EnvFilter;

pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let in_lambda = std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some();
    let result = if in_lambda { builder.json().flatten_event(true).with_current_span(false).try_init() } else { builder.try_init() };
    // A second init (tests) keeps the first subscriber.
    drop(result);
}
