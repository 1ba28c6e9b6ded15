//! The journal bucket asked one thing: whether it holds any object under a prefix. What tells a
//! new board from a lost one (`services::journal::births`) in the functions that take journaled
//! writes, at their start. One signed `ListObjectsV2` (`max-keys=1`) over the TLS the Redis
//! client already brings, signed by the SDK's own SigV4 crate: the S3 SDK and its credential
//! chain would add about 2 MB to `ingest`'s bootstrap (under 8 MB with this probe, BENCHMARKS.md,
//! scenario 8) for a call made at most once per board a start.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings, UriPathNormalizationMode, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::objects::{ObjectError, Witness};

/// A call that takes longer is an error: the board is then left to the drain to judge.
const TIMEOUT: Duration = Duration::from_secs(3);

/// The bucket `STANDINGS_JOURNAL_BUCKET` as the function's role sees it (the credentials Lambda
/// puts in the environment), at `AWS_ENDPOINT_URL_S3` (or `AWS_ENDPOINT_URL`) when set, path
/// style, else at the bucket's virtual host in `AWS_REGION`.
pub struct JournalProbe {
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
    /// `…/` to which the listing's query is appended.
    base: String,
    region: String,
    /// How long a listing may take ([`TIMEOUT`] unless [`JournalProbe::waiting`] says).
    timeout: Duration,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// A query value as SigV4 and S3 encode it: everything but the unreserved characters.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl JournalProbe {
    /// `None` without a journal bucket (the journal is off: nothing to tell apart).
    pub fn from_env() -> Option<Self> {
        let bucket = crate::journal_bucket_from_env()?;
        let region = env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION")).unwrap_or_else(|| "us-east-1".to_owned());
        Self::new(&bucket, env("AWS_ENDPOINT_URL_S3").or_else(|| env("AWS_ENDPOINT_URL")).as_deref(), &region)
    }

    /// `bucket` at `endpoint` (path style) or, without one, at its virtual host in `region`.
    pub fn new(bucket: &str, endpoint: Option<&str>, region: &str) -> Option<Self> {
        let base = match endpoint {
            Some(endpoint) => format!("{}/{bucket}/", endpoint.trim_end_matches('/')),
            None => format!("https://{bucket}.s3.{region}.amazonaws.com/"),
        };
        let region = region.to_owned();
        let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        let tls = rustls::ClientConfig::builder_with_provider(rustls::crypto::ring::default_provider().into())
            .with_safe_default_protocol_versions()
            .ok()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http().enable_http1().build();
        Some(Self { client: Client::builder(TokioExecutor::new()).build(connector), base, region, timeout: TIMEOUT })
    }

    /// The same probe waiting up to `timeout` for an answer: for a bucket on a loaded machine
    /// (the suite's moto_server beside every other test), where a late answer is not a finding.
    #[must_use]
    pub fn waiting(self, timeout: Duration) -> Self {
        Self { timeout, ..self }
    }

    /// The signed listing of one key under `prefix`, as `credentials` sign it at `time`.
    fn request(&self, prefix: &str, credentials: Credentials, time: SystemTime) -> Result<hyper::Request<Empty<Bytes>>, ObjectError> {
        let failed = |what: String| ObjectError(format!("signing a listing of the journal bucket: {what}"));
        let identity: Identity = credentials.into();
        let uri = format!("{}?list-type=2&max-keys=1&prefix={}", self.base, encode(prefix));
        let mut settings = SigningSettings::default();
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("s3")
            .time(time)
            .settings(settings)
            .build()
            .map_err(|e| failed(e.to_string()))?
            .into();
        let signable = SignableRequest::new("GET", Cow::Borrowed(uri.as_str()), std::iter::empty(), SignableBody::Bytes(&[]))
            .map_err(|e| failed(e.to_string()))?;
        let (instructions, _) = sign(signable, &params).map_err(|e| failed(e.to_string()))?.into_parts();
        let mut request = hyper::Request::get(&uri).body(Empty::new()).map_err(|e| failed(e.to_string()))?;
        instructions.apply_to_request_http1x(&mut request);
        Ok(request)
    }

