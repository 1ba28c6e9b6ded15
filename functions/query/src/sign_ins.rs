//! `GET /v1/users/{user_id}/sign-ins?month=YYYY-MM`: a user's signed days and streak.

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::Json;
use serde::Deserialize;
use standings::http::ApiError;
use standings::sign_ins::{Calendar, SignIns};

use crate::App;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonthQuery {
    #[serde(default)]
    month: Option<String>,
}

pub async fn get_sign_ins(
    State(app): State<Arc<App>>,
    Path(user_id): Path<String>,
    query: Result<Query<MonthQuery>, QueryRejection>,
) -> Result<Json<Calendar>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::malformed(format!("invalid query: {}", e.body_text())))?;
    let sign_ins = SignIns::new(app.config.clone(), app.keys.clone(), app.store.clone());
    Ok(Json(sign_ins.calendar(&user_id, query.month.as_deref(), (app.clock)()).await?))
}
