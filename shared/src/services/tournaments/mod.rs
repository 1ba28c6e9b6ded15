//! Tournaments (docs/tournaments.md): a runtime score board open for a window, once or on every
//! reset, with seats, attempts and prizes. Joins and scores are one script call each, decided
//! on the write's own time (`Tournament::open_at`) and refused in Redis too once an instance is
//! ended early or frozen for its results; reads of an instance come from its live board, its
//! frozen board, or (once archived) the results table (the `seasons` function).

mod admin;
mod edit;
#[cfg(feature = "dynamodb")]
mod standings;
mod view;

use std::borrow::Cow;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::config::tournament::{Instance, Tournament, TournamentError};
use crate::domain::config::{Board, Config};
use crate::domain::ids::{self, IdError};
use crate::domain::journal::{Entry, Stamp};
use crate::domain::period::{EventTimeError, Period};
use crate::domain::scores::Submission;
use crate::redis::error::StoreError;
use crate::redis::keys::Keys;
use crate::redis::scripts::tournament::{Joined, join};
use crate::redis::store::Store;
use crate::services::scores::{ScoreError, Scores};

pub use admin::{InstanceEnded, TournamentAdmin, TournamentDefinition, TournamentDeleted};
pub use edit::{AttemptsGrant, AttemptsGranted, MAX_GRANT};
#[cfg(feature = "dynamodb")]
pub use standings::{InstanceTop, PlayerStanding, RESULTS_PAGE, Results, Row};
pub use view::{TournamentPage, TournamentSummary, TournamentView, entries_left};

#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    #[error("no tournament is named {0:?}")]
    Unknown(String),
    #[error(transparent)]
    Invalid(#[from] TournamentError),
    #[error(transparent)]
    InvalidId(#[from] IdError),
    #[error("tournament {0:?} is not open now")]
    Closed(String),
    #[error("tournament {tournament:?} is full ({size} players)")]
    Full { tournament: String, size: u64 },
    #[error("user {0:?} is banned from tournament {1:?}")]
    Banned(String, String),
    #[error("no instance {instance:?} of tournament {tournament:?}")]
    UnknownInstance { tournament: String, instance: String },
    #[error(transparent)]
    Score(ScoreError),
    #[error(transparent)]
    Define(crate::services::runtime_boards::DefineError),
    #[error("instance {instance:?} of tournament {tournament:?} has no results yet: they are stored within minutes of its end")]
    NoResults { tournament: String, instance: String },
    /// The results table failed (what it said stays in the log).
    #[error("the results table: {0}")]
    Archive(String),
    #[error("grant {0:?} was made with another payload")]
    GrantConflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<ScoreError> for PlayError {
    fn from(error: ScoreError) -> Self {
        match error {
            // A period closed on a tournament's board: its instance was ended early or frozen.
            ScoreError::PeriodClosed { board, .. } => PlayError::Closed(board),
            ScoreError::Store(store) => PlayError::Store(store),
            other => PlayError::Score(other),
        }
    }
}

/// `POST /v1/tournaments/{id}/join`'s answer; the same again for a player already in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JoinReceipt {
    pub tournament_id: String,
    pub instance: String,
    pub joined: bool,
    pub size: u64,
    pub max_size: Option<u32>,
}

/// `POST /v1/tournaments/{id}/scores`'s body: no time of its own, the server's decides.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Play {
    pub event_id: String,
    pub user_id: String,
    pub score: i64,
}

/// A submission's answer: the player's kept score and rank in the instance, and attempts left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlayReceipt {
    pub tournament_id: String,
    pub instance: String,
    pub event_id: String,
    pub duplicate: bool,
    /// Whether this submission changed the kept score (`false`: not better, or equal).
    pub applied: bool,
    pub score: Option<i64>,
    pub rank: Option<u64>,
    /// `null` when the tournament has no `max_entries`.
    pub entries_left: Option<u32>,
}

/// The tournament services a request needs, over the boards as of now.
pub struct Tournaments {
    config: Arc<Config>,
    keys: Keys,
    store: Store,
    scores: Scores,
}

