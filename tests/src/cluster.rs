//! Redis Cluster helpers for assertions: who serves which slots (`CLUSTER NODES`), and SCAN on
//! every primary (a cluster's SCAN only walks the node it is sent to).

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, FromRedisValue};
use standings::redis::keys::BoardKeys;
use standings::redis::scripts::{MarkerSlot, marker_bucket};
use standings::redis::store::Connection;

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    pub id: String,
    pub host: String,
    pub port: u16,
    pub flags: Vec<String>,
    /// For a replica: the id of its primary.
    pub primary_id: Option<String>,
    /// Slot ranges this node serves (primaries), inclusive.
    pub slots: Vec<(u16, u16)>,
}

impl ClusterNode {
    pub fn is_primary(&self) -> bool {
        self.flags.iter().any(|f| f == "master")
    }

    /// Marked failing by this view of the cluster (`fail`) or suspected (`fail?`).
    pub fn is_failing(&self) -> bool {
        self.flags.iter().any(|f| f.starts_with("fail"))
    }

    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(first, last)| (first..=last).contains(&slot))
    }
}

/// Parses `CLUSTER NODES`: `<id> <ip:port@cport[,hostname]> <flags> <primary> <ping> <pong>
/// <epoch> <link> <slot>…`; migrating/importing markers (`[…]`) are skipped.
pub fn parse_cluster_nodes(text: &str) -> Vec<ClusterNode> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let address = fields[1].split(['@', ',']).next().unwrap();
            let (host, port) = address.rsplit_once(':').expect("CLUSTER NODES address is ip:port");
            let slots = fields[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .map(|s| match s.split_once('-') {
                    Some((first, last)) => (first.parse().unwrap(), last.parse().unwrap()),
                    None => (s.parse().unwrap(), s.parse().unwrap()),
                })
                .collect();
            ClusterNode {
                id: fields[0].to_owned(),
                host: host.to_owned(),
                port: port.parse().unwrap(),
                flags: fields[2].split(',').map(str::to_owned).collect(),
                primary_id: (fields[3] != "-").then(|| fields[3].to_owned()),
                slots,
            }
        })
        .collect()
}

/// Runs `cmd` on one node of a cluster, or on the standalone server.
async fn query_node<T: FromRedisValue>(conn: &Connection, node: Option<&ClusterNode>, cmd: Cmd) -> T {
    match (conn.cluster(), node) {
        (Some(cluster), Some(node)) => {
            let routing = SingleNodeRoutingInfo::ByAddress { host: node.host.clone(), port: node.port };
            let value = cluster.clone().route_command(cmd, RoutingInfo::SingleNode(routing)).await.unwrap();
            T::from_redis_value(value).unwrap()
        }
        _ => cmd.query_async(&mut conn.clone()).await.unwrap(),
    }
}

/// `INFO <section>` of one node (the standalone server, or any node of a cluster, where a
/// plain INFO would answer for every primary at once).
pub async fn info(conn: &Connection, section: &str) -> String {
    let mut info = redis::cmd("INFO");
    info.arg(section);
    match conn.cluster() {
        Some(cluster) => String::from_redis_value(
            cluster.clone().route_command(info, RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random)).await.unwrap(),
        )
        .unwrap(),
        None => info.query_async(&mut conn.clone()).await.unwrap(),
    }
}

/// The cluster as the node the connection picks sees it.
pub async fn cluster_nodes(conn: &Connection) -> Vec<ClusterNode> {
    let text: String = redis::cmd("CLUSTER").arg("NODES").query_async(&mut conn.clone()).await.unwrap();
    parse_cluster_nodes(&text)
}

/// Every key matching `pattern`: SCAN on the standalone server, or on every live primary.
pub async fn scan_all(conn: &Connection, pattern: &str) -> Vec<String> {
    let nodes = match conn.cluster() {
        None => vec![None],
        Some(_) => cluster_nodes(conn).await.into_iter().filter(|n| n.is_primary() && !n.is_failing()).map(Some).collect(),
    };
    let mut keys = Vec::new();
    for node in &nodes {
        let mut cursor = 0u64;
        loop {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor).arg("MATCH").arg(pattern).arg("COUNT").arg(1000);
            let (next, batch): (u64, Vec<String>) = query_node(conn, node.as_ref(), scan).await;
            keys.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    keys
}

/// The event ids marked on `board` (in the marker buckets of `now`'s local day in `tz` and its
/// neighbours), out of `event_ids`.
pub async fn marked<'a>(
    conn: &Connection,
    board: &BoardKeys,
    tz: Tz,
    event_ids: impl IntoIterator<Item = &'a str>,
    now: DateTime<Utc>,
) -> HashSet<&'a str> {
    let day = marker_bucket(now, tz).day;
    let mut marked = HashSet::new();
    for event_id in event_ids {
        let slot = MarkerSlot::of(event_id);
        for bucket in [day - 1, day, day + 1] {
            let mut hexists = redis::cmd("HEXISTS");
            hexists.arg(board.marker_bucket(bucket, slot.shard)).arg(&slot.field[..]);
            if query_node::<bool>(conn, None, hexists).await {
                marked.insert(event_id);
            }
        }
    }
    marked
}

/// How many event markers `board` holds, in all its buckets.
pub async fn marker_count(conn: &Connection, board: &BoardKeys) -> u64 {
    let mut count = 0;
    for bucket in scan_all(conn, &board.marker_bucket_pattern()).await {
        let mut hlen = redis::cmd("HLEN");
        hlen.arg(bucket);
        count += query_node::<u64>(conn, None, hlen).await;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_nodes_lines_are_parsed() {
        let text = "\
e7d1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 7000 [5461->-07c3]
07c3 127.0.0.1:30004@40004,host-4 slave e7d1 0 1426238317239 4 connected
9a1b 127.0.0.1:30002@40002 master,fail - 1 2 2 disconnected
";
        let nodes = parse_cluster_nodes(text);
        assert_eq!(nodes.len(), 3);
        assert_eq!((nodes[0].port, nodes[0].is_primary(), nodes[0].is_failing()), (30001, true, false));
        assert_eq!(nodes[0].slots, [(0, 5460), (7000, 7000)]);
        assert!(nodes[0].serves(5460) && nodes[0].serves(7000) && !nodes[0].serves(5461));
        assert_eq!((nodes[1].host.as_str(), nodes[1].primary_id.as_deref(), nodes[1].is_primary()), ("127.0.0.1", Some("e7d1"), false));
        assert!(nodes[2].is_failing());
    }
}
