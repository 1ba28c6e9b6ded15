//! Tournaments' reads (docs/tournaments.md): the list, one tournament, an instance's standings
//! (live, frozen or archived) and its stored results with prizes. Open routes; in this function
//! because an ended instance's standings are read from the results table.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::Response;
use serde::Deserialize;
use standings::domain::config::tournament::State as TournamentState;
use standings::http::{ApiError, QueryParams, page_params, with_cache};
use standings::services::reads::rules::{DEFAULT_AROUND, DEFAULT_LIMIT, MAX_AROUND, MAX_LIMIT, MAX_OFFSET, ReadError, bounded};

use crate::App;

/// Live standings move with every score; a list changes as tournaments open and fill.
const LIVE_CACHE: &str = "public, max-age=5";
/// Stored results never change.
const RESULTS_CACHE: &str = "public, max-age=86400";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    category: Option<String>,
    state: Option<String>,
    limit: Option<u64>,
    cursor: Option<String>,
}

fn state(raw: Option<&str>) -> Result<Option<TournamentState>, ApiError> {
    match raw {
        None => Ok(None),
        Some("upcoming") => Ok(Some(TournamentState::Upcoming)),
        Some("open") => Ok(Some(TournamentState::Open)),
        Some("ended") => Ok(Some(TournamentState::Ended)),
        Some(_) => Err(ApiError::malformed("state must be upcoming, open or ended")),
    }
}

/// `GET /v1/tournaments?category=&state=&limit=&cursor=`
pub async fn list(State(app): State<Arc<App>>, QueryParams(params): QueryParams<ListParams>) -> Result<Response, ApiError> {
    let state = state(params.state.as_deref())?;
    let (limit, cursor) = page_params(params.limit, params.cursor.as_deref())?;
    let page = app.tournaments().await?.views((params.category.as_deref(), state), cursor, limit, (app.clock)()).await?;
    Ok(with_cache(LIVE_CACHE, Json(page)))
}

/// `GET /v1/tournaments/{tournament_id}`
pub async fn one(State(app): State<Arc<App>>, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(with_cache(LIVE_CACHE, Json(app.tournaments_naming(&id).await?.view(&id, (app.clock)()).await?)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopParams {
    limit: Option<u64>,
    offset: Option<u64>,
    instance: Option<String>,
}

/// `GET /v1/tournaments/{tournament_id}/top?limit=&offset=&instance=`
pub async fn top(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    QueryParams(params): QueryParams<TopParams>,
) -> Result<Response, ApiError> {
    let table = app.archive.as_ref();
    let limit = bounded("limit", params.limit, DEFAULT_LIMIT, 1..=MAX_LIMIT)?;
    let offset = bounded("offset", params.offset, 0, 0..=MAX_OFFSET)?;
    let tournaments = app.tournaments_naming(&id).await?;
    let top = tournaments.top(&app.reader, table, &id, params.instance.as_deref(), offset, limit, (app.clock)()).await?;
    Ok(with_cache(if top.source == "archived" { RESULTS_CACHE } else { LIVE_CACHE }, Json(top)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserParams {
    around: Option<u64>,
    instance: Option<String>,
}

/// `GET /v1/tournaments/{tournament_id}/users/{user_id}?around=&instance=`
pub async fn user(
    State(app): State<Arc<App>>,
    Path((id, user_id)): Path<(String, String)>,
    QueryParams(params): QueryParams<UserParams>,
) -> Result<Response, ApiError> {
    let table = app.archive.as_ref();
    let around = bounded("around", params.around, DEFAULT_AROUND, 0..=MAX_AROUND)?;
    let tournaments = app.tournaments_naming(&id).await?;
    let standing = tournaments.player(&app.reader, table, &id, &user_id, params.instance.as_deref(), around, (app.clock)()).await?;
    Ok(with_cache(LIVE_CACHE, Json(standing)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultsParams {
    instance: Option<String>,
    cursor: Option<String>,
}

/// `GET /v1/tournaments/{tournament_id}/results?instance=&cursor=`
pub async fn results(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    QueryParams(params): QueryParams<ResultsParams>,
) -> Result<Response, ApiError> {
    let table = app.archive.as_ref().ok_or(ReadError::ArchiveNotConfigured)?;
    let cursor = match params.cursor.as_deref() {
        None => None,
        Some(cursor) => Some(
            cursor.parse::<u64>().ok().filter(|&rank| rank >= 1).ok_or_else(|| ApiError::malformed("cursor is not one this route gave"))?,
        ),
    };
    let results = app.tournaments_naming(&id).await?.results(table, &id, params.instance.as_deref(), cursor, (app.clock)()).await?;
    // Without `instance` the answer moves on at each instance's end: cached as a live read.
    let cache = if params.instance.is_some() { RESULTS_CACHE } else { LIVE_CACHE };
    Ok(with_cache(cache, Json(results)))
}
