//! Which primary holds each slot, as a function last read it (`CLUSTER SLOTS`), and the cluster
//! client that sends one pipeline a node (`nodes`): read once a container, again after a
//! node's pipeline failed.

use std::sync::{Arc, RwLock};

use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{FromRedisValue, Value};
use tokio::sync::OnceCell;

/// Slot ranges `(first, last)` and the address of the primary holding each, sorted.
pub(super) type Ranges = Arc<Vec<(u16, u16, String)>>;

/// Which primary holds each slot, as this container last read it; empty until first needed.
#[derive(Default)]
pub struct NodeMap {
    ranges: RwLock<Option<Ranges>>,
    /// The cluster client the pipelines go on, with no retries (`Store::connect`): the cluster
    /// client follows a redirect by sending the whole pipeline to the node named, where the
    /// other parts are redirected back, until its retries run out.
    unretried: Option<(ClusterClient, OnceCell<ClusterConnection>)>,
    /// `REDIS_READ_FROM_REPLICAS`: reads and transactions of reads go to a replica of the
    /// primary, as the cluster client sends a read-only command; script calls go to the
    /// primary, as it does.
    from_replicas: bool,
}

impl NodeMap {
    pub fn new(from_replicas: bool, unretried: Option<ClusterClient>) -> Self {
        Self { ranges: RwLock::default(), unretried: unretried.map(|client| (client, OnceCell::new())), from_replicas }
    }

    /// The connection of the client with no retries (`None`: standalone, or not connected).
    pub(super) async fn unretried(&self) -> Option<ClusterConnection> {
        let (client, connection) = self.unretried.as_ref()?;
        connection.get_or_try_init(|| client.get_async_connection()).await.ok().cloned()
    }

    /// Whether reads go to replicas (`REDIS_READ_FROM_REPLICAS`).
    pub(super) fn reads_replicas(&self) -> bool {
        self.from_replicas
    }

    /// Replaces the map as a stale read would leave it (a fault for tests): every slot on the
    /// node at `address`.
    pub fn pretend_all_on(&self, address: &str) {
        self.set(Some(Arc::new(vec![(0, 16383, address.to_owned())])));
    }

    pub(super) fn get(&self) -> Option<Ranges> {
        self.ranges.read().ok().and_then(|ranges| ranges.clone())
    }

    pub(super) fn set(&self, ranges: Option<Ranges>) {
        if let Ok(mut held) = self.ranges.write() {
            *held = ranges;
        }
    }
}

/// The primary holding `slot` in `ranges`.
pub(super) fn node_of(ranges: &[(u16, u16, String)], slot: u16) -> Option<&str> {
    let at = ranges.partition_point(|(_, last, _)| *last < slot);
    ranges.get(at).filter(|(first, _, _)| *first <= slot).map(|(_, _, node)| node.as_str())
}

/// `CLUSTER SLOTS`' reply as ranges: `[[first, last, [host, port, …], replicas…]…]`.
pub(super) fn parse_slots(reply: Value) -> Option<Vec<(u16, u16, String)>> {
    let Value::Array(entries) = reply else { return None };
    let mut ranges = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(fields) = entry else { return None };
        let mut fields = fields.into_iter();
        let first = u16::from_redis_value(fields.next()?).ok()?;
        let last = u16::from_redis_value(fields.next()?).ok()?;
        let (host, port): (String, u16) = match fields.next()? {
            Value::Array(node) => {
                (String::from_redis_value(node.first()?.clone()).ok()?, u16::from_redis_value(node.get(1)?.clone()).ok()?)
            }
            _ => return None,
        };
        ranges.push((first, last, format!("{host}:{port}")));
    }
    ranges.sort();
    Some(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_found_in_its_range_and_nowhere_else() {
        let ranges = vec![(0, 5460, "a".to_owned()), (5461, 10922, "b".to_owned()), (10923, 16383, "c".to_owned())];
        assert_eq!(node_of(&ranges, 0), Some("a"));
        assert_eq!(node_of(&ranges, 5460), Some("a"));
        assert_eq!(node_of(&ranges, 5461), Some("b"));
        assert_eq!(node_of(&ranges, 16383), Some("c"));
        let gap = vec![(0, 99, "a".to_owned()), (200, 300, "b".to_owned())];
        assert_eq!(node_of(&gap, 150), None);
        assert_eq!(node_of(&gap, 301), None);
    }

    #[test]
    fn cluster_slots_replies_become_sorted_ranges() {
        let node =
            |host: &str, port: i64| Value::Array(vec![Value::BulkString(host.into()), Value::Int(port), Value::BulkString(b"id".to_vec())]);
        let reply = Value::Array(vec![
            Value::Array(vec![Value::Int(5461), Value::Int(16383), node("127.0.0.1", 7001), node("127.0.0.1", 7004)]),
            Value::Array(vec![Value::Int(0), Value::Int(5460), node("127.0.0.1", 7000)]),
        ]);
        assert_eq!(parse_slots(reply), Some(vec![(0, 5460, "127.0.0.1:7000".to_owned()), (5461, 16383, "127.0.0.1:7001".to_owned())]));
        assert_eq!(parse_slots(Value::Nil), None);
    }
}
