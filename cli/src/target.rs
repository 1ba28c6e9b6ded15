//! Where the commands go: the HTTP API, the Lambda Invoke API and the functions' names, from
//! explicit flags, a deployed stack's CloudFormation outputs, or the local run's defaults; and
//! the bearer token write and admin routes carry.

use serde_json::Value;

use crate::Failure;
use crate::args::TargetArgs;

/// The local run's address (`./scripts/run-local.sh`): `cargo lambda watch` serves the API's
/// routes and the Invoke API on one port.
pub const LOCAL: &str = "http://127.0.0.1:9000";

/// A resolved target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `None`: no API given (`--lambda-endpoint` alone), which the routes' commands refuse.
    pub api: Option<String>,
    /// `None`: the Lambda service of the configured region.
    pub lambda_endpoint: Option<String>,
    pub journal_function: String,
    pub archive_function: String,
    /// The local run takes any credentials; a deployment takes the SDK's own.
    pub local: bool,
    pub token: Option<String>,
}

impl Target {
    pub async fn resolve(args: &TargetArgs) -> Result<Self, Failure> {
        // The local run's endpoints only when no target is given at all: `--api` alone must not
        // send the jobs to this machine, nor `--lambda-endpoint` alone the routes.
        let local = args.api.is_none() && args.lambda_endpoint.is_none();
        // Described once: its outputs name the targets, its parameters the token's issuer.
        let described = match &args.stack {
            Some(stack) => Some((stack.as_str(), stack_description(stack).await?)),
            None => None,
        };
        let mut target = match &described {
            Some((stack, description)) => from_stack(stack, description)?,
            None => Target {
                api: local.then(|| LOCAL.into()),
                // Without an endpoint: the Lambda service of the SDK's region.
                lambda_endpoint: local.then(|| LOCAL.into()),
                journal_function: "journal".into(),
                archive_function: "archive".into(),
                local: true,
                token: None,
            },
        };
        if let Some(api) = &args.api {
            target.api = Some(api.clone());
        }
        if let Some(endpoint) = &args.lambda_endpoint {
            target.lambda_endpoint = Some(endpoint.clone());
        }
        if let Some(name) = &args.journal_function {
            target.journal_function = name.clone();
        }
        if let Some(name) = &args.archive_function {
            target.archive_function = name.clone();
        }
        // Only an Invoke API on this machine (the local run's) takes any credentials: any
        // other is AWS's, signed with the SDK's own.
        target.local = target.lambda_endpoint.as_deref().is_some_and(loopback);
        target.api = target.api.map(|api| api.trim_end_matches('/').to_owned());
        target.token = match (&args.token, &args.client_id, &args.client_secret) {
            (Some(token), _, _) => Some(token.clone()),
            (None, Some(id), Some(secret)) => Some(client_token(args, described.as_ref(), id, secret).await?),
            (None, Some(_), None) | (None, None, Some(_)) => {
                return Err(Failure::Usage("--client-id and --client-secret go together".into()));
            }
            (None, None, None) => None,
        };
        Ok(target)
    }
}

/// Whether `url`'s host is this machine.
fn loopback(url: &str) -> bool {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let host = rest.split(['/', ':']).next().unwrap_or_default();
    rest.starts_with("[::1]") || host == "localhost" || host.starts_with("127.")
}

/// The stack's `ApiUrl`, `JournalFunctionName` and `ArchiveFunctionName` outputs
/// (infra/template.yaml).
fn from_stack(stack: &str, described: &aws_sdk_cloudformation::types::Stack) -> Result<Target, Failure> {
    let output =
        |key: &str| described.outputs().iter().find(|o| o.output_key() == Some(key)).and_then(|o| o.output_value()).map(str::to_owned);
    let api = output("ApiUrl").ok_or_else(|| Failure::Usage(format!("stack {stack} has no ApiUrl output: is it a Standings stack?")))?;
    // The functions' names as the stack's outputs give them (older stacks have no journal's:
    // the template names it `<stack>-journal`).
    Ok(Target {
        api: Some(api),
        lambda_endpoint: None,
        journal_function: output("JournalFunctionName").unwrap_or_else(|| format!("{stack}-journal")),
        archive_function: output("ArchiveFunctionName").unwrap_or_else(|| format!("{stack}-archive")),
        local: false,
        token: None,
    })
}

