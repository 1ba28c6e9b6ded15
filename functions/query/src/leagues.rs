//! Leagues (docs/leagues.md): `GET /v1/boards/{board}/users/{user_id}/league?at=`,
//! `GET /v1/boards/{board}/users/{user_id}/league/history` and, for operators,
//! `GET /v1/boards/{board}/leagues?period=&tier=&offset=&limit=`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use standings::domain::ids;
use standings::domain::period::{Period, parse_day};
use standings::http::{ApiError, QueryParams, with_cache};
use standings::services::leagues::{HistoryEntry, league_of};
use standings::services::reads::cohorts;
use standings::services::reads::rules::{MAX_OFFSET, ReadError, bounded, live_board};

use crate::App;

/// A user's own league must reflect their last write: revalidate.
const USER_CACHE: &str = "private, no-cache";
/// Results change once a period, cohort sizes with every first write.
const OPERATOR_CACHE: &str = "public, max-age=5";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeagueParams {
    at: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CohortParams {
    period: Option<String>,
    tier: Option<String>,
    offset: Option<u64>,
    limit: Option<u64>,
}

/// Cohorts listed per tier at most (a tier of a million players has 33,334).
const MAX_COHORTS: u64 = 1000;
const DEFAULT_COHORTS: u64 = 100;

#[derive(Serialize)]
struct History {
    board: String,
    user_id: String,
    /// Newest first.
    results: Vec<HistoryEntry>,
}

pub async fn user(
    State(app): State<Arc<App>>,
    Path((board, user_id)): Path<(String, String)>,
    QueryParams(params): QueryParams<LeagueParams>,
) -> Result<Response, ApiError> {
    let config = app.config_naming(&board).await?;
    let board = live_board(&config, &board)?;
    ids::validate_id("user_id", &user_id)?;
    let league = league_of(board)?;
    let now = (app.clock)();
    let period = match params.at.as_deref() {
        None => Period::containing(league.period, now, board.timezone),
        Some(at) => Period::on_date(league.period, parse_day(at).map_err(ReadError::BadDate)?, board.timezone),
    };
    let body = app.leagues.user(board, &period, &user_id, now).await?;
    Ok(with_cache(USER_CACHE, Json(body)))
}

pub async fn history(State(app): State<Arc<App>>, Path((board, user_id)): Path<(String, String)>) -> Result<Response, ApiError> {
    let config = app.config_naming(&board).await?;
    let board = live_board(&config, &board)?;
    ids::validate_id("user_id", &user_id)?;
    let results = app.leagues.history(board, (app.clock)(), &user_id).await?;
    Ok(with_cache(USER_CACHE, Json(History { board: board.name.clone(), user_id, results })))
}

pub async fn cohorts(
    State(app): State<Arc<App>>,
    Path(board): Path<String>,
    QueryParams(params): QueryParams<CohortParams>,
) -> Result<Response, ApiError> {
    let config = app.config_naming(&board).await?;
    let board = live_board(&config, &board)?;
    let league = league_of(board)?;
    let period = match params.period.as_deref() {
        None => Period::containing(league.period, (app.clock)(), board.timezone),
        Some(id) => Period::named(league.period, id, board.timezone).map_err(ReadError::BadDate)?,
    };
    let offset = bounded("offset", params.offset, 0, 0..=MAX_OFFSET)?;
    let limit = bounded("limit", params.limit, DEFAULT_COHORTS, 1..=MAX_COHORTS)?;
    let body = cohorts::cohorts(&app.leagues, board, period, params.tier.as_deref(), offset, limit).await?;
    Ok(with_cache(OPERATOR_CACHE, Json(body)))
}
