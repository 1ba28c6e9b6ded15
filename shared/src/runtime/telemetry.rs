//! Logging: JSON lines inside Lambda (CloudWatch parses them), plain text locally.
//!
//! `RUST_LOG` is read as `Targets` (`info`, `standings::events=info,warn`), not `EnvFilter`:
//! nothing here filters on spans or fields, and `EnvFilter` brings the regex crates, about
//! 0.3 MB of every bootstrap (BENCHMARKS.md, scenario 8).

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::{Layer, fmt, prelude::*};

pub fn init() {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::INFO));
    let in_lambda = std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some();
    let layer = if in_lambda { fmt::layer().json().flatten_event(true).with_current_span(false).boxed() } else { fmt::layer().boxed() };
    // A second init (tests) keeps the first subscriber.
    drop(tracing_subscriber::registry().with(layer.with_filter(filter)).try_init());
}
