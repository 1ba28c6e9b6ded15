use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    standings::runtime::telemetry::init();
    let app = query::App::from_env().await?;
    standings::services::health::warn_if_evicting(&app.store).await;
    standings::http::run_on_lambda(query::router(Arc::new(app))).await
}
