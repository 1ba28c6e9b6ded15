//! The read path: pages of a board, a member with the entries around them, ranks in either
//! mode and percentiles, with profiles joined in at most one more round trip.

pub mod catalog;
pub mod cohorts;
mod responses;
pub mod rules;
pub mod sharded;
mod statements;

pub use responses::{DistributionResponse, StatementResponse, TopResponse, UserResponse};

use std::collections::BTreeMap;

use serde::Serialize;

use crate::domain::config::Board;
use crate::domain::distribution::{CUTOFF_SHARES, Distribution};
use crate::domain::guard;
use crate::domain::paging::RankCursor;
use crate::domain::period::Period;
use crate::domain::scores;
use crate::domain::tiebreak::Scale;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys, Layout};
use crate::redis::scripts::{self, MemberPlace, RawWindow, Window};
use crate::redis::sharded::ShardSet;
use crate::redis::store::Store;
use crate::services::profiles::{self, Profile};

/// How equal points rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RankMode {
    /// Every member has their own rank; equal points are ordered by who reached them first.
    #[default]
    Unique,
    /// Equal points share a rank and the next rank skips (1, 1, 3).
    Competition,
}

impl RankMode {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "unique" => Some(Self::Unique),
            "competition" => Some(Self::Competition),
            _ => None,
        }
    }
}

/// Who a row of a board is about and what they hold; every kind of row flattens it in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Holder {
    pub user_id: String,
    /// Whole points, never the composite; `null` for a listed user who has no score on a
    /// score board (`scores::absent_score`).
    pub score: Option<i64>,
    pub profile: Option<Profile>,
    /// Per-board counters derived from the score, e.g. `invite_count`.
    #[serde(flatten)]
    pub counts: BTreeMap<String, i64>,
}

impl Holder {
    pub fn new(board: &Board, user_id: String, score: Option<i64>, profile: Option<Profile>) -> Self {
        Self { user_id, score, profile, counts: counts(board, score.unwrap_or(0)) }
    }
}

