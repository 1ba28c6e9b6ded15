//! The layout a board's data is in (docs/scaling.md#changing-shards): how many shards, as
//! recorded in Redis beside the board's one-slot keys (`Keys::board_layout`). A function whose
//! configuration says otherwise writes and reads the recorded layout until a move's switch
//! records its own, so a changed `shards` never splits a board or hides its data.
//!
//! Probed once per board per container every `LAYOUT_PROBE_SECS` (the write path stays one
//! round trip per board in between), every `MOVING_PROBE_MS` while the recorded count is not
//! the configured one. With no record, a board's data is in its one slot when
//! it holds any there (a board written before shards existed, or never sharded: nothing is
//! recorded for it), else in its configured layout, recorded by its first write.
//!
//! A score board's scale (its `max_score`, which lays out every composite it stores:
//! docs/boards.md#score-boards) is recorded the same way (`Keys::board_scale`): a function configured
//! with another lays the scores it writes out at the recorded one (`Layouts::holding`,
//! `scores::held_at`), never in another scale than the ones stored, and decodes its reads of
//! standings at it (the same, recording nothing); paths that cannot (`recorded`) refuse with
//! `StoreError::Rescaled`. With no record, a board holding scores in its current periods holds them
//! at the default `MAX_SCORE` (written before scales were recorded, or never declared one:
//! nothing is recorded for it); a board holding none takes its configured scale, recorded by
//! its first write when it is not the default, unless it holds a set of an earlier period still
//! kept (yesterday's, a frozen season's) or its guard names one it held (`held_sets`): that
//! write records the default, which its scores are in. A move re-encodes a board for another scale (docs/boards.md#changing-max_score).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use redis::aio::ConnectionLike;

use super::error::StoreError;
use super::keys::Keys;
use super::layout_signs::{held_sets, holds_periods, is_born};
use crate::domain::config::{Board, BoardKind};
use crate::domain::guard;
use crate::domain::period::Period;
use crate::domain::scores::{MAX_SCORE, configured_scale};

/// How long a probe of a board's recorded layout is trusted.
pub const LAYOUT_PROBE_SECS: u64 = 30;
/// How long one is trusted while the board's data is in another count of shards, or its scores
/// at another `max_score`, than the configuration's (a move due or under way,
/// docs/scaling.md#changing-shards): its writes go where the data is, and find the new layout
/// within this of the move's switch.
pub const MOVING_PROBE_MS: u64 = 500;

/// `keep_scale.lua`, run as the file is (it needs none of the constants or the prelude every
/// other script is composed with, `scripts::compose`): the probe under it is what every script
/// call's layout comes from, so it must not depend on the scripts' module.
pub(crate) static KEEP_SCALE: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("scripts/keep_scale.lua")));

/// The recorded layouts probed by this container.
#[derive(Default)]
pub struct Layouts {
    probed: Mutex<HashMap<String, (Instant, Recorded)>>,
}

/// What a probe found recorded (or decided) for a board.
#[derive(Debug, Clone, Copy)]
struct Recorded {
    shards: u32,
    /// How many moves re-encoded the board's scores (`Keys::layout_at`).
    generation: u32,
    /// The scale the board's scores are in (`None`: a board whose scale never changes).
    max_score: Option<i64>,
}

impl Layouts {
    /// The shards `board`'s data is in and their generation, probed at most every
    /// `LAYOUT_PROBE_SECS`. A read (`record` false) never writes: on a board with no record
    /// yet it finds the layout without recording it (and probes again next time).
    pub async fn recorded(
        &self,
        conn: &mut (impl ConnectionLike + Send),
        keys: &Keys,
        board: &Board,
        now: DateTime<Utc>,
        record: bool,
    ) -> Result<(u32, u32), StoreError> {
        let found = self.found(conn, keys, board, now, record).await?;
        match (found.max_score, configured_scale(board)) {
            (Some(recorded), Some(configured)) if recorded != configured => {
                Err(StoreError::Rescaled { board: board.name.clone(), recorded, configured })
            }
            _ => Ok((found.shards, found.generation)),
        }
    }

    /// `recorded` whatever `max_score` the configuration says, also giving the `max_score` the
    /// board's scores are held at (`None`: a board whose scale never changes): for a write that
    /// lays its scores out as the board holds them (a score submission, a correction:
    /// `scores::held_at`) or writes none (a ban), `record` true, recording as a write does; for
    /// a read answering from the scores as they are held, `record` false.
    pub async fn holding(
        &self,
        conn: &mut (impl ConnectionLike + Send),
        keys: &Keys,
        board: &Board,
        now: DateTime<Utc>,
        record: bool,
    ) -> Result<(u32, u32, Option<i64>), StoreError> {
        let found = self.found(conn, keys, board, now, record).await?;
        Ok((found.shards, found.generation, found.max_score))
    }

