//! A runtime board's definition changed and journaled in one call (`define_board.lua`).

use super::{CATALOG_CHANGES, CATALOG_LIVE, CATALOG_RETIRED, DEFINE_BOARD, REGISTER_BANS};
use crate::redis::error::StoreError;
use crate::redis::keys::Keys;
use crate::redis::settings::ReplicaWait;
use crate::redis::store::{Connection, ScriptCall};

/// What a change asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change<'a> {
    /// Create the board with this definition, unless the catalog holds `limit` boards.
    Put { definition: &'a str, limit: u32 },
    /// Mark the board ending (`why`: the reason and time, JSON).
    End { why: &'a str },
    /// Forget the board's definition (its end is done), keeping `retired` (why and when it
    /// ended, with the definition) in its place among the ended boards; a `tournament` is
    /// listed among the retired ones.
    Remove { retired: &'a str, tournament: bool },
    /// Replace the board's definition `expected` with `definition` (a tournament's record of
    /// an instance ended early).
    Replace { definition: &'a str, expected: &'a str },
    /// List every tournament whose deletion was done by a release before the list of retired
    /// ones, once.
    Index,
}

impl Change<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            Change::Put { .. } => "put",
            Change::End { .. } => "end",
            Change::Remove { .. } => "remove",
            Change::Replace { .. } => "replace",
            Change::Index => "index",
        }
    }
}

/// What the catalog did (`define_board.lua`'s reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defined {
    Created,
    /// The same definition was there: nothing written.
    Same,
    /// Another definition (or an ending board) holds the name: nothing written.
    Exists,
    /// The catalog holds its most boards: nothing written.
    Full,
    Ending,
    Removed,
    Replaced,
    /// The definition was not the one expected: nothing written.
    Changed,
    /// The tournaments retired before their list were listed (`Same`: they had been).
    Indexed,
    Unknown,
}

/// Applies `change` to `board` in the catalog and journals `entry` with it ('' journals nothing).
/// `wait`: the replicas that must hold the change before it is answered, as a board write's.
pub async fn define(
    conn: &mut Connection,
    keys: &Keys,
    board: &str,
    change: Change<'_>,
    entry: &str,
    wait: ReplicaWait,
) -> Result<Defined, StoreError> {
    let catalog = keys.catalog();
    let mut call = ScriptCall::new(&DEFINE_BOARD);
    call.key(catalog.definitions()).key(catalog.ending()).key(catalog.catalog_version()).key(catalog.journal()).key(catalog.guard());
    call.key(catalog.catalog_log()).key(catalog.retired_tournaments());
    call.arg(change.name()).arg(board);
    match change {
        Change::Put { definition, limit } => call.arg(definition).arg(limit),
        Change::End { why } => call.arg(why).arg(0),
        Change::Remove { retired, tournament } => call.arg(retired).arg(u8::from(tournament)),
        Change::Replace { definition, expected } => call.arg(definition).arg(expected),
        Change::Index => call.arg("").arg(0),
    };
    call.arg(entry);
    let reply: String = conn.run_script(&call, wait).await?;
    Ok(match reply.as_str() {
        "created" => Defined::Created,
        "same" => Defined::Same,
        "exists" => Defined::Exists,
        "full" => Defined::Full,
        "ending" => Defined::Ending,
        "removed" => Defined::Removed,
        "replaced" => Defined::Replaced,
        "changed" => Defined::Changed,
        "indexed" => Defined::Indexed,
        "unknown" => Defined::Unknown,
        other => return Err(StoreError::Protocol(format!("define_board answered {other:?}"))),
    })
}

/// What changed in the catalog after a version (`catalog_changes.lua`'s reply).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// The catalog's version now (`None`: never written, or lost).
    pub version: Option<u64>,
    /// Whether the catalog's guard says its history is all in Redis.
    pub born: bool,
    /// Whether the log names every change after the version asked about: when not, `changed`
    /// is empty and only a whole read tells what changed.
    pub complete: bool,
    /// Board -> (its definition, why it ends), each `None` when absent, for every board changed.
    pub changed: Vec<(String, Option<String>, Option<String>)>,
}

