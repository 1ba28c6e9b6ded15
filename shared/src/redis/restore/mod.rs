//! A restore's writes (docs/journal.md#restore): its lock, its checkpoint, and runs of journal
//! lines whose recorded effects it applies with `restore_lines.lua`, each run with its
//! checkpoint in one call.

pub mod birth;
mod campaign;
pub mod older;
pub mod rollback;
mod run;

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::json;

use crate::domain::guard;
use crate::redis::error::StoreError;
use crate::redis::keys::BoardKeys;
use crate::redis::scripts;
use crate::redis::store::Connection;

pub use campaign::Campaign;
pub use run::Run;

/// Redis's clock as the restore reads it: the restore drops commands on keys whose recorded
/// life had ended by then (`Run::push`), so it goes by the clock their expiries are in. Read
/// once, then moved on by the restore's own: a key that expires meanwhile is written and
/// expires at once (its `PEXPIREAT` is in the past), as if it had not been restored.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    redis_ms: i64,
    read_at: Instant,
}

impl Clock {
    pub async fn read(conn: &mut Connection) -> Result<Self, StoreError> {
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await?;
        Ok(Self { redis_ms: secs * 1000 + micros / 1000, read_at: Instant::now() })
    }

    pub fn now_ms(&self) -> i64 {
        self.redis_ms + self.read_at.elapsed().as_millis() as i64
    }
}

/// What a `restore_lines.lua` call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The run is applied and the checkpoint after it.
    Applied,
    /// Nothing: the lock is another restore's.
    LockLost,
    /// Nothing: the checkpoint is not where the run goes on from (the call before it failed).
    OutOfOrder,
}

/// Applies `run` and moves the checkpoint to its last line, if restore `token` still holds
/// the board's lock (renewed for `lease_ms`) and the checkpoint is `from` (`None`: no line
/// applied yet): a restore sends a run before the one before it has answered.
pub async fn apply(
    conn: &mut Connection,
    keys: &BoardKeys,
    token: &str,
    lease_ms: u64,
    from: Option<&str>,
    run: &Run,
) -> Result<Applied, StoreError> {
    apply_at(conn, keys, &keys.restore_checkpoint(), token, lease_ms, Some(from.unwrap_or("")), run).await
}

/// `apply`, with the checkpoint in `checkpoint` (a key in the board's slot), and the run's
/// copies appended to the board's journal; `from` `None`: wherever the checkpoint is.
pub async fn apply_at(
    conn: &mut Connection,
    keys: &BoardKeys,
    checkpoint: &str,
    token: &str,
    lease_ms: u64,
    from: Option<&str>,
    run: &Run,
) -> Result<Applied, StoreError> {
    let mut call = scripts::RESTORE_LINES.key(keys.restore_claims());
    call.key(checkpoint).key(keys.restore_lock());
    for key in run.keys() {
        call.key(key);
    }
    if !run.copies.is_empty() {
        call.key(keys.journal());
    }
    call.arg(token).arg(lease_ms).arg(run.through()).arg(from.unwrap_or("*"));
    for arg in run.args() {
        call.arg(arg);
    }
    if !run.copies.is_empty() {
        call.arg(run.keys().len() + 4).arg(run.copies.len());
        for [entry, outcome, effects] in &run.copies {
            call.arg(entry).arg(outcome).arg(effects);
        }
    }
    let reply: u8 = call.invoke_async(conn).await?;
    Ok(match reply {
        1 => Applied::Applied,
        2 => Applied::OutOfOrder,
        _ => Applied::LockLost,
    })
}

/// Takes the board's restore lock as `token` for `lease_ms` unless another restore holds it.
/// Sent again after a lost reply, it finds its own token and holds the lock.
pub async fn lock(conn: &mut Connection, keys: &BoardKeys, token: &str, lease_ms: u64) -> Result<bool, StoreError> {
    let held: u8 = scripts::NOTICES_LEASE.key(keys.restore_lock()).arg(token).arg("take").arg(lease_ms).invoke_async(conn).await?;
    Ok(held == 1)
}

/// Renews the lock (false: it is not `token`'s any more).
pub async fn renew(conn: &mut Connection, keys: &BoardKeys, token: &str, lease_ms: u64) -> Result<bool, StoreError> {
    let held: u8 = scripts::NOTICES_LEASE.key(keys.restore_lock()).arg(token).arg("renew").arg(lease_ms).invoke_async(conn).await?;
    Ok(held == 1)
}

