//! How a tournament reads (`GET /v1/tournaments`, `GET /v1/tournaments/{id}`): its state now,
//! the instance it shows (the open one, else the next, else the last), that instance's players.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::Value;

use super::{PlayError, Tournaments};
use crate::domain::config::tournament::{Instance, Prize, State, Tournament};
use crate::domain::period::Period;

/// One tournament as the read routes list it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TournamentView {
    pub tournament_id: String,
    pub title: String,
    pub description: Option<String>,
    pub category: Option<String>,
    pub state: State,
    /// The shown instance's opening and end (a one-off's are its window's).
    pub start: String,
    pub end: String,
    pub instance: Option<String>,
    /// Players in the shown instance.
    pub size: u64,
    pub max_size: Option<u32>,
    pub max_entries: Option<u32>,
    pub join_required: bool,
    /// Whether a player may join now: open, with a seat left.
    pub can_join: bool,
    /// When the next instance opens (`null`: none does).
    pub next_reset: Option<String>,
    pub prizes: Vec<Prize>,
    pub metadata: Option<Value>,
}

fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Attempts left after `used` (`None`: no limit).
pub fn entries_left(tournament: &Tournament, used: u32) -> Option<u32> {
    tournament.max_entries.map(|max| max.saturating_sub(used))
}

/// The instance a tournament shows at `now`: the open one, else the next, else the last.
pub fn shown(tournament: &Tournament, now: DateTime<Utc>) -> Option<Instance> {
    tournament.open_at(now).or_else(|| tournament.next_after(now)).or_else(|| tournament.instance_named(None, now))
}

impl Tournaments {
    /// Every tournament whose category and state match (each filter optional), in name order.
    pub async fn views(&self, category: Option<&str>, state: Option<State>, now: DateTime<Utc>) -> Result<Vec<TournamentView>, PlayError> {
        let chosen: Vec<&Tournament> = self
            .all()
            .map(|(_, tournament)| tournament)
            .filter(|t| category.is_none_or(|c| t.category.as_deref() == Some(c)))
            .filter(|t| state.is_none_or(|s| t.state_at(now) == s))
            .collect();
        futures::future::try_join_all(chosen.into_iter().map(|tournament| self.view_of(tournament, now))).await
    }

    pub async fn view(&self, id: &str, now: DateTime<Utc>) -> Result<TournamentView, PlayError> {
        let (_, tournament) = self.find(id)?;
        self.view_of(tournament, now).await
    }

    /// Players in `instance`: its set's size, or once its results are stored and its seats
    /// freed, the size kept then (one round trip).
    pub async fn size(&self, tournament: &Tournament, instance: &Instance) -> Result<u64, PlayError> {
        let period = Period::named(tournament.period_kind(), &instance.id, chrono_tz::UTC)
            .map_err(|_| PlayError::UnknownInstance { tournament: tournament.id.clone(), instance: instance.id.clone() })?;
        let mut conn = self.store.connection().await?;
        let keys = self.keys.board(&tournament.id);
        let (players, kept): (u64, Option<u64>) = redis::pipe()
            .scard(keys.players(&period))
            .get(keys.final_size(&period))
            .query_async(&mut conn)
            .await
            .map_err(crate::redis::error::StoreError::from)?;
        Ok(kept.unwrap_or(players))
    }

    async fn view_of(&self, tournament: &Tournament, now: DateTime<Utc>) -> Result<TournamentView, PlayError> {
        let state = tournament.state_at(now);
        let instance = shown(tournament, now);
        let size = match &instance {
            Some(instance) => self.size(tournament, instance).await?,
            None => 0,
        };
        let seat_left = tournament.max_size.is_none_or(|max| size < u64::from(max));
        let (start, end) = instance.as_ref().map_or((tournament.start, tournament.end), |i| (i.start, i.end));
        let next = match state {
            State::Open => tournament.next_after(now),
            _ => tournament.next_after(now).filter(|next| next.start > now),
        };
        Ok(TournamentView {
            tournament_id: tournament.id.clone(),
            title: tournament.title.clone(),
            description: tournament.description.clone(),
            category: tournament.category.clone(),
            state,
            start: time(start),
            end: time(end),
            instance: instance.map(|i| i.id),
            size,
            max_size: tournament.max_size,
            max_entries: tournament.max_entries,
            join_required: tournament.join_required,
            can_join: state == State::Open && seat_left,
            next_reset: next.map(|next| time(next.start)),
            prizes: tournament.prizes.clone(),
            metadata: tournament.metadata.clone(),
        })
    }
}