async fn stack_description(stack: &str) -> Result<aws_sdk_cloudformation::types::Stack, Failure> {
    let config = standings::runtime::aws::sdk_config(3, std::time::Duration::from_secs(30)).await;
    let client = aws_sdk_cloudformation::Client::new(&config);
    let answer = client.describe_stacks().stack_name(stack).send().await.map_err(|error| {
        // CloudFormation answers an unknown stack with a ValidationError "… does not exist".
        let missing = error.as_service_error().and_then(|e| e.meta().message()).is_some_and(|m| m.contains("does not exist"));
        match missing {
            true => Failure::Usage(format!("no stack named {stack}")),
            false => Failure::Transport(format!(
                "CloudFormation DescribeStacks {stack}: {}",
                aws_sdk_cloudformation::error::DisplayErrorContext(error)
            )),
        }
    })?;
    answer.stacks().first().cloned().ok_or_else(|| Failure::Usage(format!("no stack named {stack}")))
}

/// OAuth client credentials against `--token-url`, or the token endpoint the stack's issuer
/// (`JwtIssuer`) publishes in its OpenID configuration.
async fn client_token(
    args: &TargetArgs,
    stack: Option<&(&str, aws_sdk_cloudformation::types::Stack)>,
    id: &str,
    secret: &str,
) -> Result<String, Failure> {
    let http = crate::api::http_client()?;
    let token_url = match (&args.token_url, stack) {
        (Some(url), _) => url.clone(),
        (None, Some((name, described))) => {
            let issuer = described
                .parameters()
                .iter()
                .find(|p| p.parameter_key() == Some("JwtIssuer"))
                .and_then(|p| p.parameter_value())
                .ok_or_else(|| Failure::Usage(format!("stack {name} has no JwtIssuer parameter: pass --token-url")))?;
            let discovery = format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'));
            let document: Value = http
                .get(&discovery)
                .send()
                .await
                .and_then(reqwest::Response::error_for_status)
                .map_err(|e| Failure::Transport(format!("{discovery}: {e}")))?
                .json()
                .await
                .map_err(|e| Failure::Transport(format!("{discovery}: {e}")))?;
            document["token_endpoint"]
                .as_str()
                .ok_or_else(|| Failure::Usage(format!("{discovery} names no token_endpoint: pass --token-url")))?
                .to_owned()
        }
        (None, None) => return Err(Failure::Usage("client credentials need --stack or --token-url".into())),
    };
    let answer = http
        .post(&token_url)
        .basic_auth(id, Some(secret))
        .form(&[("grant_type", "client_credentials"), ("scope", "standings/admin")])
        .send()
        .await
        .map_err(|e| Failure::Transport(format!("{token_url}: {e}")))?;
    let status = answer.status();
    let body: Value = answer.json().await.unwrap_or(Value::Null);
    match body["access_token"].as_str() {
        Some(token) if status.is_success() => Ok(token.to_owned()),
        _ => Err(Failure::Api {
            status: status.as_u16(),
            code: body["error"].as_str().unwrap_or("token_refused").to_owned(),
            message: format!("the token endpoint {token_url} gave no token"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_invoke_api_on_this_machine_takes_any_credentials() {
        assert!(loopback("http://127.0.0.1:9000"));
        assert!(loopback("http://localhost:9000/"));
        assert!(!loopback("https://lambda.eu-west-1.amazonaws.com"));
        assert!(!loopback("https://vpce-0a1b.lambda.eu-west-1.vpce.amazonaws.com"));
    }

    #[tokio::test]
    async fn explicit_endpoints_elsewhere_are_signed_and_name_their_functions() {
        let args = TargetArgs {
            api: Some("https://api.example.com/".into()),
            lambda_endpoint: Some("https://lambda.eu-west-1.amazonaws.com".into()),
            journal_function: Some("prod-journal".into()),
            ..TargetArgs::default()
        };
        let target = Target::resolve(&args).await.unwrap();
        assert_eq!(target.api.as_deref(), Some("https://api.example.com"));
        assert!(!target.local, "a deployment's Invoke API takes the SDK's credentials");
        assert_eq!((target.journal_function.as_str(), target.archive_function.as_str()), ("prod-journal", "archive"));
        let local = Target::resolve(&TargetArgs::default()).await.unwrap();
        assert!(local.local && local.api.as_deref() == Some(LOCAL));
    }

    #[tokio::test]
    async fn one_explicit_target_never_sends_the_other_calls_to_this_machine() {
        let api_only = Target::resolve(&TargetArgs { api: Some("https://api.example.com".into()), ..TargetArgs::default() }).await.unwrap();
        assert_eq!(api_only.lambda_endpoint, None, "the jobs go to the region's Lambda service, not the local run");
        assert!(!api_only.local);
        let invoke_only =
            Target::resolve(&TargetArgs { lambda_endpoint: Some("http://127.0.0.1:9001".into()), ..TargetArgs::default() }).await.unwrap();
        assert_eq!(invoke_only.api, None, "the routes' commands then ask for --api");
    }
}
