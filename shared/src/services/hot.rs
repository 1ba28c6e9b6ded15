//! Decaying ("hot") boards, the answer to the "data ghost" (an item popular once stays on top
//! forever): heat goes into hourly buckets (or one scaled key), a scheduled run decays each
//! board once per minute, and a read that finds no synthesized board synthesizes it itself
//! rather than serving emptiness.

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use futures::future::join_all;
use serde::{Deserialize, Serialize};

use crate::domain::config::{Board, Config};
use crate::domain::decay::{self, DecayPlan, MAX_HEAT_DELTA, SCALE_PRUNE_BELOW};
use crate::domain::ids::{self, IdError};
use crate::domain::period::{self, EventTimeError, EventWindow};
use crate::domain::scoring;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys};
use crate::redis::scripts::EVENT_MARKER_TTL_SECS;
use crate::redis::scripts::hot::{self as scripts, DecayReply, HeatReply, HeatWrite, MADE_UP_MARKER_TTL_SECS, Synthesis};
use crate::redis::store::{Connection, Store};

/// Largest `limit` of `GET /v1/hot/{board}`.
pub const MAX_HOT_LIMIT: u32 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum HotError {
    #[error("no decaying board named {0:?}")]
    UnknownBoard(String),
    #[error(transparent)]
    InvalidId(#[from] IdError),
    #[error("delta must be 1..={MAX_HEAT_DELTA}, not {0}")]
    DeltaOutOfRange(i64),
    #[error(transparent)]
    EventTime(#[from] EventTimeError),
    #[error("limit must be 1..={MAX_HOT_LIMIT}")]
    LimitOutOfRange,
    #[error("heat event {0:?} was already recorded with a different payload")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// `POST /v1/hot/{board}/items/{item_id}`'s body.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heat {
    /// Makes the heat exactly-once: a retry gets the first answer, another payload a 409.
    #[serde(default)]
    pub event_id: Option<String>,
    /// `1..=MAX_HEAT_DELTA`; 1 when omitted.
    #[serde(default)]
    pub delta: Option<i64>,
    /// Picks the hourly bucket; now when omitted. Same window as scored events.
    #[serde(default)]
    pub occurred_at: Option<DateTime<Utc>>,
}

/// What the event id's fingerprint covers: what the client said, so a retry that omits
/// `occurred_at` is still the same event.
#[derive(Serialize)]
struct HeatPayload<'a> {
    item_id: &'a str,
    delta: i64,
    occurred_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeatReceipt {
    pub board: String,
    pub item_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    pub duplicate: bool,
    pub delta: i64,
    /// Start of the hourly bucket the heat went to, in the board's timezone; `null` on scale
    /// boards, whose heat goes straight onto the board.
    pub bucket: Option<String>,
    /// The item's heat in that bucket (scale boards: on the board) right after this event.
    pub heat: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HotEntry {
    pub rank: u64,
    pub item_id: String,
    /// Weighted heat, rounded to `decay::SCORE_DECIMALS` places.
    pub score: f64,
}

/// `GET /v1/hot/{board}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HotTop {
    pub board: String,
    /// The minute the board was last synthesized for (scale boards: the start of the last
    /// scaled period), in the board's timezone; `null` before the first run.
    pub synthesized_at: Option<String>,
    /// What the scores cover: the hourly buckets merged, or the scaling schedule.
    pub window: HotWindow,
    pub entries: Vec<HotEntry>,
}

/// The window a decaying board's scores cover, as clients show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum HotWindow {
    /// Buckets from `from` (start of the oldest hour) to `to` (end of the newest), in the
    /// board's timezone.
    Window { hours: u32, from: String, to: String },
    /// Every score is multiplied by `factor` once per `every_minutes`.
    Scale { factor: f64, every_minutes: u32 },
}

impl HotWindow {
    fn of(plan: DecayPlan, at: DateTime<Utc>, tz: Tz) -> Self {
        match plan {
            DecayPlan::Window { window_hours, .. } => {
                let newest = decay::hour_start(at, tz);
                let oldest = newest - chrono::Duration::hours(i64::from(window_hours) - 1);
                HotWindow::Window {
                    hours: window_hours,
                    from: local_rfc3339(oldest, tz),
                    to: local_rfc3339(newest + chrono::Duration::hours(1), tz),
                }
            }
            DecayPlan::Scale { factor, every_minutes } => HotWindow::Scale { factor, every_minutes },
        }
    }
}

/// One board's share of a scheduled run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DecayRun {
    pub board: String,
    /// Items on the board after the run.
    pub members: u64,
    pub elapsed_ms: u64,
    /// The minute (scale boards: the period) had already been done, or a later one had.
    pub skipped: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("decaying board {board:?}: {source}")]
