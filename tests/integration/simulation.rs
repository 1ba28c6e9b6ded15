//! Every feature against every other (docs/testing.md#the-simulation): the regressions first,
//! then fixed seeds, then fresh ones until the budget is spent (`STANDINGS_SIM_SECS`, default
//! 60; `STANDINGS_SIM_SEED` replays one seed). Each history runs writes of every kind, queue
//! deliveries, moderation, drains, restores and faults against the model, checking every answer
//! and every read after every step. The standalone and the cluster pass each run it.

use std::time::{Duration, Instant};

use standings_tests::sim::{self, Stats, ops};

const LENGTH: usize = 120;
const FIXED_SEEDS: [u64; 3] = [1, 2, 3];

/// A history of `seed`, without the operations `STANDINGS_SIM_WITHOUT` names (comma-separated,
/// as the regression lines spell them): to look past a defect already found.
fn history(seed: u64) -> Vec<ops::Op> {
    let without = std::env::var("STANDINGS_SIM_WITHOUT").unwrap_or_default();
    let skipped: Vec<&str> = without.split(',').filter(|s| !s.is_empty()).collect();
    ops::generate(seed, LENGTH)
        .into_iter()
        .filter(|op| !skipped.iter().any(|name| serde_json::to_value(op).unwrap()["op"] == *name))
        .collect()
}

fn budget() -> Duration {
    let secs = std::env::var("STANDINGS_SIM_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    Duration::from_secs(secs)
}

/// Runs `history`; on a divergence prints the seed and a shrunk history (the line to add to
/// tests/sim/regressions.txt) and fails.
async fn check(seed: u64, history: &[ops::Op], totals: &mut Stats) {
    let (divergence, stats) = sim::run(history).await;
    totals.steps += stats.steps;
    totals.faults += stats.faults;
    totals.reads += stats.reads;
    let Some(divergence) = divergence else { return };
    eprintln!("simulation diverged: seed {seed}, step {}: {:?}: {}", divergence.step, divergence.op, divergence.message);
    let (shrunk, found) = sim::shrink(history, divergence.clone(), Duration::from_secs(240)).await;
    let line = serde_json::to_string(&sim::Regression { defect: found.message.clone(), seed, history: shrunk.clone() }).unwrap();
    panic!(
        "seed {seed} diverged at step {} of {} ({:?}): {}\nshrunk to {} steps; add to tests/sim/regressions.txt:\n{line}",
        divergence.step,
        history.len(),
        divergence.op,
        divergence.message,
        shrunk.len()
    );
}

#[test]
fn every_feature_against_every_other() {
    // A debug build holds a step's whole chain of futures on the stack: some histories (met
    // while shrinking one) overflow a test thread's 2 MiB and abort the run, the shrunk line
    // unprinted.
    const STACK: usize = 64 << 20;
    let run = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(|| {
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_stack_size(STACK).enable_all().build();
            runtime.expect("a runtime").block_on(every_history())
        })
        .expect("a thread for the simulation");
    if let Err(panic) = run.join() {
        std::panic::resume_unwind(panic);
    }
}

async fn every_history() {
    let started = Instant::now();
    let mut totals = Stats::default();
    let mut histories = 0;
    // Exploring past known defects (`STANDINGS_SIM_WITHOUT`) skips the regressions.
    let regressions = if std::env::var("STANDINGS_SIM_WITHOUT").is_ok() { Vec::new() } else { sim::regressions() };
    for regression in regressions {
        let (divergence, _) = sim::run(&regression.history).await;
        assert!(divergence.is_none(), "regression of seed {} ({}) diverges again: {divergence:?}", regression.seed, regression.defect);
        histories += 1;
    }
    if let Some(seed) = std::env::var("STANDINGS_SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        check(seed, &history(seed), &mut totals).await;
        return;
    }
    let fresh = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    eprintln!("simulation: fresh seed {fresh} (replay with STANDINGS_SIM_SEED={fresh})");
    let mut seeds = FIXED_SEEDS.to_vec();
    seeds.push(fresh);
    let mut next = fresh;
    for ran in 0.. {
        let seed = match seeds.get(ran) {
            Some(&seed) => seed,
            None if started.elapsed() < budget() => {
                next = next.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                next
            }
            None => break,
        };
        check(seed, &history(seed), &mut totals).await;
        histories += 1;
    }
    eprintln!(
        "simulation: {histories} histories, {} steps, {} faults, {} reads checked in {:.0?}",
        totals.steps,
        totals.faults,
        totals.reads,
        started.elapsed()
    );
}
