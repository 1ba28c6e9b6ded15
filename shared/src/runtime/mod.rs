//! Lambda runtime support: JSON logs, CloudWatch metrics, secrets and the AWS SDK's settings.

#[cfg(feature = "aws")]
pub mod aws;
pub mod metrics;
pub mod secrets;
pub mod telemetry;