    async fn list(&self, prefix: &str) -> Result<bool, ObjectError> {
        let failed = |what: &str| ObjectError(format!("listing the journal bucket: {what}"));
        let (Some(key), Some(secret)) = (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) else {
            return Err(failed("no credentials in the environment"));
        };
        let credentials = Credentials::new(key, secret, env("AWS_SESSION_TOKEN"), None, "environment");
        let request = self.request(prefix, credentials, SystemTime::now())?;
        let response = self.client.request(request).await.map_err(|e| failed(&e.to_string()))?;
        let status = response.status();
        let body = response.into_body().collect().await.map_err(|e| failed(&e.to_string()))?.to_bytes();
        if !status.is_success() {
            // S3's error code only (`AccessDenied`, `NoSuchBucket`): never the whole body.
            let text = String::from_utf8_lossy(&body);
            let code = text.split_once("<Code>").and_then(|(_, rest)| rest.split_once("</Code>")).map_or("", |(code, _)| code);
            return Err(failed(&format!("{status} {code}")));
        }
        Ok(String::from_utf8_lossy(&body).contains("<Contents>"))
    }
}

impl Witness for JournalProbe {
    async fn holds_any(&self, prefix: &str) -> Result<bool, ObjectError> {
        let timeout = self.timeout;
        tokio::time::timeout(timeout, self.list(prefix))
            .await
            .unwrap_or_else(|_| Err(ObjectError(format!("listing the journal bucket: no answer within {timeout:?}"))))
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use aws_credential_types::Credentials;

    use super::{JournalProbe, encode};

    #[test]
    fn a_prefix_is_encoded_as_sigv4_canonicalises_it() {
        assert_eq!(encode("journal/prefix=a:b/board=x-1_y.z~/"), "journal%2Fprefix%3Da%3Ab%2Fboard%3Dx-1_y.z~%2F");
    }

    /// Signed as botocore's `S3SigV4Auth` signs the same listing at the same time (its headers,
    /// computed once with botocore and pasted here): another implementation's canonical
    /// request, since moto_server does not check signatures.
    #[test]
    fn a_listing_is_signed_as_botocore_signs_it() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_323_045); // 2026-01-02T03:04:05Z
        let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
        let header = |request: &hyper::Request<_>, name: &str| request.headers()[name].to_str().unwrap().to_owned();

        let aws = JournalProbe::new("journal-bucket", None, "eu-west-1").unwrap();
        let credentials = Credentials::new("AKIDEXAMPLE", secret, Some("session-token".into()), None, "test");
        let request = aws.request("journal/prefix=p:a/board=points/", credentials, at).unwrap();
        assert_eq!(
            request.uri().to_string(),
            "https://journal-bucket.s3.eu-west-1.amazonaws.com/?list-type=2&max-keys=1&prefix=journal%2Fprefix%3Dp%3Aa%2Fboard%3Dpoints%2F"
        );
        assert_eq!(header(&request, "x-amz-security-token"), "session-token");
        assert_eq!(
            header(&request, "authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/eu-west-1/s3/aws4_request, \
             SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, \
             Signature=19363dbb98af875e243a3cb853e49d92fbacf105c699c7bfb2dfc755a9735494"
        );

        let local = JournalProbe::new("journal-bucket", Some("http://127.0.0.1:5000/"), "us-east-1").unwrap();
        let request = local.request("journal/", Credentials::new("AKIDEXAMPLE", secret, None, None, "test"), at).unwrap();
        assert_eq!(request.uri().to_string(), "http://127.0.0.1:5000/journal-bucket/?list-type=2&max-keys=1&prefix=journal%2F");
        assert_eq!(
            header(&request, "authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/s3/aws4_request, \
             SignedHeaders=host;x-amz-content-sha256;x-amz-date, \
             Signature=cd8057db02b31652a2877c6e3cb7fe4cdbc7a6e7be223d24bc6aa2daa45f2b10"
        );
    }
}
