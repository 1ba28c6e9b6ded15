//! Every benchmark scenario, in the order of issue 9. Add one as a module with a
//! `run(&Bench) -> Report` and list it in `ALL`; the run deletes every key under the bench
//! prefix after each scenario.

mod archival;
mod around;
mod batch;
mod bootstrap;
mod hot_synthesis;
mod ingest;
mod ingest_boards;
mod league;
mod memory;
mod online_reshard;
mod queue;
mod restore;
mod rollback;
mod rpo;
mod sharded;
mod top30;
mod tournament;
mod tournament_list;

use futures::future::BoxFuture;

use crate::harness::{Bench, BenchError, Report};

pub struct Scenario {
    /// The name chosen on the command line.
    pub name: &'static str,
    pub run: for<'a> fn(&'a Bench) -> BoxFuture<'a, Result<Report, BenchError>>,
}

pub const ALL: &[Scenario] = &[
    Scenario { name: "ingest", run: |bench| Box::pin(ingest::run(bench)) },
    Scenario { name: "batch", run: |bench| Box::pin(batch::run(bench)) },
    Scenario { name: "top-30", run: |bench| Box::pin(top30::run(bench)) },
    Scenario { name: "around-me", run: |bench| Box::pin(around::run(bench)) },
    Scenario { name: "hot-synthesis", run: |bench| Box::pin(hot_synthesis::run(bench)) },
    Scenario { name: "archival", run: |bench| Box::pin(archival::run(bench)) },
    Scenario { name: "memory", run: |bench| Box::pin(memory::run(bench)) },
    Scenario { name: "bootstrap", run: |bench| Box::pin(bootstrap::run(bench)) },
    Scenario { name: "queue", run: |bench| Box::pin(queue::run(bench)) },
    Scenario { name: "journal-rpo", run: |bench| Box::pin(rpo::run(bench)) },
    Scenario { name: "league-close", run: |bench| Box::pin(league::run(bench)) },
    Scenario { name: "journal-restore", run: |bench| Box::pin(restore::run(bench)) },
    Scenario { name: "sharded-board", run: |bench| Box::pin(sharded::run(bench)) },
    Scenario { name: "tournament", run: |bench| Box::pin(tournament::run(bench)) },
    Scenario { name: "tournament-list", run: |bench| Box::pin(tournament_list::run(bench)) },
    Scenario { name: "journal-rollback", run: |bench| Box::pin(rollback::run(bench)) },
    Scenario { name: "online-reshard", run: |bench| Box::pin(online_reshard::run(bench)) },
];
