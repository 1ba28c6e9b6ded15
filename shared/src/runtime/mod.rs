//! Lambda runtime support: JSON logs, CloudWatch metrics, secrets, invocation deadlines and the
//! AWS SDK's settings.

#[cfg(feature = "aws")]
pub mod aws;
pub mod deadline;
pub mod metrics;
pub mod secrets;
pub mod telemetry;
