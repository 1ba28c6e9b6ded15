//! A sharded score board for the tests of reads per node (`sharded_nodes.rs`,
//! `faults/noscript_reads.rs`): its definition, its period sets, and every entry of them read
//! whole, the oracle of what a read over the shards answers.

use standings::domain::config::Config;
use standings::domain::period::Period;
use standings::redis::sharded::ShardSet;
use standings::redis::store::Connection;

use crate::TestApp;

/// A best-kept, descending score board `name` over `shards` shards, one all-time period.
pub fn best_scores(name: &str, shards: u32) -> Config {
    let board = format!(
        "[[boards]]\nname = \"{name}\"\nkind = \"scores\"\nkeep = \"best\"\norder = \"desc\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nshards = {shards}\n"
    );
    Config::parse(&board).unwrap()
}

/// The sets of `period` in each of the board's shards (no guard: the journal is off).
pub fn period_sets(app: &TestApp, name: &str, shards: u32, period: &Period) -> Vec<ShardSet> {
    app.keys
        .layout(name, shards)
        .all()
        .iter()
        .map(|keys| ShardSet { set: keys.period(period), guard: None, kept: None, closed: None })
        .collect()
}

/// Every entry of `sets`, read whole, in rank order (`ZREVRANGE`'s over all of them).
pub async fn in_rank_order(conn: &mut Connection, sets: &[ShardSet]) -> Vec<(String, f64)> {
    let mut all: Vec<(String, f64)> = Vec::new();
    for set in sets {
        let entries: Vec<(String, f64)> =
            redis::cmd("ZRANGE").arg(&set.set).arg(0).arg(-1).arg("WITHSCORES").query_async(conn).await.unwrap();
        all.extend(entries);
    }
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    all
}
