//! `GET /v1/boards`, a page at a time: what a client needs to render a board picker and explain scoring, as the
//! configuration says now.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::config::{Board, BoardKind, Config, Decay, Keep, Order, RateLimit, Rule, SignIn};
use crate::domain::paging;
use crate::domain::period::{Period, PeriodInfo};

#[derive(Serialize)]
pub struct BoardSummary<'a> {
    name: &'a str,
    kind: BoardKind,
    timezone: &'static str,
    top: u32,
    archive: bool,
    /// Which end is the top: `asc` only on score boards where lower is better.
    order: Order,
    /// Score boards: which submission is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    keep: Option<Keep>,
    /// Score boards: the per-user limit on submissions.
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_limit: Option<RateLimit>,
    /// Whether scores on this board are explained line by line (`…/statement`).
    statements: bool,
    /// The current period of each kind, with its start and next reset.
    periods: Vec<PeriodInfo>,
    rules: Vec<&'a Rule>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sign_in: Option<&'a SignIn>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decay: Option<&'a Decay>,
    /// The board's league (docs/leagues.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    league: Option<LeagueSummary<'a>>,
}

#[derive(Serialize)]
pub struct LeagueSummary<'a> {
    period: &'static str,
    cohort_size: u32,
    /// Lowest first.
    tiers: &'a [String],
}

#[derive(Serialize)]
pub struct Catalog<'a> {
    boards: Vec<BoardSummary<'a>>,
    /// The next page's `cursor` (`null`: this page is the last).
    next_cursor: Option<String>,
}

fn summary<'a>(board: &'a Board, now: DateTime<Utc>) -> BoardSummary<'a> {
    BoardSummary {
        name: &board.name,
        kind: board.kind,
        timezone: board.timezone.name(),
        top: board.top,
        archive: board.archive,
        order: board.scores.map_or(Order::Desc, |rules| rules.order),
        keep: board.scores.map(|rules| rules.keep),
        rate_limit: board.scores.and_then(|rules| rules.rate_limit),
        statements: board.statements,
        periods: board.periods.iter().map(|&kind| Period::containing(kind, now, board.timezone).info()).collect(),
        rules: board.rules.values().collect(),
        sign_in: board.sign_in.as_ref(),
        decay: board.decay.as_ref(),
        league: board.league.as_ref().map(|l| LeagueSummary { period: l.period.as_str(), cohort_size: l.cohort_size, tiers: &l.tiers }),
    }
}

/// A page of the boards' summaries at `now` (their current periods), in name order after
/// `cursor`.
pub fn catalog<'a>(config: &'a Config, cursor: Option<&str>, limit: usize, now: DateTime<Utc>) -> Catalog<'a> {
    // A runtime board deleted (or ended) is no board to list (docs/runtime-boards.md).
    // Tournaments have a catalogue of their own (`GET /v1/tournaments`, docs/tournaments.md).
    let listed = |board: &&Board| !board.ending && board.tournament.is_none();
    let (boards, next_cursor) = paging::page_in_order(config.boards_after(cursor), |board| board.name.as_str(), listed, limit);
    Catalog { boards: boards.into_iter().map(|board| summary(board, now)).collect(), next_cursor }
}
