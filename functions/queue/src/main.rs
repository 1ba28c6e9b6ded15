use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    standings::runtime::telemetry::init();
    let app = queue::App::from_env().await?;
    standings::services::health::warn_if_evicting(&app.store).await;
    let app = &app;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let deadline = chrono::DateTime::from_timestamp_millis(i64::try_from(event.context.deadline).unwrap_or(i64::MAX));
        Ok::<_, lambda_runtime::Error>(app.handle_until(event.payload, deadline).await)
    }))
    .await
}