    async fn found(
        &self,
        conn: &mut (impl ConnectionLike + Send),
        keys: &Keys,
        board: &Board,
        now: DateTime<Utc>,
        record: bool,
    ) -> Result<Recorded, StoreError> {
        // Hot boards cannot be sharded (`config::validate`): they are in one slot.
        if board.kind == BoardKind::Decaying {
            return Ok(Recorded { shards: 1, generation: 0, max_score: None });
        }
        // A replay writes where the journal says (a shadow's keys hold no layout of their own:
        // `Keys::replaying_layout` names the one it replays).
        if keys.replays() {
            let (shards, generation) = keys.replayed_layout().unwrap_or((board.shards, 0));
            return Ok(Recorded { shards, generation, max_score: None });
        }
        // By the record's key: containers may hold several prefixes' keys (a test, a shadow).
        let layout = keys.board_layout(&board.name);
        // A move due or under way (another count of shards, or scores held at another
        // `max_score`): its switch is found within `MOVING_PROBE_MS`.
        let trusted = |found: &Recorded| {
            let settled = found.shards == board.shards && (found.max_score.is_none() || found.max_score == configured_scale(board));
            if settled { Duration::from_secs(LAYOUT_PROBE_SECS) } else { Duration::from_millis(MOVING_PROBE_MS) }
        };
        let cached = self
            .probed
            .lock()
            .ok()
            .and_then(|probed| probed.get(&layout).filter(|(at, found)| at.elapsed() < trusted(found)).map(|(_, found)| *found));
        let found = match cached {
            Some(found) => found,
            None => {
                let (found, holds) = probe(conn, keys, board, now, record).await?;
                if let Some(mut probed) = self.probed.lock().ok().filter(|_| holds) {
                    probed.insert(layout, (Instant::now(), found));
                }
                found
            }
        };
        Ok(found)
    }

    /// Forgets every probe (a write found a board restoring: a move's switch may have freed the
    /// layout probed).
    pub fn forget_all(&self) {
        if let Ok(mut probed) = self.probed.lock() {
            probed.clear();
        }
    }

    /// Forgets what was probed of record `record` (a reshard changed it).
    pub fn forget(&self, record: &str) {
        if let Ok(mut probed) = self.probed.lock() {
            probed.remove(record);
        }
    }
}

