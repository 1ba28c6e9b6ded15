use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    standings::runtime::telemetry::init();
    let app = void::App::from_env().await?;
    standings::http::run_on_lambda(void::router(Arc::new(app))).await
}
