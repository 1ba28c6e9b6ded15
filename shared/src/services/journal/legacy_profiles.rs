//! Profiles journaled by releases before profile shards (`_profiles`, lines without effects)
//! come back as the first part of each shard's restore (docs/journal.md#profiles), as the
//! effects of a replace (`DEL`, `HSET`) under the shard's claims: a profile intact in Redis is
//! left as it is, and the shard's own lines (the drain's move of each profile, changes since)
//! apply after them, in order.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::archive::objects::{Objects, journal_objects, read_lines};
use crate::domain::ids;
use crate::domain::journal::{Command, Effects, Line};
use crate::redis::journal;
use crate::redis::keys::{Keys, PROFILES_JOURNAL};
use crate::redis::store::Connection;
use crate::services::profiles::Profile;

use super::error::RestoreError;

/// The checkpoint of a shard's restore while it applies these (every stream id is above it):
/// applied again whole after a stop, a replace being the same however often it is applied.
pub(super) const PHASE: &str = "0-1";

const TAIL_PAGE: usize = 1_000;

/// The last profile each user of profile shard `shard` had in the journal before shards, as
/// the effects that make it: a profile is replaced whole, so only the last change counts.
pub(super) async fn effects<O: Objects>(
    objects: &O,
    keys: &Keys,
    conn: &mut Connection,
    shard: &str,
) -> Result<Vec<Effects>, RestoreError> {
    let shard_journal = keys.board(shard).journal();
    let mut last: BTreeMap<String, Profile> = BTreeMap::new();
    let mut take = |line: &Line| {
        let field = |name: &str| line.entry.get(name).and_then(Value::as_str);
        let Some(user_id) = field("user_id") else { return };
        if field("kind") != Some("profile") || ids::validate_id("user_id", user_id).is_err() {
            return;
        }
        if keys.profile_shard_journal(user_id).journal() != shard_journal {
            return;
        }
        // As the release that wrote it took it (today's rules are not asked again, as for every
        // line a restore applies): the move to the shards keeps it too.
        let parsed = line.entry.get("profile").cloned().map(serde_json::from_value::<Profile>);
        if let Some(Ok(profile)) = parsed {
            last.insert(user_id.to_owned(), profile);
        }
    };
    for object in journal_objects(objects, keys.prefix(), PROFILES_JOURNAL).await? {
        read_lines(objects, &object).await?.iter().for_each(&mut take);
    }
    let legacy = keys.board(PROFILES_JOURNAL);
    let mut after: Option<String> = None;
    loop {
        let page = journal::after(conn, &legacy, PROFILES_JOURNAL, after.as_deref(), TAIL_PAGE).await?;
        let Some(newest) = page.last() else { break };
        after = Some(newest.id.clone());
        page.iter().for_each(&mut take);
    }
    Ok(last.into_iter().map(|(user_id, profile)| replace(&user_id, &profile)).collect())
}

fn replace(user_id: &str, profile: &Profile) -> Effects {
    let key = Keys::profile_relative(user_id);
    let mut commands = vec![Command { name: "DEL".into(), key: key.clone(), args: Vec::new() }];
    let fields = profile.fields();
    if !fields.is_empty() {
        let args = fields.iter().flat_map(|(field, value)| [field.as_bytes().to_vec(), value.as_bytes().to_vec()]).collect();
        commands.push(Command { name: "HSET".into(), key, args });
    }
    Effects { commands, expiries: Vec::new() }
}
