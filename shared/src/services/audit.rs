//! One admin action as a board's audit log keeps it (`GET /v1/admin/audit`): bans,
//! corrections, voids and attempts granted. A correction's, a void's and a grant's entry is its
//! journal line too.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Longest actor (JWT `sub`) kept in an audit entry.
const MAX_ACTOR_CHARS: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditKind {
    Ban,
    Unban,
    Correction,
    Void,
    /// Attempts granted in a tournament's open instance (docs/tournaments.md#live-edits).
    Grant,
}

/// One admin action, as kept in a board's audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub at: DateTime<Utc>,
    pub board: String,
    pub kind: AuditKind,
    pub user_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<i64>,
    /// A score board's correction that set the kept score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<i64>,
    /// A score board's correction that removed the entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The admin's JWT `sub`, when the token carries one.
    #[serde(default)]
    pub actor: Option<String>,
    /// A correction's id (the client's, or one made up for it): retrying with it is safe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correction_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub void_id: Option<String>,
    /// A grant's id, when the client gave one: retrying with it is safe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
}

impl AuditEntry {
    pub(crate) fn new(board: &str, kind: AuditKind, user_id: &str, actor: Option<&str>, now: DateTime<Utc>) -> Self {
        Self {
            at: now,
            board: board.to_owned(),
            kind,
            user_id: user_id.to_owned(),
            delta: None,
            set: None,
            removed: None,
            reason: None,
            actor: actor.map(|a| a.chars().take(MAX_ACTOR_CHARS).collect()),
            correction_id: None,
            void_id: None,
            grant_id: None,
        }
    }

    pub(crate) fn json(&self) -> String {
        serde_json::to_string(self).expect("an audit entry always serializes")
    }
}
