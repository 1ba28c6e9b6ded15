//! `standings-bench`: every figure a ratio against a baseline measured in the same run, against
//! a real Redis (`REDIS_URL`), printed as Markdown. Run through `scripts/bench.sh`, which starts
//! a throwaway redis-server; this is a benchmark, not a test, and asserts nothing beyond each
//! scenario doing the work it claims to time.
//!
//! Usage: `standings-bench [--repetitions N] [--around-members N] [SCENARIO…]` (default: every
//! scenario; the around-me scenario's big board has 10,000,000 members unless told otherwise).
//! A run of every scenario also rewrites the results section of `BENCHMARKS.md`.

mod harness;
mod machine;
mod report;
mod scenarios;
mod seed001;

use harness::{Bench, target_table};
use machine::Machine;

/// The system allocator, counted: a scenario reads what a structure keeps on the heap as the
/// change around building it (`stats_alloc::Region`; the catalog a warm function holds).
#[global_allocator]
pub static HEAP: &stats_alloc::StatsAlloc<std::alloc::System> = &stats_alloc::INSTRUMENTED_SYSTEM;

const USAGE: &str = "usage: standings-bench [--repetitions N] [--around-members N] [SCENARIO...]";
const RESULTS_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../BENCHMARKS.md");
const BEGIN: &str = "<!-- results: begin (written by ./scripts/bench.sh; edits here are overwritten) -->";
const END: &str = "<!-- results: end -->";

#[tokio::main]
async fn main() -> Result<(), harness::BenchError> {
    let mut repetitions = 7;
    let mut around_members = 10_000_000;
    let mut selected = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--repetitions" => {
                repetitions = args.next().and_then(|n| n.parse().ok()).filter(|&n| n > 0).ok_or(USAGE)?;
            }
            "--around-members" => {
                around_members = args.next().and_then(|n| n.parse().ok()).filter(|&n| n > 10_000).ok_or(USAGE)?;
            }
            "--help" | "-h" => {
                println!("{USAGE}\nscenarios: {}", scenarios::ALL.iter().map(|s| s.name).collect::<Vec<_>>().join(", "));
                return Ok(());
            }
            name if scenarios::ALL.iter().any(|s| s.name == name) => selected.push(name.to_owned()),
            other => return Err(format!("unknown scenario or option {other:?}\n{USAGE}").into()),
        }
    }
    let bench = Bench::connect(repetitions, around_members).await?;
    let machine = Machine::describe(&bench).await?;
    let started = chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string();
    bench.clean().await?;
    let mut reports = Vec::new();
    for scenario in scenarios::ALL.iter().filter(|s| selected.is_empty() || selected.iter().any(|n| n == s.name)) {
        eprintln!("running {} ({repetitions} repetitions)…", scenario.name);
        let report = (scenario.run)(&bench).await;
        bench.clean().await?;
        let report = report?;
        println!("{report}");
        reports.push(report);
    }
    let summary = target_table(reports.iter().flat_map(|r| &r.targets));
    println!("### Targets\n\n{summary}");

    let machine = machine.section(&started);
    println!("{machine}");
    if selected.is_empty() {
        let mut results = format!("{machine}\n## Targets\n\n{summary}\n## Results\n\n");
        for report in &reports {
            results.push_str(&format!("{report}\n"));
        }
        write_results(&results)?;
        eprintln!("results written to BENCHMARKS.md");
    }
    Ok(())
}

/// Replaces what lies between the markers in BENCHMARKS.md; the hand-written text around them
/// (method, readings, what was tried) stays.
fn write_results(results: &str) -> Result<(), harness::BenchError> {
    let text = std::fs::read_to_string(RESULTS_FILE)?;
    let (Some(begin), Some(end)) = (text.find(BEGIN), text.find(END)) else {
        return Err(format!("BENCHMARKS.md has no {BEGIN} … {END} section to write into").into());
    };
    let updated = format!("{}{BEGIN}\n\n{}\n\n{}", &text[..begin], results.trim_end(), &text[end..]);
    std::fs::write(RESULTS_FILE, updated)?;
    Ok(())
}
