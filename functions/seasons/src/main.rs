use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    standings::runtime::telemetry::init();
    let app = seasons::App::from_env().await?;
    standings::http::run_on_lambda(seasons::router(Arc::new(app))).await
}
