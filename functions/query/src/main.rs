use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    standings::telemetry::init();
    let app = query::App::from_env()?;
    lambda_http::run(query::router(Arc::new(app))).await
}
