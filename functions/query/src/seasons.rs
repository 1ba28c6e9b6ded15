//! Archived seasons (SPEC §4), read from the DynamoDB table the archive function writes: a
//! season's top, a user's standing in a season, a user's history. Same shapes as the live
//! routes. A season is served only once its archive is complete and verified; from then on it
//! never changes, so its responses may be cached for a day.

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use futures::future::{join_all, try_join};
use serde::{Deserialize, Serialize};
use standings::archiving::season_named;
use standings::config::Board;
use standings::http::ApiError;
use standings::ids;
use standings::profiles::{get_profile, Profile};
use standings::season_table::{ArchivedEntry, CompletedSeason, SeasonTable};

use crate::App;

/// A complete season never changes.
const SEASON_CACHE: &str = "public, max-age=86400";
/// A user's history grows when the next season is archived.
const HISTORY_CACHE: &str = "public, max-age=3600";
const DEFAULT_LIMIT: u64 = 30;
const MAX_LIMIT: u64 = 1000;
const DEFAULT_AROUND: u64 = 5;
const MAX_AROUND: u64 = 50;

#[derive(Deserialize)]
pub struct TopParams {
    limit: Option<u64>,
    offset: Option<u64>,
}

#[derive(Deserialize)]
pub struct AroundParams {
    around: Option<u64>,
}

#[derive(Deserialize)]
pub struct HistoryParams {
    board: Option<String>,
}

#[derive(Serialize)]
struct Entry {
    rank: u64,
    user_id: String,
    score: i64,
    reached_at: DateTime<Utc>,
    profile: Profile,
}

#[derive(Serialize)]
struct SeasonTop {
    board: String,
    period: &'static str,
    period_id: String,
    total: u64,
    entries: Vec<Entry>,
}

#[derive(Serialize)]
struct SeasonStanding {
    board: String,
    period: &'static str,
    period_id: String,
    user_id: String,
    /// `null` when the user had no points that season.
    rank: Option<u64>,
    score: i64,
    percentile: Option<f64>,
    around: Vec<Entry>,
}

#[derive(Serialize)]
struct PastSeason {
    board: String,
    period: &'static str,
    period_id: String,
    rank: u64,
    score: i64,
    reached_at: DateTime<Utc>,
    total: u64,
    percentile: f64,
}

#[derive(Serialize)]
struct History {
    user_id: String,
    seasons: Vec<PastSeason>,
}

/// Share of the season's members ranked strictly below `rank`, in percent, two decimals.
fn percentile(rank: u64, total: u64) -> f64 {
    if total == 0 {
        return 0.0;
    }
    (10_000.0 * total.saturating_sub(rank) as f64 / total as f64).round() / 100.0
}

/// Ranks `first..=last` of a `size`-wide window around `rank` among `total`: centred, and
/// shifted (not clipped) at either end of the board.
fn window(rank: u64, around: u64, total: u64) -> (u64, u64) {
    let size = 2 * around + 1;
    let first = rank.saturating_sub(around).max(1).min(total.saturating_sub(size - 1).max(1));
    (first, (first + size - 1).min(total))
}

fn cached(value: impl Serialize, policy: &'static str) -> Response {
    ([(header::CACHE_CONTROL, policy)], Json(value)).into_response()
}

fn params<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    query.map(|Query(params)| params).map_err(|e| ApiError::malformed(format!("invalid query string: {}", e.body_text())))
}

fn table(app: &App) -> Result<&SeasonTable, ApiError> {
    app.archive.as_ref().ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "archive_not_configured", "this deployment has no season archive (STANDINGS_TABLE)")
    })
}

fn archived_board<'a>(app: &'a App, name: &str) -> Result<&'a Board, ApiError> {
    app.config
        .board(name)
        .filter(|board| board.archive)
        .ok_or_else(|| ApiError::not_found(format!("no archived board {name:?}")))
}

fn checked_season(board: &Board, season: &str) -> Result<(), ApiError> {
    season_named(season, board.timezone)
        .map(drop)
        .ok_or_else(|| ApiError::malformed(format!("season {season:?} is not a month such as 2026-10")))
}

fn checked_user(user_id: &str) -> Result<(), ApiError> {
    ids::validate_id("user_id", user_id).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_id", e.to_string()))
}

fn complete(completed: Option<CompletedSeason>, board: &str, season: &str) -> Result<CompletedSeason, ApiError> {
    completed.ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "season_not_archived", format!("season {season} of board {board:?} is not archived (yet)"))
    })
}