impl Tournaments {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store) -> Self {
        Self { scores: Scores::new(config.clone(), keys.clone(), store.clone()), config, keys, store }
    }

    /// The tournament `id` and its board.
    pub fn find(&self, id: &str) -> Result<(&Board, &Tournament), PlayError> {
        self.config
            .board(id)
            .and_then(|board| Some((board, board.tournament.as_deref()?)))
            .ok_or_else(|| PlayError::Unknown(ids::loggable(id).into_owned()))
    }

    /// `tournament` with its prizes and metadata: a function's catalog may hold it without them
    /// (`Tournament::without_details`); one round trip then, none else.
    pub async fn whole<'a>(&self, tournament: &'a Tournament) -> Result<Cow<'a, Tournament>, PlayError> {
        crate::redis::catalog::whole_tournament(&self.store, &self.keys, tournament)
            .await?
            .ok_or_else(|| PlayError::Unknown(ids::loggable(&tournament.id).into_owned()))
    }

    /// Every tournament not deleted, in name order.
    pub fn all(&self) -> impl Iterator<Item = (&Board, &Tournament)> {
        self.config
            .boards()
            .iter()
            .map(|b| &**b)
            .filter(|board| !board.ending)
            .filter_map(|board| Some((board, board.tournament.as_deref()?)))
    }

    /// The tournaments not deleted named after `cursor`, in name order.
    pub fn all_after(&self, cursor: Option<&str>) -> impl Iterator<Item = (&Board, &Tournament)> {
        self.config.boards_after(cursor).filter(|board| !board.ending).filter_map(|board| Some((board, board.tournament.as_deref()?)))
    }

    /// The instance open at `now` (its period on the tournament's board), or `Closed`.
    pub(super) fn open(&self, board: &Board, tournament: &Tournament, now: DateTime<Utc>) -> Result<(Instance, Period), PlayError> {
        let instance = tournament.open_at(now).ok_or_else(|| PlayError::Closed(board.name.clone()))?;
        Ok((instance, tournament.period_at(now)))
    }

    /// A journal's `release` line decided again (a dry-run's or a verify's replay): instance
    /// `instance` frozen as the archive froze it, then freed as it was once its results were
    /// stored. Whether it freed anything.
    pub async fn release(&self, id: &str, instance: &str, now: DateTime<Utc>) -> Result<bool, PlayError> {
        let (board, tournament) = self.find(id)?;
        let period = tournament
            .period_named(instance)
            .map_err(|_| PlayError::UnknownInstance { tournament: board.name.clone(), instance: instance.to_owned() })?;
        let keys = self.keys.board(&board.name);
        let mut conn = self.store.write_connection().await?;
        crate::archive::freeze::freeze(&mut conn, &keys, &period, (self.keys.journal_on() && !self.keys.replays()).then_some(now)).await?;
        crate::archive::freeze::release_frozen(&mut conn, &keys, &period, board.statements).await?;
        Ok(crate::archive::freeze::release_instance(&mut conn, &keys, &period, now, self.store.replica_wait()).await?)
    }

    pub async fn join(&self, id: &str, user_id: &str, now: DateTime<Utc>) -> Result<JoinReceipt, PlayError> {
        let (board, tournament) = self.find(id)?;
        ids::validate_id("user_id", user_id)?;
        let (instance, period) = self.open(board, tournament, now)?;
        let keys = self.keys.board(&board.name);
        let entry = if keys.journaled() { Entry::Join { at: Stamp(now), user_id, instance: &instance.id }.json() } else { String::new() };
        let ttl = keys.ttl(period.ttl_secs(now), now).to_string();
        let mut conn = self.store.write_connection().await?;
        let wait = self.store.replica_wait().with_replicas(board.wait_replicas);
        let size = match join(&mut conn, &keys, &period, user_id, tournament.max_size, &ttl, &entry, wait).await? {
            Joined::Now(size) | Joined::Already(size) => size,
            Joined::Full(size) => return Err(PlayError::Full { tournament: board.name.clone(), size }),
            Joined::Banned => return Err(PlayError::Banned(user_id.to_owned(), board.name.clone())),
            Joined::Closed => return Err(PlayError::Closed(board.name.clone())),
        };
        Ok(JoinReceipt { tournament_id: board.name.clone(), instance: instance.id, joined: true, size, max_size: tournament.max_size })
    }

    /// A score in the instance open at `now`: seat, attempts and score in one script call.
    pub async fn submit(&self, id: &str, play: &Play, now: DateTime<Utc>) -> Result<PlayReceipt, PlayError> {
        let (board, tournament) = self.find(id)?;
        let submission =
            Submission { event_id: play.event_id.clone(), user_id: play.user_id.clone(), score: play.score, occurred_at: None };
        // Outside the window the script still answers a retry of an applied id as a duplicate
        // (markers first), and refuses a first delivery with nothing written.
        let closed = tournament.open_at(now).is_none().then_some(EventTimeError::Closed);
        let receipt = match self.scores.submit_to(board, &submission, now, closed).await {
            Err(ScoreError::EventTime(EventTimeError::Closed)) => return Err(PlayError::Closed(board.name.clone())),
            other => other?,
        };
        let standing = receipt.outcome.periods.first();
        Ok(PlayReceipt {
            tournament_id: board.name.clone(),
            instance: standing.map_or_else(String::new, |s| s.period_id.clone()),
            event_id: receipt.event_id,
            duplicate: receipt.duplicate,
            applied: receipt.outcome.applied,
            score: standing.and_then(|s| s.score),
            rank: standing.and_then(|s| s.rank),
            entries_left: entries_left(tournament, receipt.outcome.entries.unwrap_or(0)),
        })
    }
}
