//! The answers of the read routes, live or of an archived season, as they are serialised.

use serde::Serialize;

use super::Standing;
use crate::domain::distribution::Distribution;
use crate::domain::period::PeriodInfo;
use crate::domain::statement::Statement;

/// A page of a board (live, or an archived season).
#[derive(Serialize)]
pub struct TopResponse {
    pub board: String,
    #[serde(flatten)]
    pub period: PeriodInfo,
    pub total: u64,
    pub entries: Vec<Standing>,
    /// A live board's: the `cursor` of the page after, `null` on the last page (absent from an
    /// archived season's pages, which page by offset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Option<String>>,
}

/// A user's standing on a board (live, or in an archived season).
#[derive(Serialize)]
pub struct UserResponse {
    pub board: String,
    #[serde(flatten)]
    pub period: PeriodInfo,
    pub user_id: String,
    pub rank: Option<u64>,
    pub score: Option<i64>,
    pub percentile: Option<f64>,
    pub total: u64,
    pub around: Vec<Standing>,
}

/// A board's distribution (live, or an archived season).
#[derive(Serialize)]
pub struct DistributionResponse {
    pub board: String,
    #[serde(flatten)]
    pub period: PeriodInfo,
    #[serde(flatten)]
    pub distribution: Distribution,
}

/// A user's score in one period, explained (`domain::statement`).
#[derive(Serialize)]
pub struct StatementResponse {
    pub board: String,
    #[serde(flatten)]
    pub period: PeriodInfo,
    pub user_id: String,
    #[serde(flatten)]
    pub statement: Statement,
}
