use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{LambdaEvent, service_fn};
use standings::runtime::deadline::invocation_deadline;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    standings::runtime::telemetry::init();
    let app = queue::App::from_env().await?;
    standings::services::health::warn_if_evicting(&app.store).await;
    let app = &app;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let deadline = invocation_deadline(event.context.deadline, chrono::Utc::now(), queue::TIMEOUT);
        Ok::<_, lambda_runtime::Error>(app.handle_until(event.payload, Some(deadline)).await)
    }))
    .await
}
