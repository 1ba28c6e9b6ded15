//! A tournament instance's standings (`GET /v1/tournaments/{id}/top`, `…/users/{user_id}`,
//! `…/results`): from its live board while it runs, its frozen board while its results are
//! archived, and the results table once they are (the `seasons` function, which has it).

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::{PlayError, Tournaments, entries_left};
use crate::archive::table::{ArchivedEntry, SeasonTable, TableError};
use crate::domain::config::Board;
use crate::domain::config::tournament::{Instance, Prize, Tournament, prize_in};
use crate::domain::period::Period;
use crate::redis::error::StoreError;
use crate::services::profiles::{self, Profile};
use crate::services::reads::{RankMode, Reader, Standing};

/// Results a page of `…/results` holds.
pub const RESULTS_PAGE: u64 = 100;

impl From<TableError> for PlayError {
    fn from(error: TableError) -> Self {
        PlayError::Archive(error.to_string())
    }
}

/// One row of an instance's standings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub rank: u64,
    pub user_id: String,
    pub score: Option<i64>,
    pub profile: Option<Profile>,
    /// The reward of this rank, if a prize covers it.
    pub prize: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceTop {
    pub tournament_id: String,
    pub instance: Option<String>,
    /// `live`, `frozen` (ended, its results being stored) or `archived` (read from the results).
    pub source: &'static str,
    pub total: u64,
    pub entries: Vec<Row>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlayerStanding {
    pub tournament_id: String,
    pub instance: Option<String>,
    pub user_id: String,
    pub rank: Option<u64>,
    pub score: Option<i64>,
    pub entries_left: Option<u32>,
    pub total: u64,
    pub around: Vec<Row>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Results {
    pub tournament_id: String,
    pub instance: String,
    pub total: u64,
    pub completed_at: DateTime<Utc>,
    pub results: Vec<Row>,
    /// Pass as `cursor` for the next page (`null`: this was the last).
    pub next_cursor: Option<String>,
}

/// Where an instance's standings are read from.
enum Source {
    Live,
    Frozen,
    /// Its total and its prizes as recorded with its results (`CompletedSeason::prizes`).
    Archived(u64, Option<String>),
}

impl Source {
    fn name(&self) -> &'static str {
        match self {
            Source::Live => "live",
            Source::Frozen => "frozen",
            Source::Archived(..) => "archived",
        }
    }
}

/// The prizes an archived instance's rows are priced with: those recorded with its results
/// (`stored`), else those in force when it ended (`ends`), which an edit keeps beside the
/// definition until then (`PRIZES_KEPT`).
fn priced<'a>(tournament: &'a Tournament, ends: DateTime<Utc>, stored: Option<&str>) -> Cow<'a, [Prize]> {
    match stored.map(serde_json::from_str::<Vec<Prize>>) {
        Some(Ok(prizes)) => Cow::Owned(prizes),
        _ => Cow::Borrowed(tournament.prizes_at(ends)),
    }
}

/// `ends`: when the instance ends (or ended), which decides the prizes it runs for.
fn rows(tournament: &Tournament, ends: DateTime<Utc>, standings: Vec<Standing>) -> Vec<Row> {
    standings
        .into_iter()
        .map(|s| Row {
            rank: s.rank,
            prize: tournament.prize_of(ends, s.rank).cloned(),
            user_id: s.holder.user_id,
            score: s.holder.score,
            profile: s.holder.profile,
        })
        .collect()
}

impl Tournaments {
    /// The instance a read names (`instance=`), else the open one, else the last that ran
    /// (between a recurring tournament's instances its top is the one that just ended), else the
    /// next; and its period.
    fn instance(&self, tournament: &Tournament, named: Option<&str>, now: DateTime<Utc>) -> Result<Option<(Instance, Period)>, PlayError> {
        let instance = match named {
            Some(id) => Some(tournament.instance_named(Some(id), now).ok_or_else(|| PlayError::UnknownInstance {
                tournament: tournament.id.clone(),
                instance: crate::domain::ids::loggable(id).into_owned(),
            })?),
            None => tournament.instance_named(None, now).or_else(|| tournament.shown_at(now)),
        };
        Ok(instance.map(|instance| {
            let period = tournament.period_named(&instance.id).expect("an instance is a period");
            (instance, period)
        }))
    }

    /// `table`: `None` where the deployment keeps no results table (nothing is archived).
    async fn source(
        &self,
        table: Option<&SeasonTable>,
        board: &Board,
        instance: &Instance,
        period: &Period,
        now: DateTime<Utc>,
    ) -> Result<Source, PlayError> {
        if instance.start <= now && now < instance.end {
            return Ok(Source::Live);
        }
        if let Some(table) = table
            && let Some(done) = table.completed(&board.name, &instance.id).await?
        {
            return Ok(Source::Archived(done.total, done.prizes));
        }
        let mut conn = self.store.connection().await?;
        let frozen: bool =
            redis::cmd("EXISTS").arg(self.keys.board(&board.name).frozen(period)).query_async(&mut conn).await.map_err(StoreError::from)?;
        Ok(if frozen { Source::Frozen } else { Source::Live })
    }

