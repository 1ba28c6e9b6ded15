//! The rules of a read request, before any store is asked: which board and period it names,
//! the limits on pages and windows, the rank mode, and the window around a member. Pure; time
//! is passed in. Every failure is a `ReadError`, mapped to HTTP in one place (`http::error`).

use std::ops::RangeInclusive;

use chrono::{DateTime, Utc};

use super::RankMode;
use crate::domain::config::{Board, BoardKind, Config};
use crate::domain::ids::{self, IdError};
use crate::domain::period::{DateError, Period, parse_day};
use crate::redis::error::StoreError;

/// Largest page of a board.
pub const MAX_LIMIT: u64 = 1000;
pub const DEFAULT_LIMIT: u64 = 30;
pub const MAX_OFFSET: u64 = 1_000_000_000;
/// Most members on each side of a member's own entry.
pub const MAX_AROUND: u64 = 50;
pub const DEFAULT_AROUND: u64 = 5;
/// Most members one `POST /v1/boards/{board}/ranks` may list.
pub const MAX_LISTED: usize = 500;

/// Why a read was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("no board named {0:?}")]
    UnknownBoard(String),
    #[error("{0:?} is a hot board: read it at /v1/hot/{0}")]
    HotBoard(String),
    #[error("no archived board named {0:?}")]
    NotArchived(String),
    #[error("board {board:?} has periods {known:?}")]
    UnknownPeriod { board: String, known: Vec<&'static str> },
    #[error("at {0}")]
    BadDate(DateError),
    #[error("rank_mode must be unique or competition")]
    BadRankMode,
    #[error("{0}")]
    BadCursor(String),
    #[error("{name} must be within {}..={}", range.start(), range.end())]
    OutOfRange { name: &'static str, range: RangeInclusive<u64> },
    #[error("user_ids must list at least one user")]
    NoUsers,
    #[error("at most {MAX_LISTED} user_ids")]
    TooManyUsers,
    #[error("{at}{error}")]
    InvalidId { at: String, error: IdError },
    #[error("season {0:?} is not a month such as 2026-10")]
    BadSeason(String),
    #[error("this deployment has no season archive (STANDINGS_TABLE)")]
    ArchiveNotConfigured,
    #[error("season {season} of board {board:?} is not archived (yet)")]
    SeasonNotArchived { board: String, season: String },
    #[error("{period} {period_id} of board {board:?} is closed and archived: statements are kept only while a period is live")]
    StatementGone { board: String, period: &'static str, period_id: String },
    #[error("season {season} of board {board:?} was archived before distributions were kept")]
    DistributionNotArchived { board: String, season: String },
    #[error("board {0:?} has no league")]
    NoLeague(String),
    #[error("board {board:?} has tiers {known:?}")]
    UnknownTier { board: String, known: Vec<String> },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[cfg(feature = "dynamodb")]
    #[error(transparent)]
    Table(#[from] crate::archive::table::TableError),
}

impl From<IdError> for ReadError {
    fn from(error: IdError) -> Self {
        Self::InvalidId { at: String::new(), error }
    }
}

/// The cumulative board a live route names (hot boards are read at `/v1/hot`).
pub fn live_board<'a>(config: &'a Config, name: &str) -> Result<&'a Board, ReadError> {
    let board = config.board(name).ok_or_else(|| ReadError::UnknownBoard(name.to_owned()))?;
    if board.kind == BoardKind::Decaying {
        return Err(ReadError::HotBoard(name.to_owned()));
    }
    Ok(board)
}

/// An archived board a season route names.
pub fn archived_board<'a>(config: &'a Config, name: &str) -> Result<&'a Board, ReadError> {
    config.board(name).filter(|board| board.archive).ok_or_else(|| ReadError::NotArchived(name.to_owned()))
}

/// `period` (default: the board's first) containing `at` (a local date; default: `now`).
pub fn resolve_period(board: &Board, period: Option<&str>, at: Option<&str>, now: DateTime<Utc>) -> Result<Period, ReadError> {
    let kind = match period {
        None => board.periods[0],
        Some(name) => board.period_kind(name).ok_or_else(|| ReadError::UnknownPeriod {
            board: board.name.clone(),
            known: board.periods.iter().map(|p| p.as_str()).collect(),
        })?,
    };
    match at {
        None => Ok(Period::containing(kind, now, board.timezone)),
        Some(date) => parse_day(date).map(|date| Period::on_date(kind, date, board.timezone)).map_err(ReadError::BadDate),
    }
}

pub fn rank_mode(raw: Option<&str>) -> Result<RankMode, ReadError> {
    raw.map_or(Ok(RankMode::default()), |s| RankMode::parse(s).ok_or(ReadError::BadRankMode))
}

/// `value` (or `default`) when within `range`.
pub fn bounded(name: &'static str, value: Option<u64>, default: u64, range: RangeInclusive<u64>) -> Result<u64, ReadError> {
    let value = value.unwrap_or(default);
    if range.contains(&value) { Ok(value) } else { Err(ReadError::OutOfRange { name, range }) }
}

/// The users of a ranks request: at least one, at most `MAX_LISTED`, each a valid id.
pub fn listed_users(user_ids: &[String]) -> Result<Vec<&str>, ReadError> {
    if user_ids.len() > MAX_LISTED {
        return Err(ReadError::TooManyUsers);
    }
    if user_ids.is_empty() {
        return Err(ReadError::NoUsers);
    }
    for (index, user_id) in user_ids.iter().enumerate() {
        ids::validate_id("user_id", user_id).map_err(|error| ReadError::InvalidId { at: format!("user_ids[{index}]: "), error })?;
    }
    Ok(user_ids.iter().map(String::as_str).collect())
}

/// Ranks `first..=last` of a window of `around` either side of `rank` among `total`: centred,
/// and shifted (not clipped) at either end of the board. `read_board.lua` places the live
/// window the same way inside its one consistent read.
pub fn around_window(rank: u64, around: u64, total: u64) -> (u64, u64) {
    let size = 2 * around + 1;
    let first = rank.saturating_sub(around).max(1).min(total.saturating_sub(size - 1).max(1));
    (first, (first + size - 1).min(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_centred_and_shifted_at_the_ends_never_clipped() {
        assert_eq!(around_window(50, 5, 100), (45, 55));
        assert_eq!(around_window(1, 5, 100), (1, 11));
        assert_eq!(around_window(3, 5, 100), (1, 11));
        assert_eq!(around_window(100, 5, 100), (90, 100));
        assert_eq!(around_window(97, 5, 100), (90, 100));
        assert_eq!(around_window(2, 5, 4), (1, 4), "a board smaller than the window shows whole");
        assert_eq!(around_window(1, 0, 1), (1, 1));
    }

    #[test]
    fn limits_name_their_range() {
        assert_eq!(bounded("limit", None, DEFAULT_LIMIT, 1..=MAX_LIMIT).unwrap(), 30);
        let error = bounded("limit", Some(0), DEFAULT_LIMIT, 1..=MAX_LIMIT).unwrap_err();
        assert_eq!(error.to_string(), "limit must be within 1..=1000");
        assert!(matches!(listed_users(&[]), Err(ReadError::NoUsers)));
        let bad = listed_users(&["ok".into(), "no spaces".into()]).unwrap_err();
        assert!(bad.to_string().starts_with("user_ids[1]: "), "{bad}");
    }
}
