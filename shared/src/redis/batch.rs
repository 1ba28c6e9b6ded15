//! Reads of many boards in one round trip (a page of `GET /v1/tournaments`, the profiles of a
//! page): each group's commands touch keys of one slot, and the groups go out one pipeline a
//! node (`nodes`: all in one pipeline on a standalone Redis), the nodes at once.

use futures::future::try_join_all;
use redis::{Cmd, Pipeline, Value};

use super::error::StoreError;
use super::nodes::Part;
use super::store::Store;

/// Commands on keys of one slot, named by any key of them.
pub struct Group {
    pub key: String,
    pub commands: Vec<Cmd>,
}

/// Each group's replies, in the groups' order and each group's commands' order.
pub async fn read(store: &Store, groups: &[Group]) -> Result<Vec<Vec<Value>>, StoreError> {
    let conn = store.connection().await?;
    let pipes: Vec<Pipeline> = groups
        .iter()
        .map(|group| {
            let mut pipe = redis::pipe();
            for command in &group.commands {
                pipe.add_command(command.clone());
            }
            pipe
        })
        .collect();
    let parts: Vec<(&str, Part)> = groups.iter().zip(&pipes).map(|(group, pipe)| (group.key.as_str(), Part::Plain(pipe))).collect();
    let answers = conn.per_node(&parts).await;
    try_join_all(pipes.iter().zip(answers).map(|(pipe, answer)| {
        let mut conn = conn.clone();
        async move {
            match answer {
                Some(Value::Array(values)) => Ok(values),
                // Not answered in its node's pipeline: on its own, redirects followed.
                _ => pipe.query_async::<Vec<Value>>(&mut conn).await.map_err(StoreError::from),
            }
        }
    }))
    .await
}