/// One row of a leaderboard as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Standing {
    pub rank: u64,
    #[serde(flatten)]
    pub holder: Holder,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Page {
    pub total: u64,
    pub entries: Vec<Standing>,
    /// Where the page after starts (`None`: the page was not full, nothing is after it).
    #[serde(skip)]
    pub next: Option<RankCursor>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberStanding {
    pub total: u64,
    /// `None` when the user has no points on this board.
    pub rank: Option<u64>,
    /// `None` for a user not on a score board (`scores::absent_score`).
    pub score: Option<i64>,
    /// Share of members with strictly fewer points, in percent (two decimals).
    pub percentile: Option<f64>,
    pub around: Vec<Standing>,
}

/// A listed member ("my friends"): global rank beside the rank among the list itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListedStanding {
    /// Rank on the whole board; `None` when the member has no points on it.
    pub rank: Option<u64>,
    /// Rank among the listed members that are on the board (1..n), in the same rank mode.
    pub relative_rank: Option<u64>,
    #[serde(flatten)]
    pub holder: Holder,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Listing {
    pub total: u64,
    pub entries: Vec<ListedStanding>,
}

/// Orders a list of members by their places on the board (absent ones last, in request order)
/// and ranks them among themselves. Pure: unit-tested without Redis.
pub fn order_listing<'a>(
    members: &[&'a str],
    places: Vec<Option<MemberPlace>>,
    scale: &Scale,
    mode: RankMode,
) -> Vec<(&'a str, Option<MemberPlace>, Option<u64>)> {
    let (mut ranked, missing): (Vec<_>, Vec<_>) = members.iter().copied().zip(places).partition(|(_, place)| place.is_some());
    ranked.sort_by_key(|(_, place)| place.as_ref().map(|p| p.position));
    // Values, not scores: higher is better whatever the board's order.
    let points: Vec<i64> = ranked.iter().map(|(_, place)| place.as_ref().map_or(0, |p| scale.value(scale.score_of(p.composite)))).collect();
    let relative = points.iter().enumerate().map(|(index, own)| match mode {
        RankMode::Unique => index as u64 + 1,
        RankMode::Competition => points.iter().filter(|p| *p > own).count() as u64 + 1,
    });
    let ranked: Vec<_> = ranked.into_iter().zip(relative).map(|((member, place), relative)| (member, place, Some(relative))).collect();
    ranked.into_iter().chain(missing.into_iter().map(|(member, _)| (member, None, None))).collect()
}

/// Percentage of the board strictly below a member, rounded to two decimals. A board of one
/// has nobody below: 0.
pub fn percentile(below: u64, total: u64) -> f64 {
    if total == 0 {
        return 0.0;
    }
    (below as f64 * 10_000.0 / total as f64).round() / 100.0
}

/// A board with a single fixed-points rule also reports how many times it was earned, as
/// `<action>_count` (e.g. `invite_count` = points / 100 on an invite board).
pub fn count_field(board: &Board) -> Option<(String, i64)> {
    match board.rules.values().collect::<Vec<_>>().as_slice() {
        [rule] if rule.max_points.is_none() => Some((format!("{}_count", rule.action), rule.points)),
        _ => None,
    }
}

/// The `<action>_count` fields of a row with `score` points (see [`count_field`]).
pub fn counts(board: &Board, score: i64) -> BTreeMap<String, i64> {
    count_field(board).into_iter().map(|(name, points)| (name, score / points)).collect()
}

#[derive(Clone)]
pub struct Reader {
    keys: Keys,
    store: Store,
    /// Pages and neighbours come from a period's frozen board (a tournament's instance whose
    /// results are being archived), not its live one.
    frozen: bool,
    /// The function's clock: a period set the guard records as live now was lost if missing
    /// (docs/journal.md#losses).
    clock: crate::Clock,
}

impl Reader {
    pub fn new(keys: Keys, store: Store) -> Self {
        Self { keys, store, frozen: false, clock: crate::system_clock() }
    }

    /// Reads on `clock` (the function's, injected in tests).
    pub fn with_clock(mut self, clock: crate::Clock) -> Self {
        self.clock = clock;
        self
    }

    /// This reader, on frozen boards (`BoardKeys::frozen`).
    pub fn of_frozen(&self) -> Self {
        Self { frozen: true, ..self.clone() }
    }

    pub async fn page(&self, board: &Board, period: &Period, offset: u64, limit: u64, mode: RankMode) -> Result<Page, StoreError> {
        let (raw, scale) = self.read(board, period, Window::Page { offset, limit }, mode).await?;
        self.page_of(board, &scale, raw, limit, mode).await
    }

    /// `limit` entries ranked after `cursor`'s place (a keyset page, docs/api.md): one script
    /// call a shard (the board's one slot included), whatever moved above the cursor since the
    /// page that answered it. `None`: the cursor names a place in another scale than the board's
    /// scores are held in now (a move to another `max_score` since), read nowhere.
    pub async fn page_after(
        &self,
        board: &Board,
        period: &Period,
        cursor: &RankCursor,
        limit: u64,
        mode: RankMode,
    ) -> Result<Option<Page>, StoreError> {
        let Some((raw, scale)) = self
            .on_layout(board, period, |layout| async move {
                let scale = &scores::scale_held(board, period, layout.held_scale());
                if !cursor.is_in(scale) {
                    return Ok(None);
                }
                let conn = self.store.connection().await?;
                let sets = if layout.is_sharded() {
                    self.shard_sets(&layout, period)
                } else {
                    let keys = layout.shard(0);
                    let set = if self.frozen { keys.frozen(period) } else { keys.period(period) };
                    let journaled = self.keys.journal_on();
                    let now = (self.clock)().timestamp_millis();
                    let kept = journaled.then(|| keys.kept_field(&set).map(|field| (field, now))).flatten();
                    let closed = self.closed_field(period).map(|field| (keys.guard(), field));
                    vec![ShardSet { set, guard: journaled.then(|| keys.guard()), kept, closed }]
                };
                let raw = sharded::page_after(&conn, &sets, scale, cursor, limit, mode == RankMode::Competition).await?;
                Ok(Some((raw, *scale)))
            })
            .await?
        else {
            return Ok(None);
        };
        self.page_of(board, &scale, raw, limit, mode).await.map(Some)
    }

    async fn page_of(&self, board: &Board, scale: &Scale, raw: RawWindow, limit: u64, mode: RankMode) -> Result<Page, StoreError> {
        let next = raw
            .entries
            .last()
            .filter(|_| raw.entries.len() as u64 == limit)
            .map(|last| RankCursor::of(last.composite, scale.max_value, &last.member));
        let total = raw.total;
        Ok(Page { total, entries: self.standings(board, scale, raw, mode).await?, next })
    }

    pub async fn around(
        &self,
        board: &Board,
        period: &Period,
        user_id: &str,
        around: u64,
        mode: RankMode,
    ) -> Result<MemberStanding, StoreError> {
        let (raw, scale) = self.read(board, period, Window::Around { member: user_id, around }, mode).await?;
        let (total, below) = (raw.total, raw.below);
        let entries = self.standings(board, &scale, raw, mode).await?;
        let own = entries.iter().find(|e| e.holder.user_id == user_id);
        Ok(MemberStanding {
            total,
            rank: own.map(|e| e.rank),
            score: own.map_or(scores::absent_score(board), |e| e.holder.score),
            percentile: below.map(|b| percentile(b, total)),
            around: entries,
        })
    }

    /// The standing of each listed member (duplicates counted once), in board order.
    pub async fn members(
        &self,
        board: &Board,
        period: &Period,
        user_ids: &[&str],
        mode: RankMode,
        include_missing: bool,
    ) -> Result<Listing, StoreError> {
        let mut seen = std::collections::HashSet::new();
        let distinct: Vec<&str> = user_ids.iter().copied().filter(|id| seen.insert(*id)).collect();
        let members_of = &distinct;
        let ((total, places), scale) = self
            .on_layout(board, period, |layout| async move {
                let scale = scores::scale_held(board, period, layout.held_scale());
                let mut conn = self.store.connection().await?;
                let read = if layout.is_sharded() {
                    sharded::members(&conn, &layout, &self.shard_sets(&layout, period), &scale, members_of).await
                } else {
                    let keys = layout.shard(0);
                    let fence = self.fence(&keys, period);
                    scripts::read_members(&mut conn, &keys.period(period), fenced(&fence), &scale, members_of).await
                };
                Ok((read?, scale))
            })
            .await?;
        let ordered: Vec<_> =
            order_listing(&distinct, places, &scale, mode).into_iter().filter(|(_, place, _)| include_missing || place.is_some()).collect();
        let members: Vec<&str> = ordered.iter().map(|(member, ..)| *member).collect();
        let mut profiles = profiles::get_many(&self.store, &self.keys, &members).await?.into_iter();
        let entries = ordered
            .into_iter()
            .map(|(member, place, relative_rank)| {
                let score = place.as_ref().map(|p| scale.score_of(p.composite)).or(scores::absent_score(board));
                ListedStanding {
                    rank: place.map(|p| match mode {
                        RankMode::Unique => p.position + 1,
                        RankMode::Competition => p.above + 1,
                    }),
                    relative_rank,
                    holder: Holder::new(board, member.to_owned(), score, profiles.next().flatten()),
                }
            })
            .collect();
        Ok(Listing { total, entries })
    }

    /// The board's distribution in at most `buckets` buckets, with the cut-offs of
    /// `CUTOFF_SHARES`: one read-only script, one round trip.
    pub async fn distribution(&self, board: &Board, period: &Period, buckets: u64) -> Result<Distribution, StoreError> {
        let (histogram, scale) = self
            .on_layout(board, period, |layout| async move {
                let scale = scores::scale_held(board, period, layout.held_scale());
                let mut conn = self.store.connection().await?;
                let histogram = if layout.is_sharded() {
                    sharded::distribution(&conn, &self.shard_sets(&layout, period), &scale, buckets, &CUTOFF_SHARES).await
                } else {
                    let keys = layout.shard(0);
                    let (key, fence) = (keys.period(period), self.fence(&keys, period));
                    scripts::read_distribution(&mut conn, &key, fenced(&fence), &scale, buckets, &CUTOFF_SHARES).await
                };
                Ok((histogram?, scale))
            })
            .await?;
        Ok(Distribution::of(histogram, &scale))
    }

    /// `Store::on_read_layout` of this reader's keys; a read of `period` that found it closed for
    /// archiving answers `SeasonClosed`, named (docs/archival.md#live-routes).
    async fn on_layout<T, F, Fut>(&self, board: &Board, period: &Period, read: F) -> Result<T, StoreError>
    where
        F: Fn(Layout) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        self.store.on_read_layout(&self.keys, board, read).await.map_err(|error| match error.is_season_closed() {
            true => StoreError::SeasonClosed { board: board.name.clone(), season: period.id.clone() },
            false => error,
        })
    }

    /// A window of the board; `mode` says whether entries' `above` counts are read (a sharded
    /// board reads them in a round of their own, for competition ranks only).
    /// The scale its composites were read in comes with it (`Store::held_layout`).
    async fn read(&self, board: &Board, period: &Period, window: Window<'_>, mode: RankMode) -> Result<(RawWindow, Scale), StoreError> {
        self.on_layout(board, period, |layout| async move {
            let scale = &scores::scale_held(board, period, layout.held_scale());
            let mut conn = self.store.connection().await?;
            let raw = if layout.is_sharded() {
                let sets = self.shard_sets(&layout, period);
                match window {
                    Window::Page { offset, limit } => sharded::page(&conn, &sets, scale, offset, limit).await,
                    Window::Around { member, around } => {
                        sharded::around(&conn, &layout, &sets, scale, member, around, mode == RankMode::Competition).await
                    }
                }
            } else {
                let keys = layout.shard(0);
                let fence = self.fence(&keys, period);
                let set = if self.frozen { keys.frozen(period) } else { keys.period(period) };
                scripts::read_board(&mut conn, &set, fenced(&fence), scale, window).await
            };
            Ok((raw?, *scale))
        })
        .await
    }

    /// The guard whose fence a read honours: on a journaled deployment, a board being restored
    /// or lost answers `board_restoring` rather than a part of itself (docs/journal.md#fence).
    /// The guard and the clock's now in ms, as the read scripts take them.
    /// The sets of `period` a sharded read asks (`sharded::sets`), on this reader's clock.
    fn shard_sets(&self, layout: &Layout, period: &Period) -> Vec<ShardSet> {
        sharded::sets(&self.keys, layout, period, Some((self.clock)().timestamp_millis()))
    }

    /// Without a journal, a live read of a season passes the guard with 0 for its close alone
    /// (`read_fence`, docs/archival.md#live-routes).
    fn fence(&self, keys: &BoardKeys, period: &Period) -> Option<(String, i64)> {
        if self.keys.journal_on() {
            return Some((keys.guard(), (self.clock)().timestamp_millis()));
        }
        self.closed_field(period).map(|_| (keys.guard(), 0))
    }

    /// The `closed|` field a live read of `period` asks (none on frozen boards).
    fn closed_field(&self, period: &Period) -> Option<String> {
        guard::read_closed_field(period).filter(|_| !self.frozen)
    }

    async fn standings(&self, board: &Board, scale: &Scale, raw: RawWindow, mode: RankMode) -> Result<Vec<Standing>, StoreError> {
        let members: Vec<&str> = raw.entries.iter().map(|e| e.member.as_str()).collect();
        let mut profiles = profiles::get_many(&self.store, &self.keys, &members).await?.into_iter();
        Ok(raw
            .entries
            .iter()
            .zip(raw.start..)
            .map(|(entry, position)| {
                let score = scale.score_of(entry.composite);
                Standing {
                    rank: match mode {
                        RankMode::Unique => position + 1,
                        RankMode::Competition => entry.above + 1,
                    },
                    holder: Holder::new(board, entry.member.clone(), Some(score), profiles.next().flatten()),
                }
            })
            .collect())
    }
}

/// `Reader::fence` as the scripts' wrappers take it.
fn fenced(fence: &Option<(String, i64)>) -> Option<(&str, i64)> {
    fence.as_ref().map(|(guard, now)| (guard.as_str(), *now))
}

#[cfg(test)]
mod tests;
