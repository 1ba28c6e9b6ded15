//! Live edits (docs/tournaments.md#live-edits): `PATCH /v1/admin/tournaments/{id}` changes a
//! running tournament's definition (journaled as a catalog `replace`, so a restore brings it
//! back), and `POST /v1/admin/tournaments/{id}/attempts` grants a player attempts in the open
//! instance, audited and journaled in the same script call.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::admin::{TournamentAdmin, TournamentDefinition, forget_early_ends, of_stored};
use super::{PlayError, Tournaments};
use crate::domain::config::tournament::{EditError, TournamentError};
use crate::domain::config::{Definition, MAX_DEFINITION_BYTES, PRIOR_PRIZES, SCALE_SECS};
use crate::domain::ids;
use crate::domain::journal::{Entry, Stamp};
use crate::domain::scoring::fingerprint;
use crate::redis::error::StoreError;
use crate::redis::scripts::catalog::{Change, Defined, define};
use crate::redis::scripts::tournament::{Grant, Granted, grant};
use crate::services::audit::{AuditEntry, AuditKind};
use crate::services::moderation::AUDIT_LOG_LEN;
use crate::services::runtime_boards::DefineError;

/// How often an edit reads the definition again when another change got in between.
const EDIT_ATTEMPTS: usize = 5;
/// The most attempts one grant gives.
pub const MAX_GRANT: u32 = 1_000;

/// `POST /v1/admin/tournaments/{id}/attempts`'s body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptsGrant {
    pub user_id: String,
    pub add: u32,
    pub reason: String,
    /// Optional: a retry with the same id grants nothing again (48 hours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
}

/// Its answer: the player's attempts left in the open instance after the grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptsGranted {
    pub tournament_id: String,
    pub instance: String,
    pub user_id: String,
    pub added: u32,
    pub entries_left: u32,
    pub duplicate: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
}

impl From<EditError> for PlayError {
    fn from(error: EditError) -> Self {
        match error {
            EditError::Invalid(invalid) => PlayError::Invalid(invalid),
            EditError::Closed => PlayError::Closed(String::new()),
        }
    }
}

impl TournamentAdmin {
    /// Edits tournament `id` with `patch` at `now` (`Tournament::edit` decides what may change).
    /// Again with the same patch: the same definition, nothing written twice.
    pub async fn patch(&self, id: &str, patch: &Value, now: DateTime<Utc>) -> Result<TournamentDefinition, PlayError> {
        let closed = || PlayError::Closed(id.to_owned());
        let catalog = self.keys.catalog();
        let mut conn = self.store.write_connection().await?;
        for _ in 0..EDIT_ATTEMPTS {
            // The text the catalog holds, byte for byte (what the replace compares), and whether
            // the tournament is being deleted: one round trip.
            let (held, ending): (Option<String>, bool) = redis::pipe()
                .cmd("HGET")
                .arg(catalog.definitions())
                .arg(id)
                .cmd("HEXISTS")
                .arg(catalog.ending())
                .arg(id)
                .query_async(&mut conn)
                .await
                .map_err(StoreError::from)?;
            let Some(text) = held else {
                // Unknown, or a lost catalog (503 until it is restored): `get` tells which.
                return Err(match self.boards.get(id).await {
                    Err(DefineError::Store(store)) => PlayError::Store(store),
                    _ => PlayError::Unknown(id.to_owned()),
                });
            };
            if ending {
                return Err(closed());
            }
            let definition: Value = serde_json::from_str(&text).map_err(|e| StoreError::Protocol(format!("a stored definition: {e}")))?;
            let board = Definition::stored(&text).map_err(|e| StoreError::Protocol(format!("a stored definition: {e}")))?;
            let tournament = board.tournament.as_deref().ok_or_else(|| PlayError::Unknown(id.to_owned()))?;
            let current = of_stored(id, &definition)?;
            let edited = tournament.edit(&current.definition, patch, now).map_err(|error| match error {
                EditError::Closed => closed(),
                other => other.into(),
            })?;
            let mut stored = definition.clone();
            stored["tournament"] = edited.body;
            match edited.scale_secs {
                Some(secs) => stored[SCALE_SECS] = secs.into(),
                None => _ = stored.as_object_mut().map(|o| o.remove(SCALE_SECS)),
            }
            // Replaced prizes past `PRIZES_KEPT` leave (their instances' results carry them).
            match edited.prior_prizes.is_empty() {
                true => _ = stored.as_object_mut().map(|o| o.remove(PRIOR_PRIZES)),
                false => stored[PRIOR_PRIZES] = serde_json::to_value(&edited.prior_prizes).expect("prizes serialize"),
            }
            forget_early_ends(&mut stored, tournament, now);
            if stored == definition {
                return Ok(current);
            }
            let replaced = stored.to_string();
            // As a definition sent whole; with what is kept beside it (prizes of ended instances,
            // instances ended early) the catalog every function loads stays bounded.
            let body = stored["tournament"].to_string().len();
            if body > MAX_DEFINITION_BYTES || replaced.len() > 2 * MAX_DEFINITION_BYTES {
                let problem = format!(
                    "the definition would be {body} bytes (at most {MAX_DEFINITION_BYTES}), with what is kept beside it (prizes of \
                     ended instances, instances ended early) {} (at most {})",
                    replaced.len(),
                    2 * MAX_DEFINITION_BYTES
                );
                return Err(TournamentError { field: "body".into(), problem }.into());
            }
            let entry = if self.keys.journal_on() {
                Entry::Definition { at: Stamp(now), board: id, change: "replace", definition: stored.clone() }.json()
            } else {
                String::new()
            };
            let change = Change::Replace { definition: &replaced, expected: &text };
            match define(&mut conn, &self.keys, id, change, &entry, self.store.replica_wait()).await? {
                Defined::Replaced => return of_stored(id, &stored),
                // Changed, ending or gone since read: the next round says which.
                _ => continue,
            }
        }
        Err(PlayError::Store(StoreError::Protocol("the tournament's definition kept changing".into())))
    }
}