/// Entries with each member's current profile, fetched concurrently (pipelined on the shared
/// connection).
async fn with_profiles(app: &App, entries: Vec<ArchivedEntry>) -> Result<Vec<Entry>, ApiError> {
    let profiles = join_all(entries.iter().map(|entry| get_profile(&app.store, &app.keys, &entry.user_id))).await;
    entries
        .into_iter()
        .zip(profiles)
        .map(|(entry, profile)| {
            Ok(Entry { rank: entry.rank, user_id: entry.user_id, score: entry.points, reached_at: entry.reached_at, profile: profile? })
        })
        .collect()
}

/// `GET /v1/boards/{board}/seasons/{season}/top?limit=&offset=`
pub async fn season_top(
    State(app): State<Arc<App>>,
    Path((board, season)): Path<(String, String)>,
    query: Result<Query<TopParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let params = params(query)?;
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::malformed(format!("limit must be 1..={MAX_LIMIT}")));
    }
    let offset = params.offset.unwrap_or(0);
    let table = table(&app)?;
    checked_season(archived_board(&app, &board)?, &season)?;
    let first = offset.saturating_add(1);
    let (completed, entries) =
        try_join(table.completed(&board, &season), table.ranks(&board, &season, first, offset.saturating_add(limit))).await?;
    let total = complete(completed, &board, &season)?.total;
    let entries = with_profiles(&app, entries).await?;
    Ok(cached(SeasonTop { board, period: "season", period_id: season, total, entries }, SEASON_CACHE))
}

/// `GET /v1/boards/{board}/seasons/{season}/users/{user_id}?around=`
pub async fn season_user(
    State(app): State<Arc<App>>,
    Path((board, season, user_id)): Path<(String, String, String)>,
    query: Result<Query<AroundParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let around = params(query)?.around.unwrap_or(DEFAULT_AROUND);
    if around > MAX_AROUND {
        return Err(ApiError::malformed(format!("around must be 0..={MAX_AROUND}")));
    }
    let table = table(&app)?;
    checked_season(archived_board(&app, &board)?, &season)?;
    checked_user(&user_id)?;
    let (completed, entry) = try_join(table.completed(&board, &season), table.user_entry(&board, &season, &user_id)).await?;
    let total = complete(completed, &board, &season)?.total;
    let standing = match entry {
        None => SeasonStanding { board, period: "season", period_id: season, user_id, rank: None, score: 0, percentile: None, around: Vec::new() },
        Some(entry) => {
            let (first, last) = window(entry.rank, around, total);
            let neighbours = table.ranks(&board, &season, first, last).await?;
            SeasonStanding {
                rank: Some(entry.rank),
                score: entry.points,
                percentile: Some(percentile(entry.rank, total)),
                around: with_profiles(&app, neighbours).await?,
                board,
                period: "season",
                period_id: season,
                user_id,
            }
        }
    };
    Ok(cached(standing, SEASON_CACHE))
}

/// `GET /v1/users/{user_id}/seasons?board=`: newest season first within each board.
pub async fn user_seasons(
    State(app): State<Arc<App>>,
    Path(user_id): Path<String>,
    query: Result<Query<HistoryParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let board = params(query)?.board;
    let table = table(&app)?;
    checked_user(&user_id)?;
    if let Some(board) = &board {
        archived_board(&app, board)?;
    }
    let seasons = table
        .user_history(&user_id, board.as_deref())
        .await?
        .into_iter()
        .map(|entry| PastSeason {
            percentile: percentile(entry.rank, entry.total),
            board: entry.board,
            period: "season",
            period_id: entry.season,
            rank: entry.rank,
            score: entry.points,
            reached_at: entry.reached_at,
            total: entry.total,
        })
        .collect();
    Ok(cached(History { user_id, seasons }, HISTORY_CACHE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_centred_and_shifted_at_the_ends_never_clipped() {
        assert_eq!(window(50, 5, 100), (45, 55));
        assert_eq!(window(1, 5, 100), (1, 11));
        assert_eq!(window(3, 5, 100), (1, 11));
        assert_eq!(window(100, 5, 100), (90, 100));
        assert_eq!(window(97, 5, 100), (90, 100));
        assert_eq!(window(2, 5, 4), (1, 4), "a board smaller than the window shows whole");
        assert_eq!(window(1, 0, 1), (1, 1));
    }

    #[test]
    fn percentile_is_the_share_strictly_below() {
        assert_eq!(percentile(1, 4), 75.0);
        assert_eq!(percentile(4, 4), 0.0);
        assert_eq!(percentile(1, 3), 66.67);
        assert_eq!(percentile(1, 1), 0.0);
    }
}
