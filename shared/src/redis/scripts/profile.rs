//! A profile's change and its journal line in one call (`put_profile.lua`).

use super::PUT_PROFILE;
use crate::redis::error::StoreError;
use crate::redis::keys::Keys;
use crate::redis::store::Connection;

/// How a profile is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// A change: the profile is replaced whole.
    Replace,
    /// The drain moving a profile of the layout before shards: written only where the user
    /// has none yet (a change made since wins).
    Move,
}

/// Writes `user_id`'s profile as `fields` (none: cleared) and journals `entry` with it ('':
/// nothing journaled). False when a `Move` found a profile there.
pub async fn put(
    conn: &mut Connection,
    keys: &Keys,
    user_id: &str,
    how: Put,
    entry: &str,
    fields: &[(&str, &str)],
) -> Result<bool, StoreError> {
    let shard = keys.profile_shard_journal(user_id);
    let mut call = PUT_PROFILE.key(keys.profile(user_id));
    call.key(shard.journal()).key(shard.restore_claims());
    call.arg(match how {
        Put::Replace => "put",
        Put::Move => "move",
    })
    .arg(entry);
    for (field, value) in fields {
        call.arg(*field).arg(*value);
    }
    let written: u8 = call.invoke_async(conn).await?;
    Ok(written == 1)
}
