//! Typed wrappers around the hot-board scripts: `add_heat.lua`, `synthesize_hot.lua` and
//! `scale_hot.lua`.

use chrono::{DateTime, Utc};

use super::{ADD_HEAT, SCALE_HOT, SYNTHESIZE_HOT, Status};
use crate::domain::period::EventTimeError;
use crate::redis::error::StoreError;
use crate::redis::keys::BoardKeys;
use crate::redis::store::Connection;

/// Where a heat event goes and how it is remembered.
#[derive(Debug, Clone)]
pub struct HeatWrite<'a> {
    /// The bucket's key (window boards) or the board's (scale boards).
    pub key: String,
    /// Seconds `key` is kept from its first heat (set once); 0 for keys that never expire.
    pub ttl_secs: i64,
    /// The bucket's start as the API shows it; empty for scale boards.
    pub bucket_label: String,
    pub item_id: &'a str,
    pub delta: i64,
    /// `(id, fingerprint, TTL in seconds)` of the marker: the event id, or one made up for
    /// heat sent without one.
    pub marker: (&'a str, &'a str, u64),
    /// Refuses the heat unless its id was already applied.
    pub first_delivery: Option<EventTimeError>,
}

/// How long the marker of heat sent without an event id lives: long enough for any re-send
/// of the same script call by the client library, no longer (it costs memory per call).
pub const MADE_UP_MARKER_TTL_SECS: u64 = 60;

#[derive(Debug, Clone, PartialEq)]
pub enum HeatReply {
    /// `bucket_label` and the item's heat after the write (for a duplicate: the first answer).
    Applied {
        bucket_label: String,
        heat: f64,
        duplicate: bool,
    },
    Conflict,
    OutsideWindow(EventTimeError),
}

pub async fn add_heat(conn: &mut Connection, keys: &BoardKeys, write: &HeatWrite<'_>) -> Result<HeatReply, StoreError> {
    let mut invocation = ADD_HEAT.key(&write.key);
    let (marker_id, fingerprint, ttl) = write.marker;
    invocation.key(keys.event(marker_id));
    invocation.arg(write.item_id).arg(write.delta).arg(write.ttl_secs).arg(&write.bucket_label);
    invocation.arg(fingerprint).arg(ttl).arg(write.first_delivery.map_or("", |refusal| refusal.code()));
    let (status, bucket_label, heat): (String, String, String) = invocation.invoke_async(conn).await?;
    let duplicate = match Status::parse("add_heat", &status, write.first_delivery.map(|refusal| refusal.code()))? {
        Status::OutsideWindow => return Ok(HeatReply::OutsideWindow(write.first_delivery.expect("parsed only with a refusal"))),
        Status::New => false,
        Status::Duplicate => true,
        Status::Conflict => return Ok(HeatReply::Conflict),
        other => return Err(other.unexpected("add_heat")),
    };
    let heat = heat.parse().map_err(|_| StoreError::Protocol(format!("add_heat heat {heat:?}")))?;
    Ok(HeatReply::Applied { bucket_label, heat, duplicate })
}

/// What one decay run did to a board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecayReply {
    /// False when the minute (or scale period) had already been done: nothing changed.
    pub ran: bool,
    /// Items on the board afterwards.
    pub members: u64,
}

fn decay_reply(script: &str, (status, members): (String, u64)) -> Result<DecayReply, StoreError> {
    match Status::parse(script, &status, None)? {
        Status::Duplicate | Status::Stale => Ok(DecayReply { ran: false, members }),
        Status::New => Ok(DecayReply { ran: true, members }),
        other => Err(other.unexpected(script)),
    }
}

/// A window board's synthesis for one minute.
#[derive(Debug, Clone)]
pub struct Synthesis {
    pub minute: DateTime<Utc>,
    /// `(bucket key, weight)`, newest first.
    pub buckets: Vec<(String, f64)>,
    pub board_ttl_secs: u64,
    pub meta_ttl_secs: u64,
}

pub async fn synthesize(conn: &mut Connection, keys: &BoardKeys, synthesis: &Synthesis) -> Result<DecayReply, StoreError> {
    let mut invocation = SYNTHESIZE_HOT.key(keys.hot_board());
    invocation.key(keys.hot_board_next()).key(keys.hot_meta());
    invocation.arg(synthesis.minute.timestamp()).arg(synthesis.board_ttl_secs).arg(synthesis.meta_ttl_secs);
    for (bucket, weight) in &synthesis.buckets {
        invocation.key(bucket).arg(weight);
    }
    decay_reply("synthesize_hot", invocation.invoke_async(conn).await?)
}

/// A scale board's decay for the scale period starting at `period`.
pub async fn scale(
    conn: &mut Connection,
    keys: &BoardKeys,
    period: DateTime<Utc>,
    factor: f64,
    prune_below: f64,
) -> Result<DecayReply, StoreError> {
    let reply = SCALE_HOT
        .key(keys.hot_board())
        .key(keys.hot_meta())
        .arg(period.timestamp())
        .arg(factor)
        .arg(prune_below)
        .invoke_async(conn)
        .await?;
    decay_reply("scale_hot", reply)
}
