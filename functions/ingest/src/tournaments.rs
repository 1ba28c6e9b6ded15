//! Tournaments' writes (docs/tournaments.md): joins and scores (scope `standings/write`), and
//! the admin routes that define one, edit it live, grant attempts, end its open instance early
//! and delete it (`standings/admin`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use standings::domain::ids;
use standings::http::routing::Routes;
use standings::http::{ApiError, JsonBody, QueryParams, Subject};
use standings::services::moderation::check_reason;
use standings::services::tournaments::{
    AttemptsGrant, AttemptsGranted, InstanceEnded, JoinReceipt, Play, PlayReceipt, TournamentDefinition, TournamentDeleted,
};

use crate::App;
use crate::admin::EndQuery;

pub fn write_routes() -> Routes<Arc<App>> {
    Routes::new().route(Method::POST, "/v1/tournaments/{tournament_id}/join", join).route(
        Method::POST,
        "/v1/tournaments/{tournament_id}/scores",
        score,
    )
}

pub fn admin_routes() -> Routes<Arc<App>> {
    Routes::new()
        .route(Method::PUT, "/v1/admin/tournaments/{tournament_id}", put)
        .route(Method::GET, "/v1/admin/tournaments/{tournament_id}", get)
        .route(Method::PATCH, "/v1/admin/tournaments/{tournament_id}", patch)
        .route(Method::DELETE, "/v1/admin/tournaments/{tournament_id}", delete)
        .route(Method::POST, "/v1/admin/tournaments/{tournament_id}/attempts", grant)
        .route(Method::POST, "/v1/admin/tournaments/{tournament_id}/end", end)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JoinRequest {
    user_id: String,
}

async fn join(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    JsonBody(request): JsonBody<JoinRequest>,
) -> Result<Json<JoinReceipt>, ApiError> {
    let services = app.services_naming(&id).await?;
    Ok(Json(app.timed("/v1/tournaments/{tournament_id}/join", services.tournaments.join(&id, &request.user_id, (app.clock)())).await?))
}

async fn score(State(app): State<Arc<App>>, Path(id): Path<String>, JsonBody(play): JsonBody<Play>) -> Result<Json<PlayReceipt>, ApiError> {
    tracing::Span::current().record("event_id", &*ids::loggable(&play.event_id));
    let services = app.services_naming(&id).await?;
    Ok(Json(app.timed("/v1/tournaments/{tournament_id}/scores", services.tournaments.submit(&id, &play, (app.clock)())).await?))
}

/// 201 when created; 200 when this very definition was there.
async fn put(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    Subject(actor): Subject,
    JsonBody(body): JsonBody<Value>,
) -> Result<(StatusCode, Json<TournamentDefinition>), ApiError> {
    let (created, definition) = app.tournaments.put(&id, &body, (app.clock)()).await?;
    app.defined(&id).await?;
    if created {
        tracing::warn!(tournament = %id, actor = ?actor, "tournament created");
    }
    Ok((if created { StatusCode::CREATED } else { StatusCode::OK }, Json(definition)))
}

/// 200 with the definition as edited (the same again: nothing changes twice).
async fn patch(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    Subject(actor): Subject,
    JsonBody(body): JsonBody<Value>,
) -> Result<Json<TournamentDefinition>, ApiError> {
    let edited = app.tournaments.patch(&id, &body, (app.clock)()).await?;
    app.catalog.invalidate();
    tracing::warn!(tournament = %id, actor = ?actor, "tournament edited");
    Ok(Json(edited))
}

/// 200: the player's attempts in the open instance, audited.
async fn grant(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    Subject(actor): Subject,
    JsonBody(request): JsonBody<AttemptsGrant>,
) -> Result<Json<AttemptsGranted>, ApiError> {
    check_reason(&request.reason)?;
    let services = app.services_naming(&id).await?;
    let granted = services.tournaments.grant(&id, &request, actor.as_deref(), (app.clock)()).await?;
    tracing::warn!(tournament = %id, instance = %granted.instance, actor = ?actor, "tournament attempts granted");
    Ok(Json(granted))
}

async fn get(State(app): State<Arc<App>>, Path(id): Path<String>) -> Result<Json<TournamentDefinition>, ApiError> {
    Ok(Json(app.tournaments.get(&id).await?))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct EndRequest {
    #[serde(default)]
    reason: Option<String>,
}

/// 202: the open instance takes no more joins or scores; its results follow within minutes.
async fn end(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    Subject(actor): Subject,
    JsonBody(request): JsonBody<EndRequest>,
) -> Result<(StatusCode, Json<InstanceEnded>), ApiError> {
    if let Some(reason) = &request.reason {
        check_reason(reason)?;
    }
    let ended = app.tournaments.end(&id, request.reason.as_deref(), (app.clock)()).await?;
    app.catalog.invalidate();
    tracing::warn!(tournament = %id, instance = %ended.instance, actor = ?actor, "tournament instance ended early");
    Ok((StatusCode::ACCEPTED, Json(ended)))
}

/// 202: the tournament takes no more joins or scores; its open instance ended now, its results
/// and its keys' release follow within minutes.
async fn delete(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    Subject(actor): Subject,
    QueryParams(query): QueryParams<EndQuery>,
) -> Result<(StatusCode, Json<TournamentDeleted>), ApiError> {
    if let Some(reason) = &query.reason {
        check_reason(reason)?;
    }
    let deleted = app.tournaments.delete(&id, query.reason.as_deref(), (app.clock)()).await?;
    app.catalog.invalidate();
    tracing::warn!(tournament = %id, actor = ?actor, "tournament deleted");
    Ok((StatusCode::ACCEPTED, Json(deleted)))
}
