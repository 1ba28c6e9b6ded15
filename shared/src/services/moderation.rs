//! Admin safety valves: bans, audited score corrections, and
//! the audit log. Each board's share is one atomic script; which periods it touches is
//! computed here, from the injected time.

use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use futures::future::join_all;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

use crate::domain::config::{Board, BoardKind, Config};
use crate::domain::ids::{self, IdError};
use crate::domain::period::{EventWindow, Period, PeriodKind};
use crate::domain::scoring;
use crate::domain::tiebreak::{self, MAX_POINTS, RangeError};
use crate::redis::error::StoreError;
use crate::redis::keys::Keys;
use crate::redis::scripts::moderation::{self as script, AuditRecord, Ban, CorrectionReply, ScoreCorrection};
use crate::redis::scripts::{GuardRefusal, PeriodStanding};
use crate::redis::store::Store;

/// Entries each board's audit log keeps (older ones are trimmed).
pub const AUDIT_LOG_LEN: usize = 10_000;
/// `GET /v1/admin/audit?limit=`: default and largest page.
pub const DEFAULT_AUDIT_PAGE: usize = 50;
pub const MAX_AUDIT_PAGE: usize = 1_000;
/// Longest correction reason, in characters.
pub const MAX_REASON_CHARS: usize = 200;
/// Longest actor (JWT `sub`) kept in an audit entry.
const MAX_ACTOR_CHARS: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum ModerationError {
    #[error("no cumulative board named {0:?}")]
    UnknownBoard(String),
    #[error(transparent)]
    InvalidId(#[from] IdError),
    #[error("delta must be a non-zero integer within ±{MAX_POINTS}")]
    DeltaOutOfRange,
    #[error("reason must be 1..={MAX_REASON_CHARS} characters without control characters")]
    BadReason,
    #[error("limit must be 1..={MAX_AUDIT_PAGE}")]
    BadLimit,
    #[error(transparent)]
    Time(#[from] RangeError),
    #[error("the correction would take the score on board {0:?} below 0 or past {MAX_POINTS}")]
    ScoreOutOfRange(String),
    #[error("correction {0:?} was already made with a different payload")]
    Conflict(String),
    #[error("{0}")]
    BadPeriod(String),
    #[error(transparent)]
    Guard(#[from] GuardRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditKind {
    Ban,
    Unban,
    Correction,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The admin's JWT `sub`, when the token carries one.
    #[serde(default)]
    pub actor: Option<String>,
    /// A correction's id (the client's, or one made up for it): retrying with it is safe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correction_id: Option<String>,
}

impl AuditEntry {
    fn new(board: &str, kind: AuditKind, user_id: &str, actor: Option<&str>, now: DateTime<Utc>) -> Self {
        Self {
            at: now,
            board: board.to_owned(),
            kind,
            user_id: user_id.to_owned(),
            delta: None,
            reason: None,
            actor: actor.map(|a| a.chars().take(MAX_ACTOR_CHARS).collect()),
            correction_id: None,
        }
    }

    fn json(&self) -> String {
        serde_json::to_string(self).expect("an audit entry always serializes")
    }
}

/// `POST /v1/admin/boards/{board}/users/{user_id}/corrections`. Without `period`/`at` the
/// board's current periods are corrected; `period` + `period_id` (or `at`, a date in the
/// board's timezone) aim at a past period and every coarser period of the board containing
/// it: a day, its month or season, and all-time.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CorrectionRequest {
    /// Makes the correction exactly-once: a retry gets the first answer, another payload a
    /// 409. One is made up when absent (and returned, so the retry can carry it).
    #[serde(default)]
    pub correction_id: Option<String>,
    pub delta: i64,
    pub reason: String,
    #[serde(default)]
    pub period: Option<String>,
    #[serde(default)]
    pub period_id: Option<String>,
    #[serde(default)]
    pub at: Option<NaiveDate>,
}

impl CorrectionRequest {
    fn validate(&self) -> Result<(), ModerationError> {
        if let Some(id) = &self.correction_id {
            ids::validate_id("correction_id", id)?;
        }
        if self.delta == 0 || !(-MAX_POINTS..=MAX_POINTS).contains(&self.delta) {
            return Err(ModerationError::DeltaOutOfRange);
        }
        let chars = self.reason.chars().count();
        if self.reason.trim().is_empty() || chars > MAX_REASON_CHARS || self.reason.chars().any(char::is_control) {
            return Err(ModerationError::BadReason);
        }
        Ok(())
    }
}

/// A period a user was removed from by a ban.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemovedFrom {
    pub board: String,
    pub period: &'static str,
    pub period_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BanReceipt {
    pub user_id: String,
    pub banned: bool,
    /// Every board the ban (or unban) now applies to.
    pub boards: Vec<String>,
    /// The live periods the user was on, and is no longer.
    pub removed: Vec<RemovedFrom>,
}

/// A correction's audit entry, and the user's standing on each corrected period after it. A
/// retry with the same `correction_id` gets the first receipt with `duplicate: true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CorrectionReceipt {
    #[serde(flatten)]
    pub entry: AuditEntry,
    pub duplicate: bool,
    pub periods: Vec<PeriodStanding>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditPage {
    pub board: String,
    /// Newest first.
    pub entries: Vec<AuditEntry>,
}

/// The periods of `board` an event could still land in at `now`: those containing any instant
/// from `now - grace` (late events) to `now + max_future` (clock skew). Usually one per
/// period kind; two around a boundary (e.g. yesterday's day board for 15 minutes after
/// midnight). Older periods are history: a ban does not rewrite them.
pub fn live_periods(board: &Board, now: DateTime<Utc>, window: &EventWindow) -> Vec<Period> {
    let mut live: Vec<Period> = Vec::new();
    for &kind in &board.periods {
        for at in [now - window.grace, now, now + window.max_future] {
            let period = Period::containing(kind, at, board.timezone);
            if !live.contains(&period) {
                live.push(period);
            }
        }
    }
    live
}

/// The periods of `board` that contain `now`.
pub fn current_periods(board: &Board, now: DateTime<Utc>) -> Vec<Period> {
    board.periods.iter().map(|&kind| Period::containing(kind, now, board.timezone)).collect()
}

/// How fine a period kind is: a period contains every finer one of the same instant.
fn fineness(kind: PeriodKind) -> u8 {
    match kind {
        PeriodKind::Day => 0,
        PeriodKind::Month | PeriodKind::Season => 1,
        PeriodKind::All => 2,
    }
}

/// The periods a correction aims at: the current ones by default; with `period` +
/// `period_id` that period and every coarser one of the board containing it; with `at`
/// every period containing that date. A period must have started, and its board must still
/// be kept (not past its retention).
pub fn correction_periods(board: &Board, request: &CorrectionRequest, now: DateTime<Utc>) -> Result<Vec<Period>, ModerationError> {
    let bad = |message: String| ModerationError::BadPeriod(message);
    let (day, finest) = match (&request.period, &request.period_id, request.at) {
        (None, None, None) => return Ok(current_periods(board, now)),
        (None, None, Some(at)) => (crate::domain::period::in_range(at).map_err(|e| bad(format!("at: {e}")))?, 0),
        (Some(kind), Some(id), None) => {
            let kind = PeriodKind::parse(kind)
                .filter(|kind| board.periods.contains(kind))
                .ok_or_else(|| bad(format!("board {:?} has no period {kind:?}", board.name)))?;
            let day = match kind {
                PeriodKind::Day => crate::domain::period::parse_day(id),
                PeriodKind::Month | PeriodKind::Season => crate::domain::period::parse_month(id),
                PeriodKind::All if id == "all" => Ok(now.with_timezone(&board.timezone).date_naive()),
                PeriodKind::All => Err(crate::domain::period::DateError::Malformed),
            };
            (day.map_err(|e| bad(format!("period_id {id:?} of a {} period: {e}", kind.as_str())))?, fineness(kind))
        }
        _ => return Err(bad("give period and period_id together, or at alone".into())),
    };
    let periods: Vec<Period> =
        board.periods.iter().filter(|&&kind| fineness(kind) >= finest).map(|&kind| Period::on_date(kind, day, board.timezone)).collect();
    for period in &periods {
        if period.start.is_some_and(|start| start > now) {
            return Err(bad(format!("{} {} has not started", period.kind.as_str(), period.id)));
        }
        if period.expires_at().is_some_and(|expiry| expiry <= now.timestamp()) {
            return Err(bad(format!("{} {} is no longer kept", period.kind.as_str(), period.id)));
        }
    }
    Ok(periods)
}

#[derive(Clone)]
pub struct Moderation {
    config: Arc<Config>,
    keys: Keys,
    store: Store,
    window: EventWindow,
}

impl Moderation {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store) -> Self {
        Self { config, keys, store, window: EventWindow::default() }
    }

    /// Boards whose members are users (decaying boards rank items).
    fn user_boards(&self) -> impl Iterator<Item = &Board> {
        self.config.boards().iter().filter(|b| b.kind != BoardKind::Decaying)
    }

    /// Boards whose scores are points that a correction can add to or take from (a score
    /// board's kept score is replaced by submitting one, not corrected).
    fn points_board(&self, name: &str) -> Result<&Board, ModerationError> {
        self.user_boards()
            .filter(|b| b.kind == BoardKind::Cumulative)
            .find(|b| b.name == name)
            .ok_or_else(|| ModerationError::UnknownBoard(name.to_owned()))
    }

    fn user_board(&self, name: &str) -> Result<&Board, ModerationError> {
        self.user_boards().find(|b| b.name == name).ok_or_else(|| ModerationError::UnknownBoard(name.to_owned()))
    }

    /// Bans `user_id` from every user board: one atomic script per board (all boards
    /// concurrently) guards the user out and removes them from the board's live periods.
    /// Banning twice is harmless; if a board fails (503), retrying completes the ban.
    pub async fn ban(&self, user_id: &str, actor: Option<&str>, now: DateTime<Utc>) -> Result<BanReceipt, ModerationError> {
        self.set_ban(user_id, true, actor, now).await
    }

    /// Lifts the ban on every user board. Scores removed by the ban are not restored.
    pub async fn unban(&self, user_id: &str, actor: Option<&str>, now: DateTime<Utc>) -> Result<BanReceipt, ModerationError> {
        self.set_ban(user_id, false, actor, now).await
    }

    async fn set_ban(&self, user_id: &str, banned: bool, actor: Option<&str>, now: DateTime<Utc>) -> Result<BanReceipt, ModerationError> {
        ids::validate_id("user_id", user_id)?;
        let kind = if banned { AuditKind::Ban } else { AuditKind::Unban };
        let conn = self.store.write_connection().await?;
        let boards: Vec<(&Board, Vec<Period>)> =
            self.user_boards().map(|board| (board, if banned { live_periods(board, now, &self.window) } else { Vec::new() })).collect();
        let replies = join_all(boards.iter().map(|(board, live)| {
            let (mut conn, keys) = (conn.clone(), self.keys.board(&board.name));
            let entry = AuditEntry::new(&board.name, kind, user_id, actor, now).json();
            let action = if banned { Ban::Ban { live, statements: board.statements } } else { Ban::Unban };
            async move { script::ban(&mut conn, &keys, user_id, action, AuditRecord { entry: &entry, keep: AUDIT_LOG_LEN }).await }
        }))
        .await;
        let mut removed = Vec::new();
        for ((board, _), reply) in boards.iter().zip(replies) {
            removed.extend(reply?.into_iter().map(|period| RemovedFrom {
                board: board.name.clone(),
                period: period.kind.as_str(),
                period_id: period.id.clone(),
            }));
        }
        let boards = boards.iter().map(|(board, _)| board.name.clone()).collect();
        Ok(BanReceipt { user_id: user_id.to_owned(), banned, boards, removed })
    }

    /// Adds `request.delta` to the user's score on the periods of `board_name` it aims at
    /// (`correction_periods`), with an audit entry, atomically and exactly once per
    /// correction id. Refused (nothing written) when a score would go below 0 or past the
    /// composite's range, when the user is banned, or a period is closed.
    pub async fn correct(
        &self,
        board_name: &str,
        user_id: &str,
        request: &CorrectionRequest,
        actor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<CorrectionReceipt, ModerationError> {
        let board = self.points_board(board_name)?;
        ids::validate_id("user_id", user_id)?;
        request.validate()?;
        let periods = correction_periods(board, request, now)?;
        let correction_id = request.correction_id.clone().unwrap_or_else(ids::made_up_id);
        let fingerprint = scoring::fingerprint(&(user_id, request));
        let correction = ScoreCorrection {
            correction_id: &correction_id,
            fingerprint: &fingerprint,
            member: user_id,
            delta: request.delta,
            periods: &periods,
            time_part: tiebreak::time_part(now)?,
            now,
            reason: &request.reason,
            statements: board.statements,
        };
        let entry = AuditEntry {
            delta: Some(request.delta),
            reason: Some(request.reason.clone()),
            correction_id: Some(correction_id.clone()),
            ..AuditEntry::new(&board.name, AuditKind::Correction, user_id, actor, now)
        };
        let entry_json = entry.json();
        let mut conn = self.store.write_connection().await?;
        let keys = self.keys.board(&board.name);
        let audit = AuditRecord { entry: &entry_json, keep: AUDIT_LOG_LEN };
        let (entry, duplicate, periods) = match script::correct_score(&mut conn, &keys, &correction, audit).await? {
            CorrectionReply::Corrected { entry, periods, duplicate } => {
                let entry = serde_json::from_str(&entry).map_err(|e| StoreError::Protocol(format!("correction entry: {e}")))?;
                (entry, duplicate, periods)
            }
            CorrectionReply::Conflict => return Err(ModerationError::Conflict(correction_id)),
            CorrectionReply::Banned => Err(GuardRefusal::Banned { user_id: user_id.to_owned(), board: board.name.clone() })?,
            CorrectionReply::PeriodClosed(period_id) => Err(GuardRefusal::PeriodClosed { board: board.name.clone(), period_id })?,
            CorrectionReply::OutOfRange => return Err(ModerationError::ScoreOutOfRange(board.name.clone())),
        };
        // Under a made-up id a duplicate can only be the client library's own re-send of this
        // request: the caller sent it once.
        let duplicate = duplicate && request.correction_id.is_some();
        Ok(CorrectionReceipt { entry, duplicate, periods })
    }

    /// The newest `limit` entries of a board's audit log (default 50, at most 1,000).
    pub async fn audit(&self, board_name: &str, limit: Option<usize>) -> Result<AuditPage, ModerationError> {
        let board = self.user_board(board_name)?;
        let limit = limit.unwrap_or(DEFAULT_AUDIT_PAGE);
        if !(1..=MAX_AUDIT_PAGE).contains(&limit) {
            return Err(ModerationError::BadLimit);
        }
        let mut conn = self.store.connection().await?;
        let raw: Vec<String> = conn.lrange(self.keys.board(&board.name).audit(), 0, limit as isize - 1).await.map_err(StoreError::from)?;
        let entries = raw
            .iter()
            .map(|entry| serde_json::from_str(entry).map_err(|e| StoreError::Protocol(format!("audit entry: {e}"))))
            .collect::<Result<_, _>>()?;
        Ok(AuditPage { board: board.name.clone(), entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn ids(periods: &[Period]) -> Vec<&str> {
        periods.iter().map(|p| p.id.as_str()).collect()
    }

    #[test]
    fn live_periods_cover_the_event_window_around_boundaries() {
        let config = Config::default_boards();
        let activity = config.board("activity").unwrap();
        let window = EventWindow::default();
        assert_eq!(ids(&live_periods(activity, at("2026-11-22T10:00:00+08:00"), &window)), ["2026-11-22", "2026-11"]);
        // Ten minutes into December: late events can still land on November 30 and November.
        assert_eq!(
            ids(&live_periods(activity, at("2026-12-01T00:10:00+08:00"), &window)),
            ["2026-11-30", "2026-12-01", "2026-11", "2026-12"]
        );
        // Thirty seconds before midnight: a client a minute ahead already writes tomorrow.
        assert_eq!(ids(&live_periods(activity, at("2026-11-22T23:59:30+08:00"), &window)), ["2026-11-22", "2026-11-23", "2026-11"]);
        assert_eq!(ids(&current_periods(activity, at("2026-12-01T00:10:00+08:00"))), ["2026-12-01", "2026-12"]);
    }

    #[test]
    fn corrections_are_bounded() {
        let request = |delta: i64, reason: &str| CorrectionRequest {
            delta,
            reason: reason.into(),
            correction_id: None,
            period: None,
            period_id: None,
            at: None,
        };
        assert!(request(-5, "duplicate award").validate().is_ok());
        assert!(request(MAX_POINTS, &"x".repeat(MAX_REASON_CHARS)).validate().is_ok());
        assert!(matches!(request(0, "r").validate(), Err(ModerationError::DeltaOutOfRange)));
        assert!(matches!(request(MAX_POINTS + 1, "r").validate(), Err(ModerationError::DeltaOutOfRange)));
        assert!(matches!(request(i64::MIN, "r").validate(), Err(ModerationError::DeltaOutOfRange)));
        for reason in ["", "   ", "a\nb", &"x".repeat(MAX_REASON_CHARS + 1)] {
            assert!(matches!(request(1, reason).validate(), Err(ModerationError::BadReason)), "{reason:?}");
        }
    }
}
