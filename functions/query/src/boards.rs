//! Live boards: `GET /v1/boards/{board}/top` and `GET /v1/boards/{board}/users/{user_id}`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use standings::domain::period::DateError;
use serde::{Deserialize, Serialize};
use standings::domain::config::{Board, BoardKind};
use standings::http::{ApiError, JsonBody, QueryParams};
use standings::domain::ids;
use standings::domain::period::{Period, PeriodInfo, PeriodKind};
use standings::services::reads::{ListedStanding, RankMode, Standing};

use crate::App;

pub const MAX_LIMIT: u64 = 1000;
pub const MAX_OFFSET: u64 = 1_000_000_000;
pub const MAX_AROUND: u64 = 50;

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

/// A page of a board (live, or an archived season).
#[derive(Serialize)]
pub(crate) struct TopResponse {
    pub(crate) board: String,
    #[serde(flatten)]
    pub(crate) period: PeriodInfo,
    pub(crate) total: u64,
    pub(crate) entries: Vec<Standing>,
}

/// A user's standing on a board (live, or in an archived season).
#[derive(Serialize)]
pub(crate) struct UserResponse {
    pub(crate) board: String,
    #[serde(flatten)]
    pub(crate) period: PeriodInfo,
    pub(crate) user_id: String,
    pub(crate) rank: Option<u64>,
    pub(crate) score: i64,
    pub(crate) percentile: Option<f64>,
    pub(crate) total: u64,
    pub(crate) around: Vec<Standing>,
}

fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, code, message)
}

/// The cumulative board a live route names.
pub fn live_board<'a>(app: &'a App, name: &str) -> Result<&'a Board, ApiError> {
    let board = app.config.board(name).ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "unknown_board", format!("no board named {name:?}")))?;
    if board.kind == BoardKind::Decaying {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "unknown_board", format!("{name:?} is a hot board: read it at /v1/hot/{name}")));
    }
    Ok(board)
}

/// `period` (default: the board's first) containing `at` (a local date; default: now).
pub fn resolve_period(app: &App, board: &Board, period: Option<&str>, at: Option<&str>) -> Result<Period, ApiError> {
    let kind = match period {
        None => board.periods[0],
        Some(name) => PeriodKind::parse(name).filter(|kind| board.periods.contains(kind)).ok_or_else(|| {
            let known: Vec<_> = board.periods.iter().map(|p| p.as_str()).collect();
            bad_request("unknown_period", format!("board {:?} has periods {known:?}", board.name))
        })?,
    };
    match at {
        None => Ok(Period::containing(kind, (app.clock)(), board.timezone)),
        Some(date) => standings::domain::period::parse_day(date).map(|date| Period::on_date(kind, date, board.timezone)).map_err(|e| match e {
            DateError::Malformed => bad_request("malformed", format!("at {e}")),
            DateError::OutOfRange => bad_request("out_of_range", format!("at {e}")),
        }),
    }
}

pub fn rank_mode(raw: Option<&str>) -> Result<RankMode, ApiError> {
    raw.map_or(Ok(RankMode::default()), |s| {
        RankMode::parse(s).ok_or_else(|| bad_request("malformed", "rank_mode must be unique or competition"))
    })
}

pub fn bounded(name: &str, value: Option<u64>, default: u64, range: std::ops::RangeInclusive<u64>) -> Result<u64, ApiError> {
    let value = value.unwrap_or(default);
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(bad_request("out_of_range", format!("{name} must be within {}..={}", range.start(), range.end())))
    }
}

pub fn with_cache(cache_control: &'static str, body: impl IntoResponse) -> Response {
    let mut response = body.into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static(cache_control));
    response
}

pub async fn top(
    State(app): State<Arc<App>>,
    Path(board): Path<String>,
    QueryParams(params): QueryParams<TopParams>,
) -> Result<Response, ApiError> {
    let board = live_board(&app, &board)?;
    let period = resolve_period(&app, board, params.period.as_deref(), params.at.as_deref())?;
    let limit = bounded("limit", params.limit, 30, 1..=MAX_LIMIT)?;
    let offset = bounded("offset", params.offset, 0, 0..=MAX_OFFSET)?;
    let mode = rank_mode(params.rank_mode.as_deref())?;
    let page = app.reader.page(board, &period, offset, limit, mode).await?;
    let body = TopResponse {
        board: board.name.clone(),
        period: period.info(),
        total: page.total,
        entries: page.entries,
    };
    Ok(with_cache(LIVE_TOP_CACHE, Json(body)))
}

pub async fn user(
    State(app): State<Arc<App>>,
    Path((board, user_id)): Path<(String, String)>,
    QueryParams(params): QueryParams<UserParams>,
) -> Result<Response, ApiError> {
    let board = live_board(&app, &board)?;
    ids::validate_id("user_id", &user_id).map_err(|e| bad_request("invalid_id", e.to_string()))?;
    let period = resolve_period(&app, board, params.period.as_deref(), params.at.as_deref())?;
    let around = bounded("around", params.around, 5, 0..=MAX_AROUND)?;
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

/// Most members one `POST /v1/boards/{board}/ranks` may list.
pub const MAX_LISTED: usize = 500;

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
    let board = live_board(&app, &board)?;
    if request.user_ids.len() > MAX_LISTED {
        return Err(ApiError::too_large(format!("at most {MAX_LISTED} user_ids")));
    }
    if request.user_ids.is_empty() {
        return Err(bad_request("malformed", "user_ids must list at least one user"));
    }
    for (index, user_id) in request.user_ids.iter().enumerate() {
        ids::validate_id("user_id", user_id).map_err(|e| bad_request("invalid_id", format!("user_ids[{index}]: {e}")))?;
    }
    let period = resolve_period(&app, board, request.period.as_deref(), request.at.as_deref())?;
    let mode = rank_mode(request.rank_mode.as_deref())?;
    let user_ids: Vec<&str> = request.user_ids.iter().map(String::as_str).collect();
    let listing = app.reader.members(board, &period, &user_ids, mode, request.include_missing).await?;
    let body = RanksResponse { board: board.name.clone(), period: period.info(), total: listing.total, entries: listing.entries };
    Ok(with_cache(LIVE_USER_CACHE, Json(body)))
}