/// Reads the records; records what is missing when `record`. Whether the answer holds until
/// the next probe (a read of a board not written yet probes again).
async fn probe(
    conn: &mut (impl ConnectionLike + Send),
    keys: &Keys,
    board: &Board,
    now: DateTime<Utc>,
    mut record: bool,
) -> Result<(Recorded, bool), StoreError> {
    let one_slot = keys.board(&board.name);
    let (layout, scale) = (keys.board_layout(&board.name), keys.board_scale(&board.name));
    let periods: Vec<String> = board.periods.iter().map(|kind| one_slot.period(&Period::containing(*kind, now, board.timezone))).collect();
    // One snapshot: a move's switch writes both records in one command, and a probe that read
    // one before it and one after would decode one generation at the other's scale.
    type Found = (Option<String>, Option<i64>, u64, u64, (Option<i64>, Option<String>, Option<String>));
    let (recorded, recorded_scale, guarded, scored, (copied, born, target)): Found = redis::pipe()
        .atomic()
        .get(&layout)
        .get(&scale)
        .exists(one_slot.guard())
        .cmd("EXISTS")
        .arg(&periods)
        .cmd("HMGET")
        .arg(one_slot.guard())
        .arg(guard::SCALE)
        .arg(guard::BORN)
        .arg(guard::TARGET)
        .query_async(conn)
        .await
        .map_err(StoreError::from)?;
    let mut holds = true;
    let recorded = recorded.map(|text| parse(&text)).transpose()?;
    let generation = recorded.map_or(0, |(_, generation)| generation);
    let shards = match recorded.map(|(shards, _)| shards) {
        Some(shards) => shards,
        // The one slot born as a move's target (`guard::TARGET`): the data is in the layout the
        // lost record named, which only the restore finds (found by the simulation: a 4 → 1 move
        // due, the record lost, writes went into the empty one slot).
        None if keys.journal_on() && target.is_some() => return Err(StoreError::Restoring),
        None if board.shards > 1 && guarded + scored > 0 => 1,
        // Only a sharded layout needs a record: data in the one slot is found there again by
        // the next probe (and a board of one shard writes no key a read or a restore would not).
        // With a journal, nothing there at all (not even the guard a function's start gives a
        // new board, docs/journal.md#fence) is a board whose every key was lost, its record
        // included (a board moved back to one shard is at a later generation): probed again
        // next time, so the restore that brings the record back is seen at once.
        None if board.shards == 1 => {
            holds = !keys.journal_on() || guarded + scored > 0;
            // Nothing there on a journaled board: its script refuses the write (no guard born),
            // so it records no scale either (another generation's may be the board's).
            record &= holds;
            1
        }
        // A first write records the configured layout only on a new board: with a journal, one
        // whose configured layout's guards a function's start gave birth to as a new board's,
        // not as the layout a move is due to take it to (`guard::TARGET`). A board whose record
        // was lost (alone, or with everything) may be in another layout or generation, which
        // only the restore can tell from S3: recording the configured one here made the restore
        // trust it and bring back an empty board (found by the simulation). Its writes are
        // refused (503 `board_restoring`), nothing recorded, until the restore records it.
        None if record && (!keys.journal_on() || is_born(conn, &keys.layout(&board.name, board.shards).shard(0)).await?) => {
            // Another container may record it first: theirs stands.
            let before: Option<u32> =
                redis::cmd("SET").arg(&layout).arg(board.shards).arg("NX").arg("GET").query_async(conn).await.map_err(StoreError::from)?;
            before.unwrap_or(board.shards)
        }
        None if record => return Err(StoreError::Restoring),
        None => {
            holds = false;
            board.shards
        }
    };
    // What the scale record holds once probed (`None`: nothing recorded), and the copy of it a
    // one-slot board's guard keeps (`guard::SCALE`).
    let mut in_record = recorded_scale;
    let copy = copied.filter(|_| recorded.is_none());
    let max_score = match (configured_scale(board), recorded_scale, copy) {
        (None, ..) => None,
        (Some(_), Some(recorded), _) => Some(recorded),
        // The record lost alone (a bad `DEL`, an eviction): the copy says the scale the scores
        // are in, recorded again by a write (another container's record, if first, stands).
        (Some(_), None, Some(copy)) => {
            tracing::warn!(board = %board.name, max_score = copy, "a board's scale record was lost alone: its guard's copy holds it");
            if record {
                let before: Option<i64> =
                    redis::cmd("SET").arg(&scale).arg(copy).arg("NX").arg("GET").query_async(conn).await.map_err(StoreError::from)?;
                in_record = Some(before.unwrap_or(copy));
                in_record
            } else {
                holds = false;
                Some(copy)
            }
        }
        // Scores written before scales were recorded, or at the default: at the default. A
        // sharded board's scores are in its shards' slots: its recorded layout says it was
        // written, and a board that recorded its layout records its scale with it.
        (Some(_), None, None) if scored > 0 || recorded.is_some() => Some(MAX_SCORE),
        (Some(MAX_SCORE), None, None) => Some(MAX_SCORE),
        (Some(configured), None, None) if record => {
            // Scores only in other periods than the current ones (yesterday's, a frozen
            // season's) are at the default too, and recorded so: looked for once, at the write
            // that would record the configured scale (the record then answers every probe). A
            // journaled board's guard names every period set it ever held, whatever this
            // function's clock takes for today.
            let held = match holds_periods(conn, &one_slot, board, now).await? || held_sets(conn, &one_slot).await? {
                true => MAX_SCORE,
                false => configured,
            };
            let before: Option<i64> =
                redis::cmd("SET").arg(&scale).arg(held).arg("NX").arg("GET").query_async(conn).await.map_err(StoreError::from)?;
            in_record = Some(before.unwrap_or(held));
            in_record
        }
        // A read records nothing: the default where earlier periods hold scores, or the guard
        // names a set the board held (what the write would record), probed again next time.
        (Some(configured), None, None) => {
            holds = false;
            let held = holds_periods(conn, &one_slot, board, now).await? || held_sets(conn, &one_slot).await?;
            Some(if held { MAX_SCORE } else { configured })
        }
    };
    // A write keeps the copy beside the record once the guard is the board's own: born, with a
    // journal (a guard written into before would be taken for a lost one); checked again in the
    // copy's own step (keep_scale.lua), as a move's switch may free the guard meanwhile.
    let guard_born = born.is_some() || (!keys.journal_on() && guarded > 0);
    if let Some(held) = in_record.filter(|held| record && recorded.is_none() && guard_born && copied != Some(*held)) {
        if let Some(copied) = copied {
            tracing::warn!(board = %board.name, recorded = held, copied, "a board's scale record and its guard's copy differ: the record stands");
        }
        let _: u8 = KEEP_SCALE
            .key(one_slot.guard())
            .key(&layout)
            .key(&scale)
            .arg(held)
            .arg(if keys.journal_on() { guard::BORN } else { "" })
            .arg(guard::SCALE)
            .invoke_async(conn)
            .await
            .map_err(StoreError::from)?;
    }
    Ok((Recorded { shards, generation, max_score }, holds))
}