    async fn archived_rows(&self, prizes: &[Prize], entries: Vec<ArchivedEntry>) -> Result<Vec<Row>, PlayError> {
        let users: Vec<&str> = entries.iter().map(|entry| entry.user_id.as_str()).collect();
        let profiles = profiles::get_many(&self.store, &self.keys, &users).await?;
        Ok(entries
            .into_iter()
            .zip(profiles)
            .map(|(e, profile)| Row {
                rank: e.rank,
                prize: prize_in(prizes, e.rank).cloned(),
                user_id: e.user_id,
                score: Some(e.points),
                profile,
            })
            .collect())
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn top(
        &self,
        reader: &Reader,
        table: Option<&SeasonTable>,
        id: &str,
        instance: Option<&str>,
        offset: u64,
        limit: u64,
        now: DateTime<Utc>,
    ) -> Result<InstanceTop, PlayError> {
        let (board, held) = self.find(id)?;
        let tournament = &*self.whole(held).await?;
        let Some((instance, period)) = self.instance(tournament, instance, now)? else {
            return Ok(InstanceTop { tournament_id: id.to_owned(), instance: None, source: "live", total: 0, entries: Vec::new() });
        };
        let source = self.source(table, board, &instance, &period, now).await?;
        let name = source.name();
        let (total, entries) = match (source, table) {
            (Source::Archived(total, prizes), Some(table)) => {
                let prizes = priced(tournament, instance.end, prizes.as_deref());
                (total, self.archived_rows(&prizes, table.ranks(id, &instance.id, offset + 1, offset + limit).await?).await?)
            }
            (source, _) => {
                let reader = if matches!(source, Source::Frozen) { reader.of_frozen() } else { reader.clone() };
                let page = reader.page(board, &period, offset, limit, RankMode::Unique).await?;
                (page.total, rows(tournament, instance.end, page.entries))
            }
        };
        Ok(InstanceTop { tournament_id: id.to_owned(), instance: Some(instance.id), source: name, total, entries })
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn player(
        &self,
        reader: &Reader,
        table: Option<&SeasonTable>,
        id: &str,
        user_id: &str,
        instance: Option<&str>,
        around: u64,
        now: DateTime<Utc>,
    ) -> Result<PlayerStanding, PlayError> {
        let (board, held) = self.find(id)?;
        crate::domain::ids::validate_id("user_id", user_id)?;
        let tournament = &*self.whole(held).await?;
        let mut standing = PlayerStanding {
            tournament_id: id.to_owned(),
            instance: None,
            user_id: user_id.to_owned(),
            rank: None,
            score: None,
            entries_left: entries_left(tournament, 0),
            total: 0,
            around: Vec::new(),
        };
        let Some((instance, period)) = self.instance(tournament, instance, now)? else { return Ok(standing) };
        standing.instance = Some(instance.id.clone());
        // Attempts are kept only where they are limited (submit_score.lua): nothing to ask else.
        // An ended instance takes none, whatever was used (its attempts are freed with its seats).
        let ended = now >= instance.end || tournament.closed.contains_key(&instance.id);
        if tournament.max_entries.is_some() && ended {
            standing.entries_left = Some(0);
        } else if tournament.max_entries.is_some() {
            let mut conn = self.store.connection().await?;
            let used: Option<i64> = redis::cmd("HGET")
                .arg(self.keys.board(id).entries(&period))
                .arg(user_id)
                .query_async(&mut conn)
                .await
                .map_err(StoreError::from)?;
            standing.entries_left = entries_left(tournament, used.unwrap_or(0));
        }
        match (self.source(table, board, &instance, &period, now).await?, table) {
            (Source::Archived(total, prizes), Some(table)) => {
                standing.total = total;
                let prizes = priced(tournament, instance.end, prizes.as_deref());
                if let Some(entry) = table.user_entry(id, &instance.id, user_id).await? {
                    let (first, last) = crate::services::reads::rules::around_window(entry.rank, around, total);
                    (standing.rank, standing.score) = (Some(entry.rank), Some(entry.points));
                    standing.around = self.archived_rows(&prizes, table.ranks(id, &instance.id, first, last).await?).await?;
                }
            }
            (source, _) => {
                let reader = if matches!(source, Source::Frozen) { reader.of_frozen() } else { reader.clone() };
                let member = reader.around(board, &period, user_id, around, RankMode::Unique).await?;
                (standing.rank, standing.score, standing.total) = (member.rank, member.score, member.total);
                standing.around = rows(tournament, instance.end, member.around);
            }
        }
        Ok(standing)
    }

    /// A page of an ended instance's stored results, from rank `cursor` (1 when absent).
    /// An instance's stored results from `cursor`; without `instance`, those of the one
    /// `Tournament::results_instance` names at `now`.
    pub async fn results(
        &self,
        table: &SeasonTable,
        id: &str,
        instance: Option<&str>,
        cursor: Option<u64>,
        now: DateTime<Utc>,
    ) -> Result<Results, PlayError> {
        let (_, held) = self.find(id)?;
        let tournament = &*self.whole(held).await?;
        // A named instance that never ran (outside the window, or over before the definition)
        // has no results coming: unknown, not pending.
        if let Some(named) = instance {
            self.instance(tournament, Some(named), now)?;
        }
        let default = instance.is_none().then(|| tournament.results_instance(now).map(|i| i.id).unwrap_or_default());
        let instance = instance.or(default.as_deref()).unwrap_or_default();
        let done = table.completed(id, instance).await?.ok_or_else(|| PlayError::NoResults {
            tournament: id.to_owned(),
            instance: crate::domain::ids::loggable(instance).into_owned(),
        })?;
        let first = cursor.unwrap_or(1).max(1);
        // Ranks end at `total`: a cursor past them (none this route gave) reads nothing.
        let last = first.saturating_add(RESULTS_PAGE - 1).min(done.total);
        let ends = tournament.instance_named(Some(instance), now).map_or(tournament.end, |named| named.end);
        let prizes = priced(tournament, ends, done.prizes.as_deref());
        let results = self.archived_rows(&prizes, table.ranks(id, instance, first, last).await?).await?;
        Ok(Results {
            tournament_id: id.to_owned(),
            instance: instance.to_owned(),
            total: done.total,
            completed_at: done.completed_at,
            results,
            next_cursor: (last < done.total).then(|| (last + 1).to_string()),
        })
    }
}
