//! `standings-bench`: timings against a real Redis (`REDIS_URL`), printed as Markdown.
//! Run through `scripts/bench.sh`, which starts a throwaway redis-server; this is a benchmark,
//! not a test, and asserts nothing beyond each scenario doing the work it claims to time.
//!
//! Usage: `standings-bench [--repetitions N] [SCENARIO…]` (default: every scenario).

mod harness;
mod scenarios;

use harness::Bench;

const USAGE: &str = "usage: standings-bench [--repetitions N] [SCENARIO...]";

#[tokio::main]
async fn main() -> Result<(), harness::BenchError> {
    let mut repetitions = 7;
    let mut selected = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--repetitions" => {
                repetitions = args.next().and_then(|n| n.parse().ok()).filter(|&n| n > 0).ok_or(USAGE)?;
            }
            "--help" | "-h" => {
                println!("{USAGE}\nscenarios: {}", scenarios::ALL.iter().map(|s| s.name).collect::<Vec<_>>().join(", "));
                return Ok(());
            }
            name if scenarios::ALL.iter().any(|s| s.name == name) => selected.push(name.to_owned()),
            other => return Err(format!("unknown scenario or option {other:?}\n{USAGE}").into()),
        }
    }
    let bench = Bench::connect(repetitions)?;
    for scenario in scenarios::ALL.iter().filter(|s| selected.is_empty() || selected.iter().any(|n| n == s.name)) {
        eprintln!("running {} ({repetitions} repetitions)…", scenario.name);
        let report = (scenario.run)(&bench).await?;
        println!("{report}");
    }
    Ok(())
}
