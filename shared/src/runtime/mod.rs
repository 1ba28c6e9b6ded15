//! Lambda runtime support: JSON logs, CloudWatch metrics and secrets.

pub mod metrics;
pub mod secrets;
pub mod telemetry;
