//! The bootstrap scenario's baseline: the smallest useful Lambda function (`lambda_runtime`
//! echoing its event), built like the real functions, so their size and start-up time can be
//! told from the runtime's own.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| async move { Ok::<Value, Error>(event.payload) })).await
}