impl Tournaments {
    /// Grants `request.add` attempts to a player in tournament `id`'s instance open at `now`.
    pub async fn grant(
        &self,
        id: &str,
        request: &AttemptsGrant,
        actor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<AttemptsGranted, PlayError> {
        let (board, tournament) = self.find(id)?;
        ids::validate_id("user_id", &request.user_id)?;
        if let Some(grant_id) = &request.grant_id {
            ids::validate_id("grant_id", grant_id)?;
        }
        let Some(limit) = tournament.max_entries else {
            let problem = "the tournament has no max_entries: its attempts are not limited".into();
            return Err(TournamentError { field: "add".into(), problem }.into());
        };
        if !(1..=MAX_GRANT).contains(&request.add) {
            return Err(TournamentError { field: "add".into(), problem: format!("must be within 1..={MAX_GRANT}") }.into());
        }
        let (instance, period) = self.open(board, tournament, now)?;
        let keys = self.keys.board(&board.name);
        let audit = AuditEntry {
            delta: Some(i64::from(request.add)),
            reason: Some(request.reason.clone()),
            grant_id: request.grant_id.clone(),
            ..AuditEntry::new(&board.name, AuditKind::Grant, &request.user_id, actor, now)
        };
        // The instance is in it: the id retried after its instance ended is another grant (409).
        let print = fingerprint(&(&request.user_id, request.add, &request.reason, &instance.id));
        let ttl = keys.ttl(period.ttl_secs(now), now).to_string();
        let call = Grant {
            member: &request.user_id,
            add: request.add,
            marker: request.grant_id.as_deref().map(|grant_id| (grant_id, print.as_str())),
            audit: &audit.json(),
            audit_keep: AUDIT_LOG_LEN,
            ttl_secs: &ttl,
            now,
        };
        let mut conn = self.store.write_connection().await?;
        let wait = self.store.replica_wait().with_replicas(board.wait_replicas);
        let journaled = keys.journaled() && !self.keys.replays();
        let (count, duplicate) = match grant(&mut conn, &keys, &period, &call, journaled, wait).await? {
            Granted::Counted { count, duplicate } => (count, duplicate),
            Granted::Conflict => return Err(PlayError::GrantConflict(request.grant_id.clone().unwrap_or_default())),
            Granted::Banned => return Err(PlayError::Banned(request.user_id.clone(), board.name.clone())),
            Granted::Closed => return Err(PlayError::Closed(board.name.clone())),
        };
        Ok(AttemptsGranted {
            tournament_id: board.name.clone(),
            instance: instance.id,
            user_id: request.user_id.clone(),
            added: request.add,
            entries_left: super::entries_left(tournament, count).unwrap_or(limit),
            duplicate,
            grant_id: request.grant_id.clone(),
        })
    }
}
