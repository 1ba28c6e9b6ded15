//! `PUT`/`GET`/`DELETE /v1/admin/tournaments/{id}` and `POST /v1/admin/tournaments/{id}/end`: a
//! tournament's definition kept with the runtime boards' (the catalog: journaled, restored,
//! limited, cached by every function), and the early end of its open instance, recorded in the
//! definition (so every function and a restore know it) before the instance is frozen.

use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::{Value, json};

use super::PlayError;
use crate::archive::freeze;
use crate::domain::config::tournament::{Tournament, TournamentError};
use crate::domain::config::{CLOSED, Config, Definition};
use crate::domain::journal::{Entry, Stamp};
use crate::redis::catalog;
use crate::redis::error::StoreError;
use crate::redis::keys::Keys;
use crate::redis::scripts::catalog::{Change, Defined, define};
use crate::redis::store::Store;
use crate::services::runtime_boards::{DefineError, RuntimeBoards};

/// How often an early end reads the definition again when another change got in between.
const REPLACE_ATTEMPTS: usize = 5;

/// A tournament as the admin routes answer it: its definition as sent, and the instances
/// ended early (`{instance: {at, reason}}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TournamentDefinition {
    pub tournament_id: String,
    pub definition: Value,
    pub closed: Value,
}

/// `DELETE /v1/admin/tournaments/{id}`'s answer: the tournament, `ending` until the archive
/// function's run has finished its instances and freed its keys, with why and when.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TournamentDeleted {
    pub tournament_id: String,
    pub state: &'static str,
    pub definition: Value,
    pub closed: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<Value>,
}

/// `POST /v1/admin/tournaments/{id}/end`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceEnded {
    pub tournament_id: String,
    pub instance: String,
    pub ended_at: String,
    pub reason: Option<String>,
}

pub struct TournamentAdmin {
    pub(super) boards: RuntimeBoards,
    pub(super) keys: Keys,
    pub(super) store: Store,
}

impl From<DefineError> for PlayError {
    fn from(error: DefineError) -> Self {
        match error {
            DefineError::Store(store) => PlayError::Store(store),
            other => PlayError::Define(other),
        }
    }
}

impl TournamentAdmin {
    pub fn new(declared: Arc<Config>, keys: Keys, store: Store, limit: u32) -> Self {
        Self { boards: RuntimeBoards::new(declared, keys.clone(), store.clone(), limit), keys, store }
    }

    /// Creates tournament `id`: true when created, false when this very definition was there.
    pub async fn put(&self, id: &str, body: &Value, now: DateTime<Utc>) -> Result<(bool, TournamentDefinition), PlayError> {
        let definition = match Definition::tournament(id, body, now) {
            Ok(definition) => definition,
            // Past the size limit: the same body again of a tournament stored before the limit
            // is still that tournament.
            Err(error) if body.to_string().len() > crate::domain::config::MAX_DEFINITION_BYTES => {
                return self.same_again(id, body).await?.map(|current| (false, current)).ok_or_else(|| error.into());
            }
            Err(error) => return Err(error.into()),
        };
        // A definition none of whose instances runs from now on (its window over, or every
        // instance left in it over before now) is refused; the same body sent again (a retry
        // after its end) is still the same tournament.
        let never_runs = |t: &Tournament| t.open_at(now).is_none() && t.next_after(now).is_none();
        if definition.board.tournament.as_deref().is_some_and(never_runs) {
            return match self.same_again(id, body).await? {
                Some(current) => Ok((false, current)),
                None => Err(TournamentError {
                    field: "end".into(),
                    problem: "leaves no instance open now or later: the tournament would never run".into(),
                }
                .into()),
            };
        }
        match self.boards.create(id, definition, now).await {
            Ok((created, defined)) => Ok((created, of_stored(id, &defined.definition)?)),
            Err(DefineError::Exists(name)) => {
                self.same_again(id, body).await?.map(|current| (false, current)).ok_or_else(|| DefineError::Exists(name).into())
            }
            Err(error) => Err(error.into()),
        }
    }

    /// The tournament as stored when `body` is its very definition, not being deleted: its
    /// instances ended early are recorded beside the definition, so the same body again is
    /// still the same tournament; one being deleted is not defined again, whatever the body.
    async fn same_again(&self, id: &str, body: &Value) -> Result<Option<TournamentDefinition>, PlayError> {
        match self.boards.get(id).await {
            Ok(defined) if defined.state == "active" => {
                Ok(of_stored(id, &defined.definition).ok().filter(|current| current.definition == *body))
            }
            // A lost catalog (503) is not another definition.
            Err(DefineError::Store(store)) => Err(PlayError::Store(store)),
            _ => Ok(None),
        }
    }

    pub async fn get(&self, id: &str) -> Result<TournamentDefinition, PlayError> {
        let defined = self.boards.get(id).await.map_err(|error| match error {
            DefineError::Unknown(_) => PlayError::Unknown(id.to_owned()),
            other => other.into(),
        })?;
        of_stored(id, &defined.definition)
    }

