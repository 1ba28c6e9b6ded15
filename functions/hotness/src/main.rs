use aws_lambda_events::eventbridge::EventBridgeEvent;
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    standings::runtime::telemetry::init();
    let app = hotness::App::from_env().await?;
    standings::services::health::warn_if_evicting(&app.store).await;
    let app = &app;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<EventBridgeEvent>| async move {
        app.run(event.payload).await.map_err(lambda_runtime::Error::from)
    }))
    .await
}
