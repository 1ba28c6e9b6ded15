//! `GET /v1/boards/{board}/leagues`: for operators, the cohorts of every tier of a league period
//! (or of one tier), with their sizes.

use serde::Serialize;

use super::rules::ReadError;
use crate::domain::config::Board;
use crate::domain::period::Period;
use crate::services::leagues::{CohortSize, Leagues, league_of};

#[derive(Debug, Serialize)]
pub struct TierCohorts {
    pub tier: String,
    /// Every cohort the tier opened this period.
    pub cohorts_total: u64,
    pub cohorts: Vec<CohortSize>,
}

#[derive(Debug, Serialize)]
pub struct Cohorts {
    pub board: String,
    pub period: &'static str,
    pub period_id: String,
    pub cohort_size: u32,
    pub tiers: Vec<TierCohorts>,
}

/// Up to `limit` cohorts from the 0-based `offset` of each tier of `board`'s league in `period`,
/// or of the tier named `tier` only (`UnknownTier` for a name the league does not have).
pub async fn cohorts(
    leagues: &Leagues,
    board: &Board,
    period: Period,
    tier: Option<&str>,
    offset: u64,
    limit: u64,
) -> Result<Cohorts, ReadError> {
    let league = league_of(board)?;
    let names: Vec<&String> = match tier {
        None => league.tiers.iter().collect(),
        Some(tier) => vec![
            league
                .tiers
                .iter()
                .find(|t| *t == tier)
                .ok_or_else(|| ReadError::UnknownTier { board: board.name.clone(), known: league.tiers.clone() })?,
        ],
    };
    let mut tiers = Vec::with_capacity(names.len());
    for tier in names {
        let (cohorts, cohorts_total) = leagues.cohorts(board, &period, tier, offset, limit).await?;
        tiers.push(TierCohorts { tier: tier.clone(), cohorts_total, cohorts });
    }
    Ok(Cohorts { board: board.name.clone(), period: league.period.as_str(), period_id: period.id, cohort_size: league.cohort_size, tiers })
}
