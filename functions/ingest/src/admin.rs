//! Admin routes (scope `standings/admin`): bans and audited score corrections.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use standings::http::{require_admin, ApiError, JsonBody, Subject};
use standings::moderation::{AuditPage, BanReceipt, CorrectionReceipt, CorrectionRequest};

use crate::App;

pub fn routes(app: &App) -> Router<Arc<App>> {
    Router::new()
        .route("/v1/admin/users/{user_id}/ban", post(ban).delete(unban))
        .route("/v1/admin/boards/{board}/users/{user_id}/corrections", post(correct))
        .route("/v1/admin/audit", get(audit))
        .route_layer(from_fn_with_state(app.auth, require_admin))
}

async fn ban(State(app): State<Arc<App>>, Path(user_id): Path<String>, Subject(actor): Subject) -> Result<Json<BanReceipt>, ApiError> {
    let receipt = app.moderation.ban(&user_id, actor.as_deref(), (app.clock)()).await?;
    tracing::warn!(user_id = %user_id, actor = ?actor, removed = receipt.removed.len(), "user banned");
    Ok(Json(receipt))
}

async fn unban(State(app): State<Arc<App>>, Path(user_id): Path<String>, Subject(actor): Subject) -> Result<Json<BanReceipt>, ApiError> {
    let receipt = app.moderation.unban(&user_id, actor.as_deref(), (app.clock)()).await?;
    tracing::warn!(user_id = %user_id, actor = ?actor, "user unbanned");
    Ok(Json(receipt))
}

async fn correct(
    State(app): State<Arc<App>>,
    Path((board, user_id)): Path<(String, String)>,
    Subject(actor): Subject,
    JsonBody(request): JsonBody<CorrectionRequest>,
) -> Result<Json<CorrectionReceipt>, ApiError> {
    let receipt = app.moderation.correct(&board, &user_id, &request, actor.as_deref(), (app.clock)()).await?;
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

async fn audit(State(app): State<Arc<App>>, query: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>) -> Result<Json<AuditPage>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::malformed(format!("invalid query: {}", e.body_text())))?;
    Ok(Json(app.moderation.audit(&query.board, query.limit).await?))
}
