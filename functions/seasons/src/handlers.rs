//! The routes: archived seasons (docs/archival.md), read from the DynamoDB table the archive function writes: a
//! season's top, its distribution, a user's standing in a season, a user's history. The same shapes as the live
//! routes. A season is served only once its archive is complete and verified; from then on it
//! never changes, so its responses may be cached for a day.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::Response;
use chrono::{DateTime, Utc};
use futures::future::try_join;
use serde::{Deserialize, Serialize};
use standings::archive::freeze::season_named;
use standings::archive::table::{ArchivedEntry, CompletedSeason, SeasonTable};
use standings::domain::config::Board;
use standings::domain::distribution::{DEFAULT_BUCKETS, Distribution, MAX_BUCKETS};
use standings::domain::ids;
use standings::domain::period::Period;
use standings::domain::scores;
use standings::http::{ApiError, QueryParams, with_cache};
use standings::services::profiles;
use standings::services::reads::rules::{
    DEFAULT_AROUND, DEFAULT_LIMIT, MAX_AROUND, MAX_LIMIT, MAX_OFFSET, ReadError, archived_board, around_window, bounded,
};
use standings::services::reads::{DistributionResponse, Holder, Standing, TopResponse, UserResponse, percentile};

use crate::App;

/// A complete season never changes.
const SEASON_CACHE: &str = "public, max-age=86400";
/// A user's history grows when the next season is archived.
const HISTORY_CACHE: &str = "public, max-age=3600";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopParams {
    limit: Option<u64>,
    offset: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserParams {
    around: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistributionParams {
    buckets: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryParams {
    board: Option<String>,
}

#[derive(Serialize)]
struct PastSeason {
    board: String,
    season: String,
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

fn table(app: &App) -> Result<&SeasonTable, ReadError> {
    app.archive.as_ref().ok_or(ReadError::ArchiveNotConfigured)
}

fn named_season(board: &Board, season: &str) -> Result<Period, ReadError> {
    season_named(season, board.timezone).ok_or_else(|| ReadError::BadSeason(season.to_owned()))
}

fn complete(completed: Option<CompletedSeason>, board: &str, season: &str) -> Result<CompletedSeason, ReadError> {
    completed.ok_or_else(|| ReadError::SeasonNotArchived { board: board.to_owned(), season: season.to_owned() })
}

/// Archived entries as the live routes show them, with today's profiles (one pipeline).
async fn standings(app: &App, board: &Board, entries: Vec<ArchivedEntry>) -> Result<Vec<Standing>, ApiError> {
    let users: Vec<&str> = entries.iter().map(|entry| entry.user_id.as_str()).collect();
    let profiles = profiles::get_many(&app.store, &app.keys, &users).await?;
    Ok(entries
        .into_iter()
        .zip(profiles)
        .map(|(entry, profile)| Standing { rank: entry.rank, holder: Holder::new(board, entry.user_id, Some(entry.points), profile) })
        .collect())
}

/// `GET /v1/boards/{board}/seasons/{season}/top?limit=&offset=`
pub async fn season_top(
    State(app): State<Arc<App>>,
    Path((board, season)): Path<(String, String)>,
    QueryParams(params): QueryParams<TopParams>,
) -> Result<Response, ApiError> {
    let table = table(&app)?;
    let config = app.config_naming(&board).await?;
    let board = archived_board(&config, &board)?;
    let period = named_season(board, &season)?;
    let limit = bounded("limit", params.limit, DEFAULT_LIMIT, 1..=MAX_LIMIT)?;
    let offset = bounded("offset", params.offset, 0, 0..=MAX_OFFSET)?;
    let (completed, entries) =
        try_join(table.completed(&board.name, &season), table.ranks(&board.name, &season, offset + 1, offset + limit)).await?;
    let total = complete(completed, &board.name, &season)?.total;
    let entries = standings(&app, board, entries).await?;
    Ok(with_cache(SEASON_CACHE, Json(TopResponse { board: board.name.clone(), period: period.info(), total, entries, next_cursor: None })))
}

/// `GET /v1/boards/{board}/seasons/{season}/users/{user_id}?around=`
pub async fn season_user(
    State(app): State<Arc<App>>,
    Path((board, season, user_id)): Path<(String, String, String)>,
    QueryParams(params): QueryParams<UserParams>,
) -> Result<Response, ApiError> {
    let table = table(&app)?;
    let config = app.config_naming(&board).await?;
    let board = archived_board(&config, &board)?;
    let period = named_season(board, &season)?;
    ids::validate_id("user_id", &user_id)?;
    let around = bounded("around", params.around, DEFAULT_AROUND, 0..=MAX_AROUND)?;
    let (completed, entry) = try_join(table.completed(&board.name, &season), table.user_entry(&board.name, &season, &user_id)).await?;
    let total = complete(completed, &board.name, &season)?.total;
    let (rank, score, percentile, around) = match entry {
        None => (None, standings::domain::scores::absent_score(board), None, Vec::new()),
        Some(entry) => {
            let (first, last) = around_window(entry.rank, around, total);
            let neighbours = table.ranks(&board.name, &season, first, last).await?;
            (
                Some(entry.rank),
                Some(entry.points),
                Some(percentile(total.saturating_sub(entry.rank), total)),
                standings(&app, board, neighbours).await?,
            )
        }
    };
    let body = UserResponse { board: board.name.clone(), period: period.info(), user_id, rank, score, percentile, total, around };
    Ok(with_cache(SEASON_CACHE, Json(body)))
}

/// `GET /v1/boards/{board}/seasons/{season}/distribution?buckets=`: the distribution the
/// archive stored when it froze the season, the same shape as the live route's.
pub async fn season_distribution(
    State(app): State<Arc<App>>,
    Path((board, season)): Path<(String, String)>,
    QueryParams(params): QueryParams<DistributionParams>,
) -> Result<Response, ApiError> {
    let table = table(&app)?;
    let config = app.config_naming(&board).await?;
    let board = archived_board(&config, &board)?;
    let period = named_season(board, &season)?;
    let buckets = bounded("buckets", params.buckets, DEFAULT_BUCKETS, 1..=MAX_BUCKETS)?;
    let (completed, histogram) = try_join(table.completed(&board.name, &season), table.distribution(&board.name, &season, buckets)).await?;
    complete(completed, &board.name, &season)?;
    let histogram = histogram.ok_or_else(|| ReadError::DistributionNotArchived { board: board.name.clone(), season: season.clone() })?;
    let body = DistributionResponse {
        board: board.name.clone(),
        period: period.info(),
        distribution: Distribution::of(histogram, &scores::scale(board, &period)),
    };
    Ok(with_cache(SEASON_CACHE, Json(body)))
}

/// `GET /v1/users/{user_id}/seasons?board=`: newest season first within each board.
pub async fn user_seasons(
    State(app): State<Arc<App>>,
    Path(user_id): Path<String>,
    QueryParams(params): QueryParams<HistoryParams>,
) -> Result<Response, ApiError> {
    let table = table(&app)?;
    ids::validate_id("user_id", &user_id)?;
    if let Some(board) = &params.board {
        archived_board(&*app.config_naming(board).await?, board)?;
    }
    let seasons = table
        .user_history(&user_id, params.board.as_deref())
        .await?
        .into_iter()
        .map(|entry| PastSeason {
            percentile: percentile(entry.total.saturating_sub(entry.rank), entry.total),
            board: entry.board,
            season: entry.season,
            rank: entry.rank,
            score: entry.points,
            reached_at: entry.reached_at,
            total: entry.total,
        })
        .collect();
    Ok(with_cache(HISTORY_CACHE, Json(History { user_id, seasons })))
}
