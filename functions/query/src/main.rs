use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    standings::telemetry::init();
    let app = query::App::from_env()?.with_archive_from_env().await;
    lambda_http::run(query::router(Arc::new(app))).await
}
