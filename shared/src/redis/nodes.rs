//! A read of several shards sent as one pipeline a node (docs/scaling.md#reads): each shard's
//! part (a transaction, or a script call) keeps its own atomicity, and the parts of the shards
//! a node holds travel together, the nodes in parallel. Standalone, every shard is on the one
//! server: one pipeline in all.
//!
//! A cluster's shards are grouped by which primary holds their slot, as `CLUSTER SLOTS` last
//! said (`node_map`). The pipeline is routed by its first part's slot on a client that never
//! retries, so a map gone stale (a slot moved, a failover) fails it at once: a part answered
//! with any error, or of a pipeline that failed, is not taken from the pipeline but sent again
//! on its own by the caller, as before this module, where the cluster client follows redirects
//! and a script the node lacks is loaded. Reads only: sending a part twice changes nothing.
//! A node without a script (restarted, failed over, its scripts flushed) answers its script
//! parts NOSCRIPT: the scripts are loaded once (on every node) and that node's unanswered
//! parts go again in one pipeline, instead of each alone (three requests a part).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::join_all;
use redis::aio::ConnectionLike;
use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};
use redis::{Pipeline, Value};

use super::node_map::{Ranges, node_of, parse_slots};
use super::store::{Connection, ScriptCall};

/// One shard's (or one slot's) part of a read.
pub enum Part<'a> {
    /// Commands as they are; its answer is their replies, as an array.
    Plain(&'a Pipeline),
    /// Commands run in one `MULTI`; its answer is `EXEC`'s array.
    Atomic(&'a Pipeline),
    /// One script call; its answer is the script's reply.
    Script(&'a ScriptCall<'a>),
}

impl Part<'_> {
    /// Adds the part to `pipe`; how many replies it gets there.
    fn add_to(&self, pipe: &mut Pipeline) -> usize {
        match self {
            Part::Plain(commands) => {
                let mut n = 0;
                for command in commands.cmd_iter() {
                    pipe.add_command(command.clone());
                    n += 1;
                }
                n
            }
            Part::Atomic(commands) => {
                pipe.cmd("MULTI");
                let mut n = 2;
                for command in commands.cmd_iter() {
                    pipe.add_command(command.clone());
                    n += 1;
                }
                pipe.cmd("EXEC");
                n
            }
            Part::Script(call) => {
                pipe.add_command(call.evalsha());
                1
            }
        }
    }
}

/// Whether a reply holds an error anywhere (a transaction's inside it included).
fn failed(value: &Value) -> bool {
    match value {
        Value::ServerError(_) => true,
        Value::Array(items) => items.iter().any(failed),
        _ => false,
    }
}

/// Whether a reply says the node lacks the script called.
fn no_script(value: &Value) -> bool {
    matches!(value, Value::ServerError(error) if error.code() == "NOSCRIPT")
}

