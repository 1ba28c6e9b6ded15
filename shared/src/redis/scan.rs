//! Jobs that must see keys they cannot name (a season's release, a move's records, the
//! profiles' move to their shards): `SCAN` on the node holding one hash tag, or on every
//! primary. O(the node's keys): never on a request's path.

use redis::FromRedisValue;

use super::error::StoreError;
use super::store::Connection;

impl Connection {
    /// Every key matching `pattern` on the node holding `key`'s slot (`SCAN … MATCH`, a page
    /// at a time): the keys of one hash tag, found without knowing their names. O(the node's
    /// keys): for rare jobs (a season's release), never a request.
    pub async fn scan_slot_of(&mut self, key: &str, pattern: &str) -> Result<Vec<String>, StoreError> {
        use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
        let mut found = Vec::new();
        let mut cursor = 0u64;
        loop {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor).arg("MATCH").arg(pattern).arg("COUNT").arg(1000);
            let (next, keys): (u64, Vec<String>) = match self.cluster().cloned() {
                None => scan.query_async(self).await?,
                Some(cluster) => {
                    self.count_round_trip();
                    let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::with_key(key, SlotAddr::Master)));
                    let reply = cluster.clone().route_command(scan, route).await?;
                    FromRedisValue::from_redis_value(reply).map_err(|e| StoreError::Protocol(format!("SCAN: {e}")))?
                }
            };
            found.extend(keys);
            if next == 0 {
                return Ok(found);
            }
            cursor = next;
        }
    }

    /// The primaries to SCAN for a job that must see every key: `[None]` standalone, each
    /// primary's address on a cluster. A primary marked failing (`fail` or `fail?`) is an
    /// error: its keys would be missed.
    pub async fn primaries(&mut self) -> Result<Vec<Option<(String, u16)>>, StoreError> {
        if self.cluster().is_none() {
            return Ok(vec![None]);
        }
        let text: String = redis::cmd("CLUSTER").arg("NODES").query_async(self).await?;
        let mut primaries = Vec::new();
        for line in text.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            let Some(flags) = parts.get(2).filter(|flags| flags.contains("master")) else { continue };
            if flags.contains("fail") {
                return Err(StoreError::Protocol(format!("a primary is failing ({flags}): its keys cannot be scanned")));
            }
            let address = parts.get(1).and_then(|a| a.split('@').next()).and_then(|a| a.rsplit_once(':'));
            let Some((host, port)) = address.and_then(|(host, port)| Some((host.to_owned(), port.parse().ok()?))) else { continue };
            primaries.push(Some((host, port)));
        }
        Ok(primaries)
    }

    /// One page of `SCAN cursor MATCH pattern COUNT 1000` on `node` (`primaries`): the next
    /// cursor (0: done) and the keys. O(the node's keys) over all pages: for a one-off job (the
    /// move of profiles to their shards), never a request.
    pub async fn scan_page(&mut self, node: &Option<(String, u16)>, cursor: u64, pattern: &str) -> Result<(u64, Vec<String>), StoreError> {
        use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor).arg("MATCH").arg(pattern).arg("COUNT").arg(1000);
        match (self.cluster().cloned(), node) {
            (Some(mut cluster), Some((host, port))) => {
                self.count_round_trip();
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host: host.clone(), port: *port });
                let reply = cluster.route_command(scan, route).await?;
                FromRedisValue::from_redis_value(reply).map_err(|e| StoreError::Protocol(format!("SCAN: {e}")))
            }
            _ => Ok(scan.query_async(self).await?),
        }
    }
}
