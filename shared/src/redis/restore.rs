//! A restore's writes (docs/journal.md#restore): its lock, its checkpoint, and runs of journal
//! lines whose recorded effects it applies with `restore_lines.lua`, each run with its
//! checkpoint in one call.

use std::collections::HashMap;

use crate::domain::journal::Effects;
use crate::redis::error::StoreError;
use crate::redis::keys::BoardKeys;
use crate::redis::scripts;
use crate::redis::store::Connection;

/// A run of lines for one call: the keys they write, once each, and the packed lines.
#[derive(Debug, Default)]
pub struct Run {
    keys: Vec<String>,
    index: HashMap<String, usize>,
    args: Vec<Vec<u8>>,
    lines: usize,
    through: String,
    /// Each line's stream fields (entry, outcome, effects), when the run copies its lines to
    /// a journal (`copy`).
    copies: Vec<[String; 3]>,
}

impl Run {
    pub fn push(&mut self, keys: &BoardKeys, id: &str, effects: &Effects) {
        let mut key_index = |relative: &str| -> Vec<u8> {
            let name = keys.relative(relative);
            let next = self.keys.len() + 4;
            let at = *self.index.entry(name.clone()).or_insert_with(|| {
                self.keys.push(name);
                next
            });
            at.to_string().into_bytes()
        };
        let mut line = vec![effects.commands.len().to_string().into_bytes(), effects.expiries.len().to_string().into_bytes()];
        for command in &effects.commands {
            line.push((command.args.len() + 2).to_string().into_bytes());
            line.push(command.name.clone().into_bytes());
            line.push(key_index(&command.key));
            line.extend(command.args.iter().cloned());
        }
        for (key, at) in &effects.expiries {
            line.push(key_index(key));
            line.push(at.to_string().into_bytes());
        }
        self.args.extend(line);
        self.lines += 1;
        self.through = id.to_owned();
    }

    /// `push`, and the line's stream fields to append to the target's journal as it is applied
    /// (a reshard: the new layout journals the history it was given).
    pub fn push_copied(&mut self, keys: &BoardKeys, id: &str, effects: &Effects, fields: [String; 3]) {
        self.push(keys, id, effects);
        self.copies.push(fields);
    }

    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Arguments so far: a run is sent before it grows past what one call should carry.
    pub fn weight(&self) -> usize {
        self.args.len() + self.keys.len()
    }

    /// The stream id of the run's last line.
    pub fn through(&self) -> &str {
        &self.through
    }
}

/// Applies `run` and moves the checkpoint to its last line, if restore `token` still holds
/// the board's lock (renewed for `lease_ms`); false, with nothing applied, when it does not.
pub async fn apply(conn: &mut Connection, keys: &BoardKeys, token: &str, lease_ms: u64, run: &Run) -> Result<bool, StoreError> {
    apply_at(conn, keys, &keys.restore_checkpoint(), token, lease_ms, run).await
}

/// `apply`, with the checkpoint in `checkpoint` (a key in the board's slot), and the run's
/// copies appended to the board's journal.
pub async fn apply_at(
    conn: &mut Connection,
    keys: &BoardKeys,
    checkpoint: &str,
    token: &str,
    lease_ms: u64,
    run: &Run,
) -> Result<bool, StoreError> {
    let mut call = scripts::RESTORE_LINES.key(keys.restore_claims());
    call.key(checkpoint).key(keys.restore_lock());
    for key in &run.keys {
        call.key(key);
    }
    if !run.copies.is_empty() {
        call.key(keys.journal());
    }
    call.arg(token).arg(lease_ms).arg(&run.through).arg(run.lines);
    for arg in &run.args {
        call.arg(arg.as_slice());
    }
    if !run.copies.is_empty() {
        call.arg(run.keys.len() + 4);
        for [entry, outcome, effects] in &run.copies {
            call.arg(entry).arg(outcome).arg(effects);
        }
    }
    let held: u8 = call.invoke_async(conn).await?;
    Ok(held == 1)
}

/// Takes the board's restore lock as `token` for `lease_ms` unless another restore holds it.
pub async fn lock(conn: &mut Connection, keys: &BoardKeys, token: &str, lease_ms: u64) -> Result<bool, StoreError> {
    let set: Option<String> =
        redis::cmd("SET").arg(keys.restore_lock()).arg(token).arg("NX").arg("PX").arg(lease_ms).query_async(conn).await?;
    Ok(set.is_some())
}

/// Renews the lock (false: it is not `token`'s any more).
pub async fn renew(conn: &mut Connection, keys: &BoardKeys, token: &str, lease_ms: u64) -> Result<bool, StoreError> {
    let held: u8 = scripts::NOTICES_LEASE.key(keys.restore_lock()).arg(token).arg("renew").arg(lease_ms).invoke_async(conn).await?;
    Ok(held == 1)
}

/// Releases the lock if `token` holds it (compare and delete in one step).
pub async fn unlock(conn: &mut Connection, keys: &BoardKeys, token: &str) -> Result<(), StoreError> {
    let _: u8 = scripts::NOTICES_LEASE.key(keys.restore_lock()).arg(token).arg("release").arg(0).invoke_async(conn).await?;
    Ok(())
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
/// `finish`. A guard that exists now is intact, and recorded so before the fence field makes
/// it exist; a missing one says the board was lost (no `BORN`), which refuses writes already.
pub async fn begin(conn: &mut Connection, keys: &BoardKeys) -> Result<(), StoreError> {
    let guard = keys.guard();
    let exists: bool = redis::cmd("EXISTS").arg(&guard).query_async(conn).await?;
    if exists {
        let _: () = redis::pipe()
            .atomic()
            .hset_nx(keys.restore_claims(), &guard, "0")
            .hset(&guard, crate::domain::guard::FENCE, 1)
            .query_async(conn)
            .await?;
    }
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
        pipe.hdel(&guard, crate::domain::guard::FENCE).hset(&guard, crate::domain::guard::BORN, 1);
    }
    let _: () = pipe.query_async(conn).await?;
    Ok(())
}

/// Whether the board's guard says its history is all in Redis (`BORN`); see `begin`.
pub async fn born(conn: &mut Connection, keys: &BoardKeys) -> Result<bool, StoreError> {
    Ok(redis::cmd("HEXISTS").arg(keys.guard()).arg(crate::domain::guard::BORN).query_async(conn).await?)
}

/// Marks a board whose journal holds nothing yet as born: its first writes go ahead.
pub async fn mark_born(conn: &mut Connection, keys: &BoardKeys) -> Result<(), StoreError> {
    let _: () = redis::cmd("HSET").arg(keys.guard()).arg(crate::domain::guard::BORN).arg(1).query_async(conn).await?;
    Ok(())
}
