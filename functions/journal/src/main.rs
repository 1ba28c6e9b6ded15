use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    standings::runtime::telemetry::init();
    let app = journal::App::from_env().await?;
    standings::services::health::warn_if_evicting(&app.store).await;
    let app = &app;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move { app.handle(event).await })).await
}
