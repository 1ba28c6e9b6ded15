//! Reads of many boards in one round trip (a page of `GET /v1/tournaments`): each board's
//! commands touch keys of one slot, so the groups are pipelined per slot (all in one pipeline on
//! a standalone Redis) and the pipelines sent at once; the cluster client keeps one connection
//! a node, so the pipelines of one node share it.

use std::collections::HashMap;

use futures::future::try_join_all;
use redis::cluster_routing::Slot;
use redis::{Cmd, Value};

use super::error::StoreError;
use super::store::Store;

/// Commands on keys of one slot, named by any key of them.
pub struct Group {
    pub key: String,
    pub commands: Vec<Cmd>,
}

/// Each group's replies, in the groups' order and each group's commands' order.
pub async fn read(store: &Store, groups: &[Group]) -> Result<Vec<Vec<Value>>, StoreError> {
    let mut by_slot: HashMap<Option<Slot>, Vec<usize>> = HashMap::new();
    for (index, group) in groups.iter().enumerate() {
        by_slot.entry(store.is_cluster().then(|| Slot::for_key(&group.key))).or_default().push(index);
    }
    let conn = store.connection().await?;
    let replies = try_join_all(by_slot.values().map(|indices| {
        let mut pipe = redis::pipe();
        for &index in indices {
            for command in &groups[index].commands {
                pipe.add_command(command.clone());
            }
        }
        let mut conn = conn.clone();
        async move { pipe.query_async::<Vec<Value>>(&mut conn).await }
    }))
    .await?;
    let mut answers = vec![Vec::new(); groups.len()];
    for (indices, values) in by_slot.values().zip(replies) {
        let mut values = values.into_iter();
        for &index in indices {
            answers[index] = values.by_ref().take(groups[index].commands.len()).collect();
        }
    }
    Ok(answers)
}