pub struct DecayFailure {
    pub board: String,
    #[source]
    pub source: StoreError,
}

#[derive(Clone)]
pub struct HotBoards {
    config: Arc<Config>,
    keys: Keys,
    store: Store,
    window: EventWindow,
}

impl HotBoards {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store) -> Self {
        Self { config, keys, store, window: EventWindow::default() }
    }

    fn decaying(&self, name: &str) -> Result<(&Board, DecayPlan), HotError> {
        self.config
            .board(name)
            .and_then(|board| board.decay.as_ref().map(|decay| (board, DecayPlan::from(decay))))
            .ok_or_else(|| HotError::UnknownBoard(name.to_owned()))
    }

    /// Adds heat to an item: to the hourly bucket of `occurred_at` (window boards) or to the
    /// board itself (scale boards), in one script call; exactly once when it has an event id.
    pub async fn add_heat(&self, board: &str, item_id: &str, heat: &Heat, now: DateTime<Utc>) -> Result<HeatReceipt, HotError> {
        let (board, plan) = self.decaying(board)?;
        ids::validate_id("item_id", item_id)?;
        if let Some(event_id) = &heat.event_id {
            ids::validate_id("event_id", event_id)?;
        }
        let delta = heat.delta.unwrap_or(1);
        if !(1..=MAX_HEAT_DELTA).contains(&delta) {
            return Err(HotError::DeltaOutOfRange(delta));
        }
        let mut occurred_at = heat.occurred_at.unwrap_or(now);
        // With an event id, a time outside the window refuses only a first delivery (a retry
        // is a duplicate whenever it arrives); the bucket named then is never written.
        let first_delivery = self.window.check(occurred_at, now).err();
        if let Some(refusal) = first_delivery {
            if heat.event_id.is_none() {
                return Err(refusal.into());
            }
            occurred_at = now;
        }

        let keys = self.keys.board(&board.name);
        let (key, ttl_secs, bucket_label) = match plan {
            DecayPlan::Window { window_hours, .. } => {
                let start = decay::hour_start(occurred_at, board.timezone);
                let ttl = period::ttl_secs(Some(decay::bucket_expires_at(start, window_hours)), now);
                (keys.hot_bucket(start), ttl, local_rfc3339(start, board.timezone))
            }
            DecayPlan::Scale { .. } => (keys.hot_board(), 0, String::new()),
        };
        // Heat without an event id still gets a marker, under a made-up id kept only as long as
        // a client library may re-send the call: one request is applied once.
        let (marker_id, marker_ttl) = match &heat.event_id {
            Some(event_id) => (event_id.clone(), EVENT_MARKER_TTL_SECS),
            None => (ids::made_up_id(), MADE_UP_MARKER_TTL_SECS),
        };
        let fingerprint = scoring::fingerprint(&HeatPayload { item_id, delta, occurred_at: heat.occurred_at });
        let write =
            HeatWrite { key, ttl_secs, bucket_label, item_id, delta, marker: (&marker_id, &fingerprint, marker_ttl), first_delivery };
        let mut conn = self.store.write_connection().await?;
        match scripts::add_heat(&mut conn, &keys, &write).await? {
            HeatReply::Conflict => Err(HotError::Conflict(heat.event_id.clone().unwrap_or_default())),
            HeatReply::OutsideWindow(refusal) => Err(refusal.into()),
            HeatReply::Applied { bucket_label, heat: value, duplicate } => Ok(HeatReceipt {
                board: board.name.clone(),
                item_id: item_id.to_owned(),
                event_id: heat.event_id.clone(),
                // Under a made-up id a duplicate is the client library's re-send of this request.
                duplicate: duplicate && heat.event_id.is_some(),
                delta,
                bucket: (!bucket_label.is_empty()).then_some(bucket_label),
                heat: decay::round_score(value),
            }),
        }
    }

    /// One scheduled run at `at`: every decaying board, concurrently. A board that fails does
    /// not stop the others; a retry of the run skips the boards already done.
    pub async fn decay_all(&self, at: DateTime<Utc>) -> Vec<Result<DecayRun, DecayFailure>> {
        let boards = self.config.boards().iter().filter_map(|board| board.decay.as_ref().map(|decay| (board, DecayPlan::from(decay))));
        join_all(boards.map(|(board, plan)| async move {
            self.decay_board(board, plan, at).await.map_err(|source| DecayFailure { board: board.name.clone(), source })
        }))
        .await
    }

    /// Synthesizes a window board for the minute of `at`, or scales a scale board for the
    /// period containing `at`, unless that was already done.
    async fn decay_board(&self, board: &Board, plan: DecayPlan, at: DateTime<Utc>) -> Result<DecayRun, StoreError> {
        let started = Instant::now();
        let keys = self.keys.board(&board.name);
        let mut conn = self.store.connection().await?;
        let DecayReply { ran, members } = match plan {
            DecayPlan::Window { window_hours, curve, synthesized_ttl_secs } => {
                let minute = decay::minute_of(at);
                let buckets = decay::window_buckets(minute, board.timezone, window_hours)
                    .into_iter()
                    .zip(curve.weights(window_hours))
                    .map(|(start, weight)| (keys.hot_bucket(start), weight))
                    .collect();
                let synthesis = Synthesis {
                    minute,
                    buckets,
                    board_ttl_secs: synthesized_ttl_secs,
                    // The meta hash outlives the buckets it describes, then goes with them.
                    meta_ttl_secs: (u64::from(window_hours) + 1) * 3600,
                };
                scripts::synthesize(&mut conn, &keys, &synthesis).await?
            }
            DecayPlan::Scale { factor, every_minutes } => {
                scripts::scale(&mut conn, &keys, decay::scale_slot(at, every_minutes), factor, SCALE_PRUNE_BELOW).await?
            }
        };
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        Ok(DecayRun { board: board.name.clone(), members, elapsed_ms, skipped: !ran })
    }

    /// The board's top `limit` items (default: the board's `top`). A window board with no
    /// synthesized board (a missed schedule, an expired or evicted key) is synthesized for the
    /// current minute first, under the same guard as the scheduled run.
    pub async fn top(&self, board: &str, limit: Option<u32>, now: DateTime<Utc>) -> Result<HotTop, HotError> {
        let (board, plan) = self.decaying(board)?;
        let limit = limit.unwrap_or(board.top);
        if !(1..=MAX_HOT_LIMIT).contains(&limit) {
            return Err(HotError::LimitOutOfRange);
        }
        let keys = self.keys.board(&board.name);
        let mut conn = self.store.connection().await?;
        let mut view = read_board(&mut conn, &keys, limit).await?;
        if view.entries.is_empty() && matches!(plan, DecayPlan::Window { .. }) {
            let run = self.decay_board(board, plan, now).await?;
            tracing::info!(board = %board.name, synthesized = !run.skipped, members = run.members, "read found no synthesized board");
            if !run.skipped {
                view = read_board(&mut conn, &keys, limit).await?;
            }
        }
        let synthesized_at = view.synthesized_at.and_then(|secs| DateTime::from_timestamp(secs, 0));
        Ok(HotTop {
            board: board.name.clone(),
            synthesized_at: synthesized_at.map(|at| local_rfc3339(at, board.timezone)),
            window: HotWindow::of(plan, synthesized_at.unwrap_or(now), board.timezone),
            entries: view
                .entries
                .into_iter()
                .zip(1..)
                .map(|((item_id, score), rank)| HotEntry { rank, item_id, score: decay::round_score(score) })
                .collect(),
        })
    }
}

struct BoardView {
    entries: Vec<(String, f64)>,
    synthesized_at: Option<i64>,
}

/// The top of the board and when it was made, from one consistent snapshot.
async fn read_board(conn: &mut Connection, keys: &BoardKeys, limit: u32) -> Result<BoardView, StoreError> {
    let (entries, synthesized_at) = redis::pipe()
        .atomic()
        .zrevrange_withscores(keys.hot_board(), 0, limit as isize - 1)
        .hget(keys.hot_meta(), "synthesized_at")
        .query_async(conn)
        .await?;
    Ok(BoardView { entries, synthesized_at })
}

fn local_rfc3339(at: DateTime<Utc>, tz: Tz) -> String {
    at.with_timezone(&tz).to_rfc3339()
}
