//! The archive benchmark (`bench/src/archive.rs`) as a standalone program:
//! `./scripts/bench-archive.sh [members]` (starts redis-server and moto_server), or with
//! `REDIS_URL` and `AWS_ENDPOINT_URL_DYNAMODB` set: `cargo run --profile bench-tool -p archive --example
//! bench_archive -- [members]`. Prints a line per side and the whole result as JSON.

#[path = "../../../bench/src/archive.rs"]
mod scenario;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let members = match std::env::args().nth(1) {
        Some(arg) => arg.parse().map_err(|_| format!("members must be a number, not {arg:?}"))?,
        None => 20_000,
    };
    let result = scenario::run(members).await?;
    for (name, side) in [("raw BatchWriteItem", &result.raw_batch_write), ("archive job", &result.archive_job)] {
        println!("{name:<20} {:>8} items {:>8.2} s {:>10.0} items/s", side.items, side.seconds, side.items_per_second);
    }
    println!("archive job / raw: {:.2}", result.ratio);
    println!("{}", serde_json::to_string(&result)?);
    Ok(())
}
