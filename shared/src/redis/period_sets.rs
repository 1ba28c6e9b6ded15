//! A board's period sets in every layout it has, found at once: one `SCAN … MATCH` of each
//! primary (`Keys::period_sets_glob`), not one a shard. A move's last step, fenced, needs the
//! sets of both layouts (the compare, then each new shard's records); a scan of a node costs
//! O(its keys) whatever the pattern, so one a shard made the fenced step scale with the shard
//! count times the node's keys (measured: 25 scans, 24 s of a 1 → 12 move's 25 s of refused
//! writes, BENCHMARKS.md).

use std::collections::BTreeSet;

use super::error::StoreError;
use super::keys::{BoardKeys, Keys};
use super::store::Connection;

/// Every key of a board's period sets, whichever layout holds them.
pub struct PeriodSets(Vec<String>);

impl PeriodSets {
    /// `board`'s period sets on every primary, read now.
    pub async fn scan(conn: &mut Connection, keys: &Keys, board: &str) -> Result<Self, StoreError> {
        let glob = keys.period_sets_glob(board);
        let mut found = Vec::new();
        for node in conn.primaries().await? {
            let mut cursor = 0;
            loop {
                let (next, page) = conn.scan_page(&node, cursor, &glob).await?;
                found.extend(page);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        found.sort_unstable();
        found.dedup();
        Ok(Self(found))
    }

    /// Those of `relatives` (keys relative to a board's) that exist on `shards`, read now: one
    /// pipelined `EXISTS` round a shard (its keys share its slot), no scan. For a move's last
    /// step once its compare while writes went on found the sets (`Keys::period_sets_glob`) and
    /// the lines moved since named those they wrote.
    pub async fn among(conn: &mut Connection, shards: &[BoardKeys], relatives: &BTreeSet<String>) -> Result<Self, StoreError> {
        let mut found = Vec::new();
        for shard in shards {
            let keys: Vec<String> = relatives.iter().map(|relative| shard.relative(relative)).collect();
            if keys.is_empty() {
                continue;
            }
            let mut exists = redis::pipe();
            for key in &keys {
                exists.exists(key);
            }
            let held: Vec<bool> = exists.query_async(conn).await?;
            found.extend(keys.into_iter().zip(held).filter_map(|(key, held)| held.then_some(key)));
        }
        found.sort_unstable();
        found.dedup();
        Ok(Self(found))
    }

    /// The period sets of `shard` (the glob may match others: a board named `<board>:…`).
    pub fn of(&self, shard: &BoardKeys) -> Vec<String> {
        let own = shard.period_pattern();
        let stem = own.trim_end_matches('*');
        self.0.iter().filter(|key| key.starts_with(stem)).cloned().collect()
    }
}
