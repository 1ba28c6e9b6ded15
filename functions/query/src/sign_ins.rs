//! `GET /v1/users/{user_id}/sign-ins?month=YYYY-MM`: a user's signed days and streak.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use standings::domain::sign_in::Calendar;
use standings::http::{ApiError, QueryParams};

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
    QueryParams(query): QueryParams<MonthQuery>,
) -> Result<Json<Calendar>, ApiError> {
    Ok(Json(app.services().await?.sign_ins.calendar(&user_id, query.month.as_deref(), (app.clock)()).await?))
}
