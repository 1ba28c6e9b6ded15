//! Admin routes (scope `standings/admin`, applied by `router`): bans and audited score
//! corrections.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::Method;
use serde::Deserialize;
use standings::http::routing::Routes;
use standings::http::{ApiError, JsonBody, QueryParams, Subject};
use standings::services::corrections::{CorrectionReceipt, CorrectionRequest};
use standings::services::moderation::{AuditPage, BanReceipt};

use crate::App;

/// Routes that need the `standings/admin` scope.
pub fn routes() -> Routes<Arc<App>> {
    Routes::new()
        .route(Method::POST, "/v1/admin/users/{user_id}/ban", ban)
        .route(Method::DELETE, "/v1/admin/users/{user_id}/ban", unban)
        .route(Method::POST, "/v1/admin/boards/{board}/users/{user_id}/corrections", correct)
        .route(Method::GET, "/v1/admin/audit", audit)
}

async fn ban(State(app): State<Arc<App>>, Path(user_id): Path<String>, Subject(actor): Subject) -> Result<Json<BanReceipt>, ApiError> {
    let receipt = app.timed("/v1/admin/users/{user_id}/ban", app.moderation.ban(&user_id, actor.as_deref(), (app.clock)())).await?;
    tracing::warn!(user_id = %user_id, actor = ?actor, removed = receipt.removed.len(), "user banned");
    Ok(Json(receipt))
}

async fn unban(State(app): State<Arc<App>>, Path(user_id): Path<String>, Subject(actor): Subject) -> Result<Json<BanReceipt>, ApiError> {
    let receipt = app.timed("/v1/admin/users/{user_id}/ban", app.moderation.unban(&user_id, actor.as_deref(), (app.clock)())).await?;
    tracing::warn!(user_id = %user_id, actor = ?actor, "user unbanned");
    Ok(Json(receipt))
}

async fn correct(
    State(app): State<Arc<App>>,
    Path((board, user_id)): Path<(String, String)>,
    Subject(actor): Subject,
    JsonBody(request): JsonBody<CorrectionRequest>,
) -> Result<Json<CorrectionReceipt>, ApiError> {
    let correction = app.moderation.correct(&board, &user_id, &request, actor.as_deref(), (app.clock)());
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
    Ok(Json(app.timed("/v1/admin/audit", app.moderation.audit(&query.board, query.limit)).await?))
}
