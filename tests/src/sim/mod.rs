//! A whole-system simulation (docs/testing.md#the-simulation): from a seed, a history of
//! operations and faults runs against the real functions, Redis and moto, and every answer and
//! every read is checked against a model written from the docs (`model`, which shares no code
//! with `shared/`). A divergence is shrunk to a short history, printed, and kept in
//! tests/sim/regressions.txt, which every run replays first.

mod admin;
mod arcade;
mod archive;
mod batch;
mod boards;
pub mod crossings;
mod cups;
pub mod faults;
mod jobs;
pub mod ladder;
pub mod model;
mod notify;
pub mod ops;
mod race;
mod reads;
mod reshard;
mod restart;
mod sign_ins;
mod voids;
pub mod world;

use ops::Op;
use serde::{Deserialize, Serialize};
pub use world::Stats;

pub const REGRESSIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sim/regressions.txt");

/// A regression: the history that found a defect, and what it was.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Regression {
    pub defect: String,
    pub seed: u64,
    pub history: Vec<Op>,
}

/// Every regression of tests/sim/regressions.txt (one JSON object a line; `#` lines are notes).
pub fn regressions() -> Vec<Regression> {
    let text = std::fs::read_to_string(REGRESSIONS).expect("tests/sim/regressions.txt is readable");
    text.lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("a regression line is not valid ({e}): {line}")))
        .collect()
}

/// Where a history diverged from the model.
#[derive(Debug, Clone)]
pub struct Divergence {
    pub step: usize,
    pub op: Op,
    pub message: String,
}

/// Runs `history` on a world of its own; the first divergence, if any, and the run's numbers.
pub async fn run(history: &[Op]) -> (Option<Divergence>, Stats) {
    let mut world = world::World::new().await;
    for (step, op) in history.iter().enumerate() {
        if let Err(message) = world.step(op).await {
            return (Some(Divergence { step, op: op.clone(), message }), world.stats);
        }
    }
    (None, world.stats)
}

/// A shorter history that still diverges (ops removed in halves, then quarters… then one at a
/// time, while it fails), within `budget`; the original if nothing shorter fails.
pub async fn shrink(history: &[Op], found: Divergence, budget: std::time::Duration) -> (Vec<Op>, Divergence) {
    let started = std::time::Instant::now();
    // A divergence that depends on timing may not come back: then the history up to it.
    let mut divergence = found;
    // Nothing after the divergence matters.
    let mut current: Vec<Op> = history[..=divergence.step].to_vec();
    let mut chunk = current.len() / 2;
    while chunk >= 1 && started.elapsed() < budget {
        let mut start = 0;
        let mut removed_any = false;
        while start < current.len() && started.elapsed() < budget {
            let end = (start + chunk).min(current.len());
            let candidate: Vec<Op> = current[..start].iter().chain(&current[end..]).cloned().collect();
            if let (Some(found), _) = run(&candidate).await {
                current = candidate[..=found.step].to_vec();
                divergence = found;
                removed_any = true;
            } else {
                start = end;
            }
        }
        if !removed_any {
            chunk /= 2;
        }
    }
    (current, divergence)
}