/// What changed in the catalog after version `held`: one round trip, at one version.
pub async fn changes(conn: &mut Connection, keys: &Keys, held: u64) -> Result<Changes, StoreError> {
    let catalog = keys.catalog();
    let mut call = ScriptCall::new(&CATALOG_CHANGES);
    call.key(catalog.definitions()).key(catalog.ending()).key(catalog.catalog_version()).key(catalog.catalog_log()).key(catalog.guard());
    call.arg(held).arg(crate::domain::guard::BORN);
    type Reply = (Option<u64>, bool, bool, Vec<(String, Option<String>, Option<String>)>);
    let (version, born, complete, changed): Reply = conn.run_script(&call, ReplicaWait::NONE).await?;
    Ok(Changes { version, born, complete, changed })
}

/// The runtime boards a function serves (`catalog_live.lua`'s reply): deleted boards'
/// tombstones left out (`redis::catalog::record` reads one by name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Live {
    /// The catalog's version (`None`: never written, or lost).
    pub version: Option<u64>,
    /// Whether the catalog's guard says its history is all in Redis.
    pub born: bool,
    /// Board -> (its definition, why it ends when it is being deleted).
    pub boards: Vec<LiveBoard>,
}

/// A board's name, definition and why it ends (when it is being deleted).
pub type LiveBoard = (String, String, Option<String>);

/// Every defined runtime board, at one version: one round trip.
pub async fn live(conn: &mut Connection, keys: &Keys) -> Result<Live, StoreError> {
    let catalog = keys.catalog();
    let mut call = ScriptCall::new(&CATALOG_LIVE);
    call.key(catalog.definitions()).key(catalog.ending()).key(catalog.catalog_version()).key(catalog.guard());
    call.arg(crate::domain::guard::BORN);
    let (version, born, boards): (Option<u64>, bool, Vec<LiveBoard>) = conn.run_script(&call, ReplicaWait::NONE).await?;
    Ok(Live { version, born, boards })
}

/// Up to `count` tournaments whose deletion is done, in name order after `after` (`None`: from
/// the first), each with its tombstone (`None`: none, which no deletion leaves;
/// `catalog_retired.lua`), and the catalog's guard state (`catalog::restoring` reads it): one
/// round trip.
pub async fn retired(
    conn: &mut Connection,
    keys: &Keys,
    after: Option<&str>,
    count: usize,
) -> Result<(redis::Value, Vec<(String, Option<String>)>), StoreError> {
    let catalog = keys.catalog();
    let mut call = ScriptCall::new(&CATALOG_RETIRED);
    call.key(catalog.retired_tournaments()).key(catalog.ending()).key(catalog.guard());
    // Exclusive, so never the index's own member '' (`Change::Index`).
    call.arg(format!("({}", after.unwrap_or_default())).arg(count);
    call.arg(crate::domain::guard::BORN).arg(crate::domain::guard::FENCE);
    conn.run_script(&call, ReplicaWait::NONE).await
}

/// The field of the banned users' record that says the bans made before it are in it.
const SEEDED: &str = "#seeded";

/// What a change of the deployment's banned users is (`register_bans.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BanRecord {
    Ban,
    Unban,
    /// The bans found on the boards when the record is first read: recorded once.
    Seed,
}

/// Records `users` as `change` says in the deployment's banned users, journaled with `entry`
/// ('' journals nothing). The users whose record changed.
pub async fn record_bans(
    conn: &mut Connection,
    keys: &Keys,
    change: BanRecord,
    users: &[String],
    now_ms: i64,
    entry: &str,
    wait: ReplicaWait,
) -> Result<Vec<String>, StoreError> {
    let catalog = keys.catalog();
    let mut call = ScriptCall::new(&REGISTER_BANS);
    call.key(catalog.banned_users()).key(catalog.journal()).key(catalog.guard());
    let op = match change {
        BanRecord::Ban => "ban",
        BanRecord::Unban => "unban",
        BanRecord::Seed => "seed",
    };
    call.arg(op).arg(now_ms).arg(entry).arg(SEEDED);
    for user in users {
        call.arg(user);
    }
    conn.run_script(&call, wait).await
}

/// The deployment's banned users, and whether the bans made before the record are in it.
pub async fn banned_users(conn: &mut Connection, keys: &Keys) -> Result<(Vec<String>, bool), StoreError> {
    let mut users: Vec<String> = redis::cmd("HKEYS").arg(keys.catalog().banned_users()).query_async(conn).await?;
    let seeded = users.iter().any(|user| user == SEEDED);
    users.retain(|user| user != SEEDED);
    Ok((users, seeded))
}