/// Renews a board's restore lock every third of its lease for as long as the restore works,
/// whatever it is doing (listing a large journal, reading an object, the legacy profiles), not
/// only when a run lands: a drain never trims under a restore whose lock lapsed
/// (trim_journal.lua), and no second restore starts beside it. Stopped when dropped, so a
/// restore stopped part-way (its task dropped) leaves its lock to the lease.
pub struct LockRenewer(tokio::task::JoinHandle<()>);

impl LockRenewer {
    pub fn start(mut conn: Connection, keys: BoardKeys, token: String, lease_ms: u64) -> Self {
        Self(tokio::spawn(async move {
            let every = std::time::Duration::from_millis((lease_ms / 3).max(1));
            loop {
                tokio::time::sleep(every).await;
                // Lost, or Redis unreachable: the next run finds out (`Applied::LockLost`).
                if !matches!(renew(&mut conn, &keys, &token, lease_ms).await, Ok(true)) {
                    break;
                }
            }
        }))
    }
}

impl Drop for LockRenewer {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Releases the lock if `token` holds it (compare and delete in one step).
pub async fn unlock(conn: &mut Connection, keys: &BoardKeys, token: &str) -> Result<(), StoreError> {
    let _: u8 = scripts::NOTICES_LEASE.key(keys.restore_lock()).arg(token).arg("release").arg(0).invoke_async(conn).await?;
    Ok(())
}

/// Lifts the board's fence if it is still `fence` (a move's own, refused): never a loss's set
/// meanwhile (lift_fence.lua). Whether it was lifted.
pub async fn lift_fence(conn: &mut Connection, keys: &BoardKeys, fence: &str) -> Result<bool, StoreError> {
    let lifted: u8 = scripts::LIFT_FENCE.key(keys.guard()).arg(fence).invoke_async(conn).await?;
    Ok(lifted == 1)
}

/// The last stream id a restore under way applied (`None`: no restore under way).
pub async fn through(conn: &mut Connection, keys: &BoardKeys) -> Result<Option<String>, StoreError> {
    Ok(redis::cmd("HGET").arg(keys.restore_checkpoint()).arg("through").query_async(conn).await?)
}

/// Records `through` outside a run (a line applied by deciding it again, which is idempotent
/// on its own: see `services::journal::restore`).
pub async fn save_through(conn: &mut Connection, keys: &BoardKeys, through: &str) -> Result<(), StoreError> {
    let _: () = redis::cmd("HSET").arg(keys.restore_checkpoint()).arg("through").arg(through).query_async(conn).await?;
    Ok(())
}

/// Fences the board for a restore (docs/journal.md#fence): journaled writes are refused until
/// `finish`. A born guard is intact, and recorded so before the fence field is written; a
/// missing one, or one without `BORN`, says the board was lost, which refuses writes already.
pub async fn begin(conn: &mut Connection, keys: &BoardKeys) -> Result<(), StoreError> {
    let guard = keys.guard();
    // Rolled back: every key the entries after the snapshot's point write is written as it
    // stands, the guard too, once the restore passes that point (docs/journal.md#rollbacks).
    if let Some(point) = rollback::point(conn, keys).await?.filter(|point| point != rollback::UNKNOWN) {
        let _: () = redis::pipe()
            .atomic()
            .hset(keys.restore_claims(), rollback::CLAIM_ALL, point)
            .hset_nx(keys.restore_claims(), &guard, "0")
            .hset(&guard, crate::domain::guard::FENCE, 1)
            .query_async(conn)
            .await?;
        return Ok(());
    }
    // A rollback's restore stopped part-way, whose board lost its guard (and the point) since:
    // no key of it can be told intact any more, so it is rebuilt whole.
    let rolling: bool = redis::cmd("HEXISTS").arg(keys.restore_claims()).arg(rollback::CLAIM_ALL).query_async(conn).await?;
    if rolling {
        rollback::wipe(conn, keys).await?;
        start_over(conn, keys).await?;
    }
    // Only a born guard is intact: one without `BORN` holds what something wrote into a lost
    // guard (a runtime board's end, say), and is brought back from the journal like any loss.
    let exists: bool = redis::cmd("HEXISTS").arg(&guard).arg(crate::domain::guard::BORN).query_async(conn).await?;
    // A guard an earlier run of this restore brought back (claimed as lost, not "0") is not
    // born yet, which refuses writes already; fencing it would write outside the runs.
    let mut claim: Option<String> = redis::cmd("HGET").arg(keys.restore_claims()).arg(&guard).query_async(conn).await?;
    if judged_intact_and_lost(exists, claim.as_deref()) {
        start_over(conn, keys).await?;
        claim = None;
    }
    // A guard without `BORN` that holds something (written into it since it was lost) is lost
    // all the same: claimed, so the journal's fields come back into it, never judged intact.
    if !exists && claim.is_none() {
        let held: bool = redis::cmd("EXISTS").arg(&guard).query_async(conn).await?;
        if held {
            let _: () = redis::cmd("HSET").arg(keys.restore_claims()).arg(&guard).arg("1").query_async(conn).await?;
        }
    }
    if exists && claim.is_none_or(|claim| claim == "0") {
        let _: () = redis::pipe()
            .atomic()
            .hset_nx(keys.restore_claims(), &guard, "0")
            .hset(&guard, crate::domain::guard::FENCE, 1)
            .query_async(conn)
            .await?;
    }
    Ok(())
}

/// The guard was judged intact by this restore (its claim "0") and is not born now: lost since.
fn judged_intact_and_lost(born: bool, claim: Option<&str>) -> bool {
    !born && claim == Some("0")
}

/// Whether the guard this restore judged intact was lost since (see `start_over`): checked
/// before `finish`, which would make the empty guard born.
pub async fn guard_lost_since_judged(conn: &mut Connection, keys: &BoardKeys) -> Result<bool, StoreError> {
    let born = born(conn, keys).await?;
    let claim: Option<String> = redis::cmd("HGET").arg(keys.restore_claims()).arg(keys.guard()).query_async(conn).await?;
    Ok(judged_intact_and_lost(born, claim.as_deref()))
}

/// A restore stopped part-way (a failure, its deadline, a kill) whose board lost its guard
/// before the next attempt: the guard it judged intact, and left unwritten, is gone with the
/// records every later write is checked against (bans, closed seasons, kept sets), and any key
/// it judged intact may be gone with it. What it judged no longer holds, so it starts over: the
/// keys it brought back (partly, up to its checkpoint) are deleted to come back whole, and
/// every key is judged again.
pub async fn start_over(conn: &mut Connection, keys: &BoardKeys) -> Result<(), StoreError> {
    let mut cursor = 0u64;
    loop {
        let (next, page): (u64, Vec<(String, String)>) =
            redis::cmd("HSCAN").arg(keys.restore_claims()).arg(cursor).arg("COUNT").arg(1000).query_async(conn).await?;
        let brought_back: Vec<&String> =
            page.iter().filter(|(key, claim)| claim.starts_with('1') && key != rollback::CLAIM_ALL).map(|(key, _)| key).collect();
        if !brought_back.is_empty() {
            let _: () = redis::cmd("UNLINK").arg(brought_back).query_async(conn).await?;
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let _: () = redis::pipe().atomic().del(keys.restore_checkpoint()).del(keys.restore_claims()).query_async(conn).await?;
    Ok(())
}

/// Makes a new shard's records of its period sets (the guard's `kept|` fields, and a season's
/// `live|`/`emptied|`; its record of marker buckets dropped) say what the shard holds, once a
/// reshard compared every period set of both layouts and while the shard is still fenced: the moved lines' records were written for the old layout (a ban that emptied
/// the set here left one in a shard where others held it; a set one shard emptied lives on in
/// the merged one). The change goes into the shard's journal with it, as a line (`entry`) of
/// effects, so a restore from the new layout's journal ends with the same records; a shard
/// already settled writes nothing. Never a restore's: a recorded set missing at its end is a
/// loss the next write must find. `sets`: the shard's period sets (`PeriodSets::of`), read
/// with the shard fenced.
pub async fn settle_kept_records(conn: &mut Connection, keys: &BoardKeys, sets: &[String], entry: &str) -> Result<(), StoreError> {
    // Looked up once per record: a set of them, not the slice (periods × records).
    let sets: std::collections::BTreeSet<&String> = sets.iter().collect();
    let fields: Vec<String> = redis::cmd("HKEYS").arg(keys.guard()).query_async(conn).await?;
    let recorded: BTreeMap<String, String> = fields.iter().filter_map(|field| Some((keys.kept_set(field)?, field.clone()))).collect();
    let mut absent: Vec<&String> = recorded.iter().filter(|(set, _)| !sets.contains(set)).map(|(_, field)| field).collect();
    // The moved lines' records of marker buckets name the old layout's (prelude_markers.lua):
    // dropped, so none is taken for lost here; the buckets written from then on are recorded.
    absent.extend(fields.iter().filter(|field| field.starts_with(guard::MARKS)));
    // A season a moved line created in this shard and a later moved line emptied (a ban, a
    // take-back recorded against the old layout, where the set kept others): emptied, as the
    // write that empties a set says it, not lost (found by the simulation: the archive refused
    // the season as lost).
    let mut emptied = Vec::new();
    for field in &fields {
        let Some(period) = field.strip_prefix(guard::LIVE) else { continue };
        let set = keys.kept_set(&format!("{}{period}", guard::KEPT));
        if set.is_some_and(|set| !sets.contains(&set)) {
            absent.push(field);
            // (A season emptied once and played again holds both fields: `live|` is what
            // makes it read as lost, so it goes whatever else is there.)
            if !fields.contains(&format!("{}{period}", guard::EMPTIED)) {
                emptied.push((format!("{}{period}", guard::EMPTIED), "1".to_owned()));
            }
        }
    }
    // A record holds the set's expiry on the functions' clock (`guard::KEPT`): this one's, plus
    // what Redis gives the set to live. A set gone meanwhile (-2) is not recorded.
    let new_sets: Vec<&String> = sets.iter().copied().filter(|set| !recorded.contains_key(*set)).collect();
    let mut ttls = redis::pipe();
    for set in &new_sets {
        ttls.pttl(*set);
    }
    let ttls: Vec<i64> = if new_sets.is_empty() { Vec::new() } else { ttls.query_async(conn).await? };
    let mut unrecorded = Vec::new();
    for (set, ttl_ms) in new_sets.into_iter().zip(ttls) {
        let expiry = match ttl_ms {
            -2 => continue,
            -1 => -1,
            ttl => chrono::Utc::now().timestamp_millis() + ttl,
        };
        if let Some(field) = keys.kept_field(set) {
            unrecorded.push((field, expiry.to_string()));
        }
    }
    unrecorded.extend(emptied);
    if absent.is_empty() && unrecorded.is_empty() {
        return Ok(());
    }
    let guard = keys.relative_of(&keys.guard()).unwrap_or_default().to_owned();
    let mut commands = Vec::new();
    if !absent.is_empty() {
        commands.push([json!("HDEL"), json!(guard)].into_iter().chain(absent.iter().map(|f| json!(f))).collect::<Vec<_>>());
    }
    if !unrecorded.is_empty() {
        let pairs = unrecorded.iter().flat_map(|(field, expiry)| [json!(field), json!(expiry)]);
        commands.push([json!("HSET"), json!(guard)].into_iter().chain(pairs).collect());
    }
    let effects = json!([commands, [guard, -1]]).to_string();
    let mut pipe = redis::pipe();
    pipe.atomic();
    if !absent.is_empty() {
        pipe.hdel(keys.guard(), &absent).ignore();
    }
    if !unrecorded.is_empty() {
        pipe.hset_multiple(keys.guard(), &unrecorded).ignore();
    }
    pipe.xadd(keys.journal(), "*", &[("e", entry), ("o", ""), ("x", effects.as_str())]).ignore();
    let _: () = pipe.query_async(conn).await?;
    Ok(())
}

/// Ends a restore, in one step: its checkpoint and claims go, and the board takes writes again
/// (its guard says its history is all in Redis).
/// `guarded`: false for the profiles' journal, which has no guard. `ended`: the board is a
/// runtime board being deleted, whose guard refuses its writes from the same step on.
pub async fn finish(conn: &mut Connection, keys: &BoardKeys, guarded: bool, ended: bool) -> Result<(), StoreError> {
    let guard = keys.guard();
    let mut pipe = redis::pipe();
    pipe.atomic().del(keys.restore_checkpoint()).unlink(keys.restore_claims());
    if ended {
        pipe.hset(&guard, crate::domain::guard::ENDED, 1);
    }
    if guarded {
        let lifted = [crate::domain::guard::FENCE, crate::domain::guard::LOST, crate::domain::guard::ROLLBACK];
        pipe.hdel(&guard, &lifted[..]).hset(&guard, crate::domain::guard::BORN, 1);
        // A board in its one slot gets its guard's copy of its scale record back with it (not
        // journaled: `guard::SCALE`). Nothing changes either record while a restore runs.
        let (scale, layout): (Option<i64>, bool) =
            redis::pipe().get(keys.scale_record()).exists(keys.layout_record()).query_async(conn).await?;
        if let Some(scale) = scale.filter(|_| !layout) {
            pipe.hset(&guard, crate::domain::guard::SCALE, scale);
        }
    }

    let _: () = pipe.query_async(conn).await?;
    Ok(())
}

/// The guards of runtime boards whose end is done, brought back after a loss: their history is
/// whole in Redis (nothing of them is kept but the guards) and they take no write
/// (docs/runtime-boards.md).
pub async fn retired_guards(
    conn: &mut Connection,
    keys: &crate::redis::keys::Keys,
    boards: &[crate::domain::config::Board],
) -> Result<(), StoreError> {
    for board in boards {
        for shard in keys.layout(&board.name, board.shards).all().iter().chain([&keys.board(&board.name)]) {
            let (born, ended) = (crate::domain::guard::BORN, crate::domain::guard::ENDED);
            let _: () = redis::cmd("HSET").arg(shard.guard()).arg(born).arg(1).arg(ended).arg(1).query_async(conn).await?;
        }
    }
    Ok(())
}

/// Whether a restore or a move into this board (or shard) is under way and not finished: its
/// claims are there until `finish`.
pub async fn claimed(conn: &mut Connection, keys: &BoardKeys) -> Result<bool, StoreError> {
    Ok(redis::cmd("EXISTS").arg(keys.restore_claims()).query_async(conn).await?)
}

/// Whether the board's guard says its history is all in Redis (`BORN`); see `begin`.
pub async fn born(conn: &mut Connection, keys: &BoardKeys) -> Result<bool, StoreError> {
    Ok(redis::cmd("HEXISTS").arg(keys.guard()).arg(crate::domain::guard::BORN).query_async(conn).await?)
}

/// Whether the board (or shard) takes writes as far as a restore is concerned: born, no fence,
/// no loss found.
pub async fn serving(conn: &mut Connection, keys: &BoardKeys) -> Result<bool, StoreError> {
    let (born, fence, lost): (Option<String>, Option<String>, Option<String>) =
        redis::cmd("HMGET").arg(keys.guard()).arg(guard::BORN).arg(guard::FENCE).arg(guard::LOST).query_async(conn).await?;
    Ok(born.is_some() && fence.is_none() && lost.is_none())
}

/// Whether a write found a loss the board's guard survived (`guard::LOST`), not restored yet.
pub async fn found_lost(conn: &mut Connection, keys: &BoardKeys) -> Result<bool, StoreError> {
    Ok(redis::cmd("HEXISTS").arg(keys.guard()).arg(crate::domain::guard::LOST).query_async(conn).await?)
}

/// What `mark_new` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Birth {
    /// Born before: nothing written.
    Born,
    /// Marked born now: its first writes go ahead.
    New,
    /// Redis holds signs of a history (a fence, a loss, a drained entry, an entry in its stream):
    /// left unborn, a loss for a restore to mend.
    History,
}

/// Marks `keys`' board born if Redis holds no sign of its history, in one step (mark_born.lua):
/// for a board the caller found the journal bucket holding nothing of (docs/journal.md#fence);
/// `target`: the layout a move is due to take the board to, and where its data is (`guard::TARGET`).
pub async fn mark_new(conn: &mut Connection, keys: &BoardKeys, target: Option<&str>) -> Result<Birth, StoreError> {
    let field = if target.is_some() { guard::TARGET } else { "" };
    let found: u8 =
        scripts::MARK_BORN.key(keys.guard()).key(keys.journal()).arg(field).arg(target.unwrap_or("")).invoke_async(conn).await?;
    Ok(match found {
        0 => Birth::Born,
        1 => Birth::New,
        _ => Birth::History,
    })
}

/// Marks a board whose journal holds nothing yet as born: its first writes go ahead.
pub async fn mark_born(conn: &mut Connection, keys: &BoardKeys) -> Result<(), StoreError> {
    let _: () = redis::cmd("HSET").arg(keys.guard()).arg(crate::domain::guard::BORN).arg(1).query_async(conn).await?;
    Ok(())
}
