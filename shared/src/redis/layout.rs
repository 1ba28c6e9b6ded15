//! The layout a board's data is in (docs/scaling.md#changing-shards): how many shards, as
//! recorded in Redis beside the board's one-slot keys (`Keys::board_layout`). A function whose
//! configuration says otherwise refuses the board's writes (`StoreError::Resharding`) and
//! reads the recorded layout, so a changed `shards` never splits a board or hides its data.
//!
//! Probed once per board per container every `LAYOUT_PROBE_SECS` (the write path stays one
//! round trip per board in between). With no record, a board's data is in its one slot when
//! it holds any there (a board written before shards existed, or never sharded: nothing is
//! recorded for it), else in its configured layout, recorded by its first write.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use redis::aio::ConnectionLike;

use super::error::StoreError;
use super::keys::Keys;
use crate::domain::config::{Board, BoardKind};
use crate::domain::period::Period;

/// How long a probe of a board's recorded layout is trusted.
pub const LAYOUT_PROBE_SECS: u64 = 30;

/// The recorded layouts probed by this container.
#[derive(Default)]
pub struct Layouts {
    probed: Mutex<HashMap<String, (Instant, u32)>>,
}

impl Layouts {
    /// The shards `board`'s data is in, probed at most every `LAYOUT_PROBE_SECS`. A read
    /// (`record` false) never writes: on a board with no record yet it finds the layout
    /// without recording it (and probes again next time).
    pub async fn recorded(
        &self,
        conn: &mut (impl ConnectionLike + Send),
        keys: &Keys,
        board: &Board,
        now: DateTime<Utc>,
        record: bool,
    ) -> Result<u32, StoreError> {
        // Hot boards cannot be sharded (`config::validate`): they are in one slot.
        if board.kind == BoardKind::Decaying {
            return Ok(1);
        }
        // A replay writes where the journal says (a shadow's keys hold no layout of their own).
        if keys.replays() {
            return Ok(board.shards);
        }
        // By the record's key: containers may hold several prefixes' keys (a test, a shadow).
        let layout = keys.board_layout(&board.name);
        let cached = self.probed.lock().ok().and_then(|probed| {
            probed.get(&layout).filter(|(at, _)| at.elapsed() < Duration::from_secs(LAYOUT_PROBE_SECS)).map(|(_, shards)| *shards)
        });
        if let Some(shards) = cached {
            return Ok(shards);
        }
        let (shards, holds) = probe(conn, keys, board, now, record).await?;
        if let Some(mut probed) = self.probed.lock().ok().filter(|_| holds) {
            probed.insert(layout, (Instant::now(), shards));
        }
        Ok(shards)
    }

    /// Forgets what was probed of record `record` (a reshard changed it).
    pub fn forget(&self, record: &str) {
        if let Ok(mut probed) = self.probed.lock() {
            probed.remove(record);
        }
    }
}

/// Reads the record; records it when there is none and `record`. Whether the answer holds
/// until the next probe (a read of a sharded board not written yet probes again).
async fn probe(
    conn: &mut (impl ConnectionLike + Send),
    keys: &Keys,
    board: &Board,
    now: DateTime<Utc>,
    record: bool,
) -> Result<(u32, bool), StoreError> {
    let one_slot = keys.board(&board.name);
    let layout = keys.board_layout(&board.name);
    let mut data = vec![one_slot.guard()];
    data.extend(board.periods.iter().map(|kind| one_slot.period(&Period::containing(*kind, now, board.timezone))));
    let (recorded, held): (Option<u32>, u64) =
        redis::pipe().get(&layout).cmd("EXISTS").arg(&data).query_async(conn).await.map_err(StoreError::from)?;
    if let Some(shards) = recorded {
        return Ok((shards, true));
    }
    let shards = if board.shards > 1 && held > 0 { 1 } else { board.shards };
    // Only a sharded layout needs a record: data in the one slot is found there again by the
    // next probe (and a board of one shard writes no key a read or a restore would not).
    if shards == 1 {
        // Nothing to record: known as well as a record would tell (cached).
        return Ok((1, true));
    }
    if !record {
        return Ok((shards, false));
    }
    // Another container may record it first: theirs stands.
    let before: Option<u32> =
        redis::cmd("SET").arg(&layout).arg(shards).arg("NX").arg("GET").query_async(conn).await.map_err(StoreError::from)?;
    Ok((before.unwrap_or(shards), true))
}

/// Records `shards` as the layout of `board` (a reshard's last step), whatever was recorded.
pub async fn record(conn: &mut (impl ConnectionLike + Send), keys: &Keys, board: &str, shards: u32) -> Result<(), StoreError> {
    redis::cmd("SET").arg(keys.board_layout(board)).arg(shards).query_async(conn).await.map_err(StoreError::from)
}

/// Records `shards` as the layout of `board` unless one is recorded (a restore brought a
/// sharded board back: the record went with the rest, and a function configured otherwise
/// would record its own layout at its first write).
pub async fn record_if_absent(conn: &mut (impl ConnectionLike + Send), keys: &Keys, board: &str, shards: u32) -> Result<(), StoreError> {
    redis::cmd("SET").arg(keys.board_layout(board)).arg(shards).arg("NX").query_async(conn).await.map_err(StoreError::from)
}
