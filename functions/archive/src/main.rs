// The scheduled run's future (seasons, then leagues, each through Redis and DynamoDB) nests
// deeper than rustc's default layout query depth.
#![recursion_limit = "256"]

use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    standings::runtime::telemetry::init();
    let app = archive::App::from_env().await?;
    let app = &app;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move { app.handle(event).await })).await
}
