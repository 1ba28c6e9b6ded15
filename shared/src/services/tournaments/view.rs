//! How a tournament reads (`GET /v1/tournaments`, a page at a time, and `GET
//! /v1/tournaments/{id}`): its state now, the instance it shows (the open one, else the next,
//! else the last), that instance's players.

use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::Value;

use super::{PlayError, Tournaments};
use crate::domain::config::tournament::{Instance, Prize, State, Tournament};
use crate::domain::guard::PLAYERS;
use crate::domain::paging;
use crate::redis::error::StoreError;
use crate::redis::{batch, catalog, scripts};
use crate::services::catalog::retired_tournament;

/// The most reads of deleted tournaments' tombstones a page makes (`limit + 1` a read): a
/// category filter that keeps few of them ends the page where they end.
const RETIRED_ROUNDS: usize = 2;

/// One tournament as `GET /v1/tournaments` lists it: no prizes or metadata, which can be large
/// (`GET /v1/tournaments/{id}` has them).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TournamentSummary {
    pub tournament_id: String,
    pub title: String,
    pub description: Option<String>,
    pub category: Option<String>,
    pub state: State,
    /// The shown instance's opening and end (a one-off's are its window's).
    pub start: String,
    pub end: String,
    pub instance: Option<String>,
    /// Where its resets fall (IANA): instance ids are its local days, weeks or months, or the
    /// local minutes a cron schedule opens them.
    pub timezone: &'static str,
    /// Players in the shown instance.
    pub size: u64,
    pub max_size: Option<u32>,
    pub max_entries: Option<u32>,
    pub join_required: bool,
    /// Whether a player may join now: open, with a seat left.
    pub can_join: bool,
    /// When the next instance opens (`null`: none does).
    pub next_reset: Option<String>,
    /// When it was deleted (`null`: it was not): listed under `state=ended` alone from then on.
    pub deleted_at: Option<String>,
}

/// One tournament as `GET /v1/tournaments/{id}` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TournamentView {
    #[serde(flatten)]
    pub summary: TournamentSummary,
    pub prizes: Vec<Prize>,
    pub metadata: Option<Value>,
}

/// A page of `GET /v1/tournaments`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TournamentPage {
    pub tournaments: Vec<TournamentSummary>,
    /// The next page's `cursor` (`null`: this page is the last).
    pub next_cursor: Option<String>,
}

fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Attempts left after `used` (`None`: no limit).
/// `used` is below 0 once a grant gave more attempts than were used.
pub fn entries_left(tournament: &Tournament, used: i64) -> Option<u32> {
    tournament.max_entries.map(|max| u32::try_from((i64::from(max) - used).max(0)).unwrap_or(u32::MAX))
}