    /// Deletes tournament `id` (docs/tournaments.md#deleting): its writes refused from this
    /// call on; the instance open now ends now and none opens after it. The archive function's
    /// run then stores and announces every instance not finished, frees its keys and forgets
    /// it. Again: the same answer.
    pub async fn delete(&self, id: &str, reason: Option<&str>, now: DateTime<Utc>) -> Result<TournamentDeleted, PlayError> {
        let current = self.get(id).await?;
        // The instance open now is ended first, as an early end is (frozen, so a function whose
        // catalog is a few seconds old lands nothing in it from now on).
        if Tournament::parse(id, &current.definition)?.open_at(now).is_some() {
            self.end(id, reason, now).await?;
        }
        let ended = self.boards.end_any(id, reason, now).await?;
        let view = of_stored(id, &ended.definition)?;
        Ok(TournamentDeleted {
            tournament_id: id.to_owned(),
            state: ended.state,
            definition: view.definition,
            closed: view.closed,
            ended: ended.ended,
        })
    }

    /// Ends the instance open at `now`: frozen first (every later join or score refused in
    /// Redis at once), then recorded in the definition (every function's catalog, and a
    /// restore, know it). Again: the same answer, and whatever a first call left undone done.
    pub async fn end(&self, id: &str, reason: Option<&str>, now: DateTime<Utc>) -> Result<InstanceEnded, PlayError> {
        let catalog = self.keys.catalog();
        let mut conn = self.store.write_connection().await?;
        for _ in 0..REPLACE_ATTEMPTS {
            let text: Option<String> =
                redis::cmd("HGET").arg(catalog.definitions()).arg(id).query_async(&mut conn).await.map_err(StoreError::from)?;
            let Some(text) = text else {
                // Unknown, or a lost catalog (503 until it is restored): `get` tells which.
                return Err(match self.boards.get(id).await {
                    Err(DefineError::Store(store)) => PlayError::Store(store),
                    _ => PlayError::Unknown(id.to_owned()),
                });
            };
            let board = Definition::stored(&text).map_err(|e| StoreError::Protocol(format!("a stored definition: {e}")))?;
            let tournament = board.tournament.as_deref().ok_or_else(|| PlayError::Unknown(id.to_owned()))?;
            let mut stored: Value = serde_json::from_str(&text).map_err(|e| StoreError::Protocol(format!("a stored definition: {e}")))?;
            let (instance, ended_at, why) = match tournament.open_at(now) {
                Some(open) => {
                    let why = json!({"at": now.to_rfc3339_opts(SecondsFormat::Millis, true), "reason": reason});
                    (open, now, Some(why))
                }
                None => match tournament.instance_named(None, now).filter(|last| tournament.closed.contains_key(&last.id)) {
                    Some(last) => (last.clone(), last.end, None),
                    None => return Err(PlayError::Closed(id.to_owned())),
                },
            };
            // Frozen first: refused in Redis at once, whatever a function's catalog still says;
            // then recorded (a call stopped in between is redone by the next, the same way).
            let period =
                tournament.period_named(&instance.id).map_err(|e| StoreError::Protocol(format!("instance {:?}: {e}", instance.id)))?;
            // A catalog being restored would refuse the record after the freeze: refused first
            // (503, nothing written), as the freeze refuses a board being restored.
            if self.keys.journal_on() {
                let state = catalog::guard_state(&catalog.guard()).query_async(&mut conn).await.map_err(StoreError::from)?;
                catalog::restoring(state)?;
            }
            freeze::freeze(&mut conn, &self.keys.board(id), &period, self.keys.journal_on().then_some(now)).await?;
            if let Some(why) = why {
                stored[CLOSED][&instance.id] = why;
                forget_early_ends(&mut stored, tournament, now);
                let replaced = stored.to_string();
                let entry = if self.keys.journal_on() {
                    Entry::Definition { at: Stamp(now), board: id, change: "replace", definition: stored.clone() }.json()
                } else {
                    String::new()
                };
                let change = Change::Replace { definition: &replaced, expected: &text };
                match define(&mut conn, &self.keys, id, change, &entry, self.store.replica_wait()).await? {
                    Defined::Replaced => {}
                    Defined::Changed => continue,
                    _ => return Err(PlayError::Unknown(id.to_owned())),
                }
            }
            let reason = stored[CLOSED][&instance.id]["reason"].as_str().map(str::to_owned);
            return Ok(InstanceEnded {
                tournament_id: id.to_owned(),
                instance: instance.id,
                ended_at: ended_at.to_rfc3339_opts(SecondsFormat::Millis, true),
                reason,
            });
        }
        Err(PlayError::Store(StoreError::Protocol("the tournament's definition kept changing".into())))
    }
}

/// `stored` without the early ends no read needs any more (`Tournament::early_ends_done`):
/// every change that rewrites a definition drops them, so what is kept beside it stays bounded.
pub(super) fn forget_early_ends(stored: &mut Value, tournament: &Tournament, now: DateTime<Utc>) {
    if let Some(closed) = stored.get_mut(CLOSED).and_then(Value::as_object_mut) {
        for done in tournament.early_ends_done(now) {
            closed.remove(&done);
        }
    }
}

/// The admin view of a stored tournament definition (`{name, tournament, closed?}`).
pub(super) fn of_stored(id: &str, stored: &Value) -> Result<TournamentDefinition, PlayError> {
    let definition = stored.get("tournament").cloned().ok_or_else(|| PlayError::Unknown(id.to_owned()))?;
    let closed = stored.get(CLOSED).cloned().unwrap_or_else(|| json!({}));
    Ok(TournamentDefinition { tournament_id: id.to_owned(), definition, closed })
}
