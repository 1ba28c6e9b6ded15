//! Every benchmark scenario. Add one as a module with a `run(&Bench)` and list it in `ALL`.

mod hot_synthesis;

use futures::future::BoxFuture;

use crate::harness::{Bench, BenchError, Report};

pub struct Scenario {
    /// The name chosen on the command line.
    pub name: &'static str,
    pub run: for<'a> fn(&'a Bench) -> BoxFuture<'a, Result<Report, BenchError>>,
}

pub const ALL: &[Scenario] = &[Scenario { name: "hot-synthesis", run: |bench| Box::pin(hot_synthesis::run(bench)) }];
