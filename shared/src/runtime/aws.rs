//! The AWS SDK's configuration, for the functions that call AWS (behind the `aws` feature, so
//! the SDK stays out of the others): HTTPS on rustls with ring, the crypto redis-rs already
//! brings (the SDK's default client would add a second TLS stack, aws-lc), a bounded number of
//! attempts and a timeout per attempt. `AWS_ENDPOINT_URL_<SERVICE>` points a client at a local
//! endpoint, as the SDK reads it.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;

pub async fn sdk_config(max_attempts: u32, attempt_timeout: Duration) -> aws_config::SdkConfig {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    let https = aws_smithy_http_client::Builder::new().tls_provider(Provider::Rustls(CryptoMode::Ring)).build_https();
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(https)
        .retry_config(RetryConfig::standard().with_max_attempts(max_attempts))
        .timeout_config(TimeoutConfig::builder().operation_attempt_timeout(attempt_timeout).build())
        .load()
        .await
}
