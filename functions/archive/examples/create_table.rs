//! Creates the season table named by `STANDINGS_TABLE`, with the schema defined in
//! `standings::archive::table`, at the SDK's endpoint (`AWS_ENDPOINT_URL_DYNAMODB`). For local
//! emulators such as moto_server; in AWS the SAM template creates the table.
//!
//! `STANDINGS_TABLE=standings cargo run -p archive --example create_table`

use standings::archive::table::SeasonTable;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let table = SeasonTable::from_env().await?;
    table.create_if_missing().await?;
    println!("season table {} is ready", table.name());
    Ok(())
}
