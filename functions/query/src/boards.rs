//! Live boards: `GET /v1/boards/{board}/top`, `GET /v1/boards/{board}/users/{user_id}`,
//! `POST /v1/boards/{board}/ranks` and `GET /v1/boards/{board}/distribution`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use standings::domain::distribution::{DEFAULT_BUCKETS, MAX_BUCKETS};
use standings::domain::ids;
use standings::domain::paging::RankCursor;
use standings::domain::period::PeriodInfo;
use standings::http::{ApiError, JsonBody, QueryParams, with_cache};
use standings::services::reads::rules::{
    DEFAULT_AROUND, DEFAULT_LIMIT, MAX_AROUND, MAX_LIMIT, MAX_OFFSET, ReadError, bounded, listed_users, live_board, rank_mode,
    resolve_period,
};
use standings::services::reads::{DistributionResponse, ListedStanding, StatementResponse, TopResponse, UserResponse};

use crate::App;

/// Live boards change every second: shared caches may keep a page briefly.
const LIVE_TOP_CACHE: &str = "public, max-age=5";
/// A user's own standing must reflect their last write (read-after-write): revalidate.
const LIVE_USER_CACHE: &str = "private, no-cache";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopParams {
    period: Option<String>,
    at: Option<String>,
    limit: Option<u64>,
    offset: Option<u64>,
    /// A page's `next_cursor`: the page after it (instead of `offset`).
    cursor: Option<String>,
    rank_mode: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserParams {
    period: Option<String>,
    at: Option<String>,
    around: Option<u64>,
    rank_mode: Option<String>,
}

pub async fn top(
    State(app): State<Arc<App>>,
    Path(board): Path<String>,
    QueryParams(params): QueryParams<TopParams>,
) -> Result<Response, ApiError> {
    let config = app.config_naming(&board).await?;
    let board = live_board(&config, &board)?;
    let period = resolve_period(board, params.period.as_deref(), params.at.as_deref(), (app.clock)())?;
    let limit = bounded("limit", params.limit, DEFAULT_LIMIT, 1..=MAX_LIMIT)?;
    let offset = bounded("offset", params.offset, 0, 0..=MAX_OFFSET)?;
    let mode = rank_mode(params.rank_mode.as_deref())?;
    let page = match params.cursor.as_deref() {
        Some(_) if params.offset.is_some() => {
            return Err(ReadError::BadCursor("cursor and offset: give one (a cursor's page starts after it)".into()).into());
        }
        Some(cursor) => {
            let cursor = RankCursor::parse(cursor).map_err(ReadError::BadCursor)?;
            app.reader.page_after(board, &period, &cursor, limit, mode).await?.ok_or_else(|| {
                ReadError::BadCursor(format!(
                    "cursor {}~{} (of {}) names a place in the scores as they were held before the board's max_score changed: ask the first page again",
                    cursor.composite,
                    cursor.max_value.unwrap_or_default(),
                    ids::loggable(&cursor.member)
                ))
            })?
        }
        None => app.reader.page(board, &period, offset, limit, mode).await?,
    };
    let next_cursor = Some(page.next.map(|next| next.text()));
    let body = TopResponse { board: board.name.clone(), period: period.info(), total: page.total, entries: page.entries, next_cursor };
    Ok(with_cache(LIVE_TOP_CACHE, Json(body)))
}

pub async fn user(
    State(app): State<Arc<App>>,
    Path((board, user_id)): Path<(String, String)>,
    QueryParams(params): QueryParams<UserParams>,
) -> Result<Response, ApiError> {
    let config = app.config_naming(&board).await?;
    let board = live_board(&config, &board)?;
    ids::validate_id("user_id", &user_id)?;
    let period = resolve_period(board, params.period.as_deref(), params.at.as_deref(), (app.clock)())?;
    let around = bounded("around", params.around, DEFAULT_AROUND, 0..=MAX_AROUND)?;
    let mode = rank_mode(params.rank_mode.as_deref())?;
    let standing = app.reader.around(board, &period, &user_id, around, mode).await?;
    let body = UserResponse {
        board: board.name.clone(),
        period: period.info(),
        user_id,
        rank: standing.rank,
        score: standing.score,
        percentile: standing.percentile,
        total: standing.total,
        around: standing.around,
    };
    Ok(with_cache(LIVE_USER_CACHE, Json(body)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatementParams {
    period: Option<String>,
    at: Option<String>,
}

/// `GET /v1/boards/{board}/users/{user_id}/statement?period=&at=`: the user's score in that
/// period explained line by line (`domain::statement`).
pub async fn statement(
    State(app): State<Arc<App>>,
    Path((board, user_id)): Path<(String, String)>,
    QueryParams(params): QueryParams<StatementParams>,
) -> Result<Response, ApiError> {
    let config = app.config_naming(&board).await?;
    let board = live_board(&config, &board)?;
    ids::validate_id("user_id", &user_id)?;
    let period = resolve_period(board, params.period.as_deref(), params.at.as_deref(), (app.clock)())?;
    let statement = app.reader.statement(board, &period, &user_id).await?;
    let body = StatementResponse { board: board.name.clone(), period: period.info(), user_id, statement };
    Ok(with_cache(LIVE_USER_CACHE, Json(body)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RanksRequest {
    user_ids: Vec<String>,
    period: Option<String>,
    at: Option<String>,
    rank_mode: Option<String>,
    #[serde(default = "listed_by_default")]
    include_missing: bool,
}

fn listed_by_default() -> bool {
    true
}

#[derive(Serialize)]
struct RanksResponse {
    board: String,
    #[serde(flatten)]
    period: PeriodInfo,
    total: u64,
    entries: Vec<ListedStanding>,
}

/// `POST /v1/boards/{board}/ranks`: read-only, a POST because the list can be long.
pub async fn ranks(
    State(app): State<Arc<App>>,
    Path(board): Path<String>,
    JsonBody(request): JsonBody<RanksRequest>,
) -> Result<Response, ApiError> {
    let config = app.config_naming(&board).await?;
    let board = live_board(&config, &board)?;
    let user_ids = listed_users(&request.user_ids)?;
    let period = resolve_period(board, request.period.as_deref(), request.at.as_deref(), (app.clock)())?;
    let mode = rank_mode(request.rank_mode.as_deref())?;
    let listing = app.reader.members(board, &period, &user_ids, mode, request.include_missing).await?;
    let body = RanksResponse { board: board.name.clone(), period: period.info(), total: listing.total, entries: listing.entries };
    Ok(with_cache(LIVE_USER_CACHE, Json(body)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistributionParams {
    period: Option<String>,
    at: Option<String>,
    buckets: Option<u64>,
}

/// `GET /v1/boards/{board}/distribution?period=&at=&buckets=`: cacheable like a top page.
pub async fn distribution(
    State(app): State<Arc<App>>,
    Path(board): Path<String>,
    QueryParams(params): QueryParams<DistributionParams>,
) -> Result<Response, ApiError> {
    let config = app.config_naming(&board).await?;
    let board = live_board(&config, &board)?;
    let period = resolve_period(board, params.period.as_deref(), params.at.as_deref(), (app.clock)())?;
    let buckets = bounded("buckets", params.buckets, DEFAULT_BUCKETS, 1..=MAX_BUCKETS)?;
    let distribution = app.reader.distribution(board, &period, buckets).await?;
    Ok(with_cache(LIVE_TOP_CACHE, Json(DistributionResponse { board: board.name.clone(), period: period.info(), distribution })))
}