/// Whether a reply says the part went to a node that does not hold its slot.
fn redirected(value: &Value) -> bool {
    match value {
        Value::ServerError(error) => matches!(error.code(), "MOVED" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN" | "CROSSSLOT"),
        Value::Array(items) => items.iter().any(redirected),
        _ => false,
    }
}

impl Connection {
    /// Sends `parts`, each routed by the key given with it (a key of the shard's slot), one
    /// pipeline a node; each part's answer, or `None` for a part to send again on its own (it
    /// was answered with an error, or its node could not be asked).
    pub(super) async fn per_node(&self, parts: &[(&str, Part<'_>)]) -> Vec<Option<Value>> {
        let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        match self.cluster() {
            None => groups.entry(String::new()).or_default().extend(0..parts.len()),
            Some(_) => {
                let Some(ranges) = self.node_ranges().await else { return vec![None; parts.len()] };
                for (i, (key, _)) in parts.iter().enumerate() {
                    let slot = super::keys::slot(key) as u16;
                    // A slot no primary holds (a cluster being set up): its part goes alone.
                    let node = node_of(&ranges, slot).map_or_else(|| format!("?{i}"), str::to_owned);
                    groups.entry(node).or_default().push(i);
                }
            }
        }
        let sent = join_all(groups.into_values().map(|members| self.send_group(parts, members))).await;
        let mut answers = vec![None; parts.len()];
        let mut again = Vec::new();
        for (members, replies, lacked) in sent {
            if lacked {
                again.push(members.iter().zip(&replies).filter(|(_, reply)| reply.is_none()).map(|(i, _)| *i).collect::<Vec<_>>());
            }
            for (i, reply) in members.into_iter().zip(replies) {
                answers[i] = reply;
            }
        }
        if again.is_empty() || !self.load_scripts(parts, again.iter().flatten()).await {
            return answers;
        }
        for (members, replies, _) in join_all(again.into_iter().map(|members| self.send_group(parts, members))).await {
            for (i, reply) in members.into_iter().zip(replies) {
                answers[i] = reply;
            }
        }
        answers
    }

    /// Loads the scripts of the script parts among `members`, each once (`SCRIPT LOAD` goes to
    /// every node); whether all loaded.
    async fn load_scripts(&self, parts: &[(&str, Part<'_>)], members: impl Iterator<Item = &usize>) -> bool {
        let mut scripts: Vec<&redis::Script> = Vec::new();
        for i in members {
            if let Part::Script(call) = &parts[*i].1
                && !scripts.iter().any(|script| script.get_hash() == call.script().get_hash())
            {
                scripts.push(call.script());
            }
        }
        let mut conn = self.clone();
        for script in scripts {
            if script.load_async(&mut conn).await.is_err() {
                return false;
            }
        }
        true
    }

    /// The cluster's slot ranges, read with `CLUSTER SLOTS` when not known yet.
    async fn node_ranges(&self) -> Option<Ranges> {
        if let Some(ranges) = self.nodes().get() {
            return Some(ranges);
        }
        let reply: Value = redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut self.clone()).await.ok()?;
        let ranges = Arc::new(parse_slots(reply)?);
        self.nodes().set(Some(ranges.clone()));
        Some(ranges)
    }

    /// One node's parts in one pipeline: `members` (indexes into `parts`), their answers, and
    /// whether a script part found the node without its script.
    async fn send_group(&self, parts: &[(&str, Part<'_>)], members: Vec<usize>) -> (Vec<usize>, Vec<Option<Value>>, bool) {
        let mut pipe = redis::pipe();
        let counts: Vec<usize> = members.iter().map(|i| parts[*i].1.add_to(&mut pipe)).collect();
        let total = counts.iter().sum();
        if total == 0 {
            return (members.clone(), vec![Some(Value::Array(Vec::new())); members.len()], false);
        }
        let mut conn = self.clone();
        let replies = match self.cluster() {
            None => conn.req_packed_commands(&pipe, 0, total).await,
            Some(_) => {
                let Some(mut cluster) = self.nodes().unretried().await else {
                    return (members.clone(), vec![None; members.len()], false);
                };
                self.count_round_trip();
                let reads_only = members.iter().all(|i| matches!(parts[*i].1, Part::Atomic(_) | Part::Plain(_)));
                let addr = if reads_only && self.nodes().reads_replicas() { SlotAddr::ReplicaOptional } else { SlotAddr::Master };
                let route = Route::new(super::keys::slot(parts[members[0]].0) as u16, addr);
                cluster.route_pipeline(pipe, 0, total, SingleNodeRoutingInfo::SpecificNode(route)).await
            }
        };
        // Failed whole (a node gone, a part redirected): the map is read again before the next
        // read, unless the redirect was a slot being migrated (`ASK`: the map is right).
        let replies = match replies {
            Ok(replies) if replies.len() == total => replies,
            failed => {
                if !failed.as_ref().is_err_and(|e| matches!(e.code(), Some("ASK" | "TRYAGAIN"))) {
                    self.nodes().set(None);
                }
                return (members.clone(), vec![None; members.len()], false);
            }
        };
        let mut replies = replies.into_iter();
        let mut answers = Vec::with_capacity(members.len());
        let (mut stale, mut lacked) = (false, false);
        for (i, count) in members.iter().zip(counts) {
            let part: Vec<Value> = replies.by_ref().take(count).collect();
            stale |= part.iter().any(redirected);
            lacked |= matches!(parts[*i].1, Part::Script(_)) && part.iter().any(no_script);
            // A transaction's answer is its last reply (`EXEC`'s); the others are `MULTI`'s OK
            // and each command's QUEUED, where a refused command shows.
            answers.push(match (part.iter().any(failed), &parts[*i].1) {
                (true, _) => None,
                (false, Part::Plain(_)) => Some(Value::Array(part)),
                (false, _) => part.into_iter().last(),
            });
        }
        if stale {
            self.nodes().set(None);
        }
        (members, answers, lacked)
    }
}