/// A layout record: `<shards>` or `<shards>:<generation>`.
pub fn parse(text: &str) -> Result<(u32, u32), StoreError> {
    let (shards, generation) = text.split_once(':').unwrap_or((text, "0"));
    shards
        .parse()
        .ok()
        .zip(generation.parse().ok())
        .ok_or_else(|| StoreError::Protocol(format!("a board's layout record reads {text:?}, not <shards>[:<generation>]")))
}

/// `parse`'s inverse.
pub fn text(shards: u32, generation: u32) -> String {
    if generation == 0 { shards.to_string() } else { format!("{shards}:{generation}") }
}

/// The layout record of `board` as it is (`None`: none), without probing its data: a restore
/// finds where the board's journal is.
pub async fn read(conn: &mut (impl ConnectionLike + Send), keys: &Keys, board: &str) -> Result<Option<(u32, u32)>, StoreError> {
    let recorded: Option<String> = redis::cmd("GET").arg(keys.board_layout(board)).query_async(conn).await.map_err(StoreError::from)?;
    recorded.map(|text| parse(&text)).transpose()
}

/// The `max_score` `board`'s scores are held at (`None`: a board whose scale never changes):
/// the recorded one (or its copy in a one-slot board's guard, the record lost alone); without
/// either, the default for a board holding scores or whose guard names a set it held (written
/// before records, or at the default: as `probe` decides for a write), else the configured one
/// (its first write records it).
pub async fn held_scale(
    conn: &mut (impl ConnectionLike + Send),
    keys: &Keys,
    board: &Board,
    now: DateTime<Utc>,
) -> Result<Option<i64>, StoreError> {
    let Some(configured) = configured_scale(board) else { return Ok(None) };
    let one_slot = keys.board(&board.name);
    let (recorded, layout, copy): (Option<i64>, bool, Option<i64>) = redis::pipe()
        .get(one_slot.scale_record())
        .exists(one_slot.layout_record())
        .hget(one_slot.guard(), guard::SCALE)
        .query_async(conn)
        .await?;
    Ok(Some(match recorded.or(copy.filter(|_| !layout)) {
        Some(recorded) => recorded,
        None if layout
            || holds_periods(conn, &keys.board(&board.name), board, now).await?
            || held_sets(conn, &keys.board(&board.name)).await? =>
        {
            MAX_SCORE
        }
        None => configured,
    }))
}

/// Records `(shards, generation)` as the layout of `board` (a reshard's last step), whatever
/// was recorded, and `max_score` as its scale (a move that re-encoded it) in the same command:
/// no function ever reads the one without the other. The one slot's copy of a scale
/// (`guard::SCALE`) goes in the same step: the board is in that slot no more.
pub async fn record(
    conn: &mut (impl ConnectionLike + Send),
    keys: &Keys,
    board: &str,
    (shards, generation): (u32, u32),
    max_score: Option<i64>,
) -> Result<(), StoreError> {
    let mut set = redis::cmd("MSET");
    set.arg(keys.board_layout(board)).arg(text(shards, generation));
    if let Some(max_score) = max_score {
        set.arg(keys.board_scale(board)).arg(max_score);
    }
    let mut pipe = redis::pipe();
    pipe.atomic().add_command(set).ignore().hdel(keys.board(board).guard(), guard::SCALE).ignore();
    pipe.query_async(conn).await.map_err(StoreError::from)
}

/// Records `max_score` as the scale of `board` unless one is recorded: a restore brings back
/// the scale its score lines say they were written in (the record went with the scores).
pub async fn record_scale_if_absent(
    conn: &mut (impl ConnectionLike + Send),
    keys: &Keys,
    board: &str,
    max_score: i64,
) -> Result<(), StoreError> {
    redis::cmd("SET").arg(keys.board_scale(board)).arg(max_score).arg("NX").query_async(conn).await.map_err(StoreError::from)
}

/// Records `shards` as the layout of `board` unless one is recorded (a restore brought a
/// sharded board back: the record went with the rest, and a function configured otherwise
/// would record its own layout at its first write).
pub async fn record_if_absent(
    conn: &mut (impl ConnectionLike + Send),
    keys: &Keys,
    board: &str,
    shards: u32,
    generation: u32,
) -> Result<(), StoreError> {
    redis::cmd("SET")
        .arg(keys.board_layout(board))
        .arg(text(shards, generation))
        .arg("NX")
        .query_async(conn)
        .await
        .map_err(StoreError::from)
}