impl Tournaments {
    /// A page of the tournaments whose category and state match (each filter optional), in
    /// name order after `cursor`: their players counted in one round trip. Under `ended`, the
    /// deleted ones too (their results stay readable): those being deleted, and those whose
    /// deletion is done, from their tombstones (one round trip more, at most `RETIRED_ROUNDS`
    /// with a category filter: a page then ends where the tombstones read end).
    pub async fn views(
        &self,
        filter: (Option<&str>, Option<State>),
        cursor: Option<&str>,
        limit: usize,
        now: DateTime<Utc>,
    ) -> Result<TournamentPage, PlayError> {
        let (category, state) = filter;
        let in_category = |t: &Tournament| category.is_none_or(|c| t.category.as_deref() == Some(c));
        let ended = state == Some(State::Ended);
        let (retired, read_to) = if ended { self.retired_after(cursor, limit, &in_category).await? } else { (Vec::new(), None) };
        let live = self.config.boards_after(cursor).filter(|board| ended || !board.ending).filter_map(|board| board.tournament.as_deref());
        let live = live.take_while(|t| read_to.as_deref().is_none_or(|to| t.id.as_str() <= to));
        let live = live.filter(|t| in_category(t) && state.is_none_or(|s| t.state_at(now) == s));
        let merged = paging::merged(live, retired.iter().map(Arc::as_ref), |t| t.id.as_str());
        let (chosen, mut next_cursor) = paging::page_in_order(merged, |t| t.id.as_str(), |_| true, limit);
        if next_cursor.is_none() {
            next_cursor = read_to;
        }
        let shown: Vec<(&Tournament, Option<Instance>)> = chosen.into_iter().map(|t| (t, t.shown_at(now))).collect();
        let groups = shown
            .iter()
            .filter(|(t, _)| !t.retired)
            .filter_map(|(t, instance)| Some(self.size_reads(t, instance.as_ref()?)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut sizes = batch::read(&self.store, &groups).await?.into_iter().map(size_of);
        let mut tournaments = Vec::with_capacity(shown.len());
        for (tournament, instance) in shown {
            let size = match &instance {
                _ if tournament.retired => tournament.players_kept.unwrap_or(0),
                Some(_) => sizes.next().unwrap_or(Ok(0))?,
                None => 0,
            };
            tournaments.push(summary(tournament, instance, size, now));
        }
        Ok(TournamentPage { tournaments, next_cursor })
    }

    /// Deleted tournaments whose deletion is done, in name order after `cursor`, those `keep`
    /// takes until one more than a page, or the last, or `RETIRED_ROUNDS` reads: then also the
    /// last name read, where the page must end (a filter that keeps few reads no further).
    async fn retired_after(
        &self,
        cursor: Option<&str>,
        limit: usize,
        keep: &impl Fn(&Tournament) -> bool,
    ) -> Result<(Vec<Arc<Tournament>>, Option<String>), PlayError> {
        let mut conn = self.store.connection().await?;
        let (mut kept, mut after) = (Vec::new(), cursor.map(str::to_owned));
        for _ in 0..RETIRED_ROUNDS {
            let (guard, page) = scripts::catalog::retired(&mut conn, &self.keys, after.as_deref(), limit + 1).await?;
            if self.keys.journal_on() {
                catalog::restoring(guard)?;
            }
            let last = page.len() <= limit;
            after = page.last().map(|(name, _)| name.clone());
            for (name, why) in page {
                let Some(tournament) = why.and_then(|why| retired_tournament(&name, &why)).and_then(|board| board.tournament) else {
                    continue;
                };
                if keep(&tournament) {
                    kept.push(tournament);
                }
            }
            if last || kept.len() > limit {
                return Ok((kept, None));
            }
        }
        Ok((kept, after))
    }

    pub async fn view(&self, id: &str, now: DateTime<Utc>) -> Result<TournamentView, PlayError> {
        let (_, held) = self.find(id)?;
        let tournament = &*self.whole(held).await?;
        let instance = tournament.shown_at(now);
        let size = match &instance {
            Some(instance) => self.size(tournament, instance).await?,
            None => 0,
        };
        Ok(TournamentView {
            summary: summary(tournament, instance, size, now),
            prizes: tournament.prizes.clone(),
            metadata: tournament.metadata.clone(),
        })
    }

    /// Players in `instance`: its set's size, or once its results are stored and its seats
    /// freed, the size kept then (one round trip); a deleted tournament's, as its end noted
    /// them before its keys went (none once retired).
    pub async fn size(&self, tournament: &Tournament, instance: &Instance) -> Result<u64, PlayError> {
        if tournament.retired {
            return Ok(tournament.players_kept.unwrap_or(0));
        }
        let group = self.size_reads(tournament, instance)?;
        let replies = batch::read(&self.store, std::slice::from_ref(&group)).await?;
        size_of(replies.into_iter().next().unwrap_or_default())
    }

    /// The reads `size_of` counts an instance's players from.
    fn size_reads(&self, tournament: &Tournament, instance: &Instance) -> Result<batch::Group, PlayError> {
        let period = tournament
            .period_named(&instance.id)
            .map_err(|_| PlayError::UnknownInstance { tournament: tournament.id.clone(), instance: instance.id.clone() })?;
        let keys = self.keys.board(&tournament.id);
        let players = keys.players(&period);
        let mut commands = vec![
            redis::cmd("SCARD").arg(&players).clone(),
            redis::cmd("GET").arg(keys.final_size(&period)).clone(),
            redis::cmd("HGET").arg(keys.guard()).arg(PLAYERS).clone(),
        ];
        if self.keys.journal_on() {
            // A lost board (its guard gone, or fenced) is being restored, not empty: 503, as
            // every other read of it (found by the simulation: a seat read as 0 after a loss).
            commands.push(catalog::guard_state(&keys.guard()));
        }
        Ok(batch::Group { commands, key: players })
    }
}

/// Players from `size_reads`' replies: the size kept at release, else the set's.
fn size_of(replies: Vec<redis::Value>) -> Result<u64, PlayError> {
    let protocol = |e: redis::ParsingError| StoreError::Protocol(format!("tournament size: {e}"));
    let mut replies = replies.into_iter();
    let players: u64 = redis::from_redis_value(replies.next().unwrap_or(redis::Value::Nil)).map_err(protocol)?;
    let kept: Option<u64> = redis::from_redis_value(replies.next().unwrap_or(redis::Value::Nil)).map_err(protocol)?;
    // A deleted tournament's, between its keys freed and its tombstone written.
    let noted: Option<u64> = redis::from_redis_value(replies.next().unwrap_or(redis::Value::Nil)).map_err(protocol)?;
    if let Some(guard) = replies.next() {
        catalog::restoring(guard)?;
    }
    Ok(noted.or(kept).unwrap_or(players))
}

fn summary(tournament: &Tournament, instance: Option<Instance>, size: u64, now: DateTime<Utc>) -> TournamentSummary {
    let state = tournament.state_at(now);
    let seat_left = tournament.max_size.is_none_or(|max| size < u64::from(max));
    let (start, end) = instance.as_ref().map_or((tournament.start, tournament.end), |i| (i.start, i.end));
    let next = match state {
        State::Open => tournament.next_after(now),
        _ => tournament.next_after(now).filter(|next| next.start > now),
    };
    TournamentSummary {
        tournament_id: tournament.id.clone(),
        title: tournament.title.clone(),
        description: tournament.description.clone(),
        category: tournament.category.clone(),
        state,
        start: time(start),
        end: time(end),
        instance: instance.map(|i| i.id),
        timezone: tournament.timezone.name(),
        size,
        max_size: tournament.max_size,
        max_entries: tournament.max_entries,
        join_required: tournament.join_required,
        can_join: state == State::Open && seat_left,
        next_reset: next.map(|next| time(next.start)),
        deleted_at: tournament.deleted.map(time),
    }
}
