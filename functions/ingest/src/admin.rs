//! Admin routes (scope `standings/admin`, applied by `router`): bans and audited score
//! corrections, runtime boards (docs/runtime-boards.md).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use standings::http::routing::Routes;
use standings::http::{ApiError, JsonBody, QueryParams, Subject};
use standings::services::corrections::{CorrectionReceipt, CorrectionRequest};
use standings::services::moderation::{AuditPage, BanReceipt, check_reason};
use standings::services::runtime_boards::BoardDefinition;

use crate::App;

/// Routes that need the `standings/admin` scope.
pub fn routes() -> Routes<Arc<App>> {
    Routes::new()
        .route(Method::POST, "/v1/admin/users/{user_id}/ban", ban)
        .route(Method::DELETE, "/v1/admin/users/{user_id}/ban", unban)
        .route(Method::POST, "/v1/admin/boards/{board}/users/{user_id}/corrections", correct)
        .route(Method::GET, "/v1/admin/audit", audit)
        .route(Method::PUT, "/v1/admin/boards/{board}", put_board)
        .route(Method::GET, "/v1/admin/boards/{board}", get_board)
        .route(Method::DELETE, "/v1/admin/boards/{board}", delete_board)
}

/// 201 with the definition when created; 200 when this very definition was there.
async fn put_board(
    State(app): State<Arc<App>>,
    Path(board): Path<String>,
    Subject(actor): Subject,
    JsonBody(body): JsonBody<Value>,
) -> Result<(StatusCode, Json<BoardDefinition>), ApiError> {
    let (created, definition) = app.boards.put(&board, &body, (app.clock)()).await?;
    app.defined(&board).await?;
    if created {
        tracing::warn!(board = %board, actor = ?actor, "runtime board created");
    }
    Ok((if created { StatusCode::CREATED } else { StatusCode::OK }, Json(definition)))
}

async fn get_board(State(app): State<Arc<App>>, Path(board): Path<String>) -> Result<Json<BoardDefinition>, ApiError> {
    Ok(Json(app.boards.get(&board).await?))
}

/// `?reason=` of a deletion (a runtime board's, a tournament's).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EndQuery {
    #[serde(default)]
    pub(crate) reason: Option<String>,
}

/// 202: the board takes no more writes; its end (archive, keys freed) follows.
async fn delete_board(
    State(app): State<Arc<App>>,
    Path(board): Path<String>,
    Subject(actor): Subject,
    QueryParams(query): QueryParams<EndQuery>,
) -> Result<(StatusCode, Json<BoardDefinition>), ApiError> {
    if let Some(reason) = &query.reason {
        check_reason(reason)?;
    }
    let ended = app.boards.end(&board, query.reason.as_deref(), (app.clock)()).await?;
    app.catalog.invalidate();
    tracing::warn!(board = %board, actor = ?actor, "runtime board deleted");
    Ok((StatusCode::ACCEPTED, Json(ended)))
}

async fn ban(State(app): State<Arc<App>>, Path(user_id): Path<String>, Subject(actor): Subject) -> Result<Json<BanReceipt>, ApiError> {
    let services = app.recorded(&user_id, true).await?;
    let receipt = app.timed("/v1/admin/users/{user_id}/ban", services.moderation.ban(&user_id, actor.as_deref(), (app.clock)())).await?;
    tracing::warn!(user_id = %user_id, actor = ?actor, removed = receipt.removed.len(), "user banned");
    Ok(Json(receipt))
}

async fn unban(State(app): State<Arc<App>>, Path(user_id): Path<String>, Subject(actor): Subject) -> Result<Json<BanReceipt>, ApiError> {
    let services = app.recorded(&user_id, false).await?;
    let receipt = app.timed("/v1/admin/users/{user_id}/ban", services.moderation.unban(&user_id, actor.as_deref(), (app.clock)())).await?;
    tracing::warn!(user_id = %user_id, actor = ?actor, "user unbanned");
    Ok(Json(receipt))
}

async fn correct(
    State(app): State<Arc<App>>,
    Path((board, user_id)): Path<(String, String)>,
    Subject(actor): Subject,
    JsonBody(request): JsonBody<CorrectionRequest>,
) -> Result<Json<CorrectionReceipt>, ApiError> {
    let services = app.services_naming(&board).await?;
    let correction = services.moderation.correct(&board, &user_id, &request, actor.as_deref(), (app.clock)());
    let receipt = app.timed("/v1/admin/boards/{board}/users/{user_id}/corrections", correction).await?;
    tracing::warn!(board = %board, user_id = %user_id, delta = request.delta, actor = ?actor, "score corrected");
    Ok(Json(receipt))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    board: String,
    #[serde(default)]
    limit: Option<usize>,
}

async fn audit(State(app): State<Arc<App>>, QueryParams(query): QueryParams<AuditQuery>) -> Result<Json<AuditPage>, ApiError> {
    Ok(Json(app.timed("/v1/admin/audit", app.services_naming(&query.board).await?.moderation.audit(&query.board, query.limit)).await?))
}
