//! Logging: JSON lines inside Lambda (CloudWatch parses them), plain text locally.
//!
//! `RUST_LOG` is read as `Targets` (`info`, `standings::events=info,warn`), not `EnvFilter`:
//! nothing here filters on spans or fields, and `EnvFilter` brings the regex crates, about
//! 0.3 MB of every bootstrap (BENCHMARKS.md, scenario 8).

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::{Layer, fmt, prelude::*};

pub fn init() {
    let filter = filter(std::env::var("RUST_LOG").ok().as_deref());
    let in_lambda = std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some();
    let layer = if in_lambda { fmt::layer().json().flatten_event(true).with_current_span(false).boxed() } else { fmt::layer().boxed() };
    // A second init (tests) keeps the first subscriber.
    drop(tracing_subscriber::registry().with(layer.with_filter(filter)).try_init());
}

/// `RUST_LOG` as `Targets`: `info` when unset, empty or unreadable. Empty parts are left out
/// (as `EnvFilter` leaves them): `Targets` reads one as the level `error`, so `info,` would
/// silence every line but errors.
fn filter(directives: Option<&str>) -> Targets {
    let parts: Vec<&str> = directives.unwrap_or_default().split(',').map(str::trim).filter(|part| !part.is_empty()).collect();
    match parts.join(",").parse::<Targets>() {
        Ok(targets) if !parts.is_empty() => targets,
        _ => Targets::new().with_default(LevelFilter::INFO),
    }
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::filter;

    #[test]
    fn rust_log_reads_as_targets_and_an_empty_part_silences_nothing() {
        for unset in [None, Some(""), Some(" , ")] {
            assert!(filter(unset).would_enable("standings::events", &Level::INFO), "{unset:?}");
        }
        assert!(filter(Some("info,")).would_enable("standings::events", &Level::INFO));
        let events = filter(Some("warn, standings::events=info"));
        assert!(events.would_enable("standings::events", &Level::INFO));
        assert!(!events.would_enable("standings::journal", &Level::INFO));
        assert!(events.would_enable("standings::journal", &Level::WARN));
    }
}
