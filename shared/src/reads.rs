//! The read path: pages of a board, a member with the entries around them, ranks in either
//! mode and percentiles, with profiles joined in at most one more round trip.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::config::Board;
use crate::keys::Keys;
use crate::period::Period;
use crate::profiles::{self, Profile};
use crate::scripts::{self, RawWindow, Window};
use crate::store::{Store, StoreError};
use crate::tiebreak;

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

/// One row of a leaderboard as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Standing {
    pub rank: u64,
    pub user_id: String,
    /// Whole points, never the composite.
    pub score: i64,
    pub profile: Option<Profile>,
    /// Per-board counters derived from the score, e.g. `invite_count`.
    #[serde(flatten)]
    pub counts: BTreeMap<String, i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Page {
    pub total: u64,
    pub entries: Vec<Standing>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberStanding {
    pub total: u64,
    /// `None` when the user has no points on this board.
    pub rank: Option<u64>,
    pub score: i64,
    /// Share of members with strictly fewer points, in percent (two decimals).
    pub percentile: Option<f64>,
    pub around: Vec<Standing>,
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
/// `<action>_count` (seed 002's `invite_count` = points / 100).
pub fn count_field(board: &Board) -> Option<(String, i64)> {
    match board.rules.values().collect::<Vec<_>>().as_slice() {
        [rule] if rule.max_points.is_none() => Some((format!("{}_count", rule.action), rule.points)),
        _ => None,
    }
}

#[derive(Clone)]
pub struct Reader {
    keys: Keys,
    store: Store,
}

impl Reader {
    pub fn new(keys: Keys, store: Store) -> Self {
        Self { keys, store }
    }

    pub async fn page(&self, board: &Board, period: &Period, offset: u64, limit: u64, mode: RankMode) -> Result<Page, StoreError> {
        let raw = self.read(board, period, Window::Page { offset, limit }).await?;
        let total = raw.total;
        Ok(Page { total, entries: self.standings(board, raw, mode).await? })
    }

    pub async fn around(
        &self,
        board: &Board,
        period: &Period,
        user_id: &str,
        around: u64,
        mode: RankMode,
    ) -> Result<MemberStanding, StoreError> {
        let raw = self.read(board, period, Window::Around { member: user_id, around }).await?;
        let (total, below) = (raw.total, raw.below);
        let entries = self.standings(board, raw, mode).await?;
        let own = entries.iter().find(|e| e.user_id == user_id);
        Ok(MemberStanding {
            total,
            rank: own.map(|e| e.rank),
            score: own.map_or(0, |e| e.score),
            percentile: below.map(|b| percentile(b, total)),
            around: entries,
        })
    }

    async fn read(&self, board: &Board, period: &Period, window: Window<'_>) -> Result<RawWindow, StoreError> {
        let mut conn = self.store.connection().await?;
        scripts::read_board(&mut conn, &self.keys.board(&board.name).period(period), window).await
    }

    async fn standings(&self, board: &Board, raw: RawWindow, mode: RankMode) -> Result<Vec<Standing>, StoreError> {
        let members: Vec<&str> = raw.entries.iter().map(|e| e.member.as_str()).collect();
        let mut profiles = profiles::get_many(&self.store, &self.keys, &members).await?.into_iter();
        let count = count_field(board);
        Ok(raw
            .entries
            .iter()
            .zip(raw.start..)
            .map(|(entry, position)| {
                let score = tiebreak::points_of(entry.composite);
                Standing {
                    rank: match mode {
                        RankMode::Unique => position + 1,
                        RankMode::Competition => entry.above + 1,
                    },
                    user_id: entry.member.clone(),
                    score,
                    profile: profiles.next().flatten(),
                    counts: count.iter().map(|(name, points)| (name.clone(), score / points)).collect(),
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn percentile_is_the_share_strictly_below() {
        assert_eq!(percentile(0, 1), 0.0);
        assert_eq!(percentile(9, 10), 90.0);
        assert_eq!(percentile(1, 3), 33.33);
        assert_eq!(percentile(0, 0), 0.0);
    }

    #[test]
    fn only_single_rule_boards_report_a_count() {
        let config = Config::default_boards();
        assert_eq!(count_field(config.board("invites").unwrap()), Some(("invite_count".into(), 100)));
        assert_eq!(count_field(config.board("activity").unwrap()), None);
    }

    #[test]
    fn rank_modes_parse() {
        assert_eq!(RankMode::parse("competition"), Some(RankMode::Competition));
        assert_eq!(RankMode::parse("dense"), None);
    }
}
