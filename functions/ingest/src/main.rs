use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    standings::telemetry::init();
    let app = ingest::App::from_env()?;
    lambda_http::run(ingest::router(Arc::new(app))).await
}
