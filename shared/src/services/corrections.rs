//! Audited corrections of one user's entry on one board: points added or taken on a points
//! board; on a score board the entry removed, its kept score set, or (on `sum` boards) added
//! to. One atomic script per correction, exactly once per `correction_id`.

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use super::moderation::{AUDIT_LOG_LEN, AuditEntry, AuditKind, Moderation, ModerationError, check_reason};
use crate::domain::config::{Board, Order};
use crate::domain::correction::Change;
use crate::domain::ids;
use crate::domain::period::{EventWindow, Period, PeriodKind};
use crate::domain::reach::{current_periods, live_periods};
use crate::domain::{scores, scoring};
use crate::redis::error::StoreError;
use crate::redis::scripts::moderation::{self as script, AuditRecord, CorrectionReply, ScoreCorrection};
use crate::redis::scripts::{GuardRefusal, PeriodStanding};

/// `POST /v1/admin/boards/{board}/users/{user_id}/corrections`: exactly one of `delta` (points
/// boards, `sum` score boards), `set` and `remove` (score boards). Without `period`/`at` a
/// change goes to the board's current periods (`remove`: every live period); `period` +
/// `period_id` aim at a past period — a `delta` also at every coarser period of the board
/// containing it (a day, its month or season, all-time), `set` and `remove` only at the period
/// named; `at` (a date in the board's timezone) at every period containing that day.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CorrectionRequest {
    /// Makes the correction exactly-once: a retry gets the first answer, another payload a
    /// 409. One is made up when absent (and returned, so the retry can carry it).
    #[serde(default)]
    pub correction_id: Option<String>,
    #[serde(default)]
    pub delta: Option<i64>,
    #[serde(default)]
    pub set: Option<i64>,
    #[serde(default)]
    pub remove: Option<bool>,
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
        check_reason(&self.reason)
    }
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

/// The periods a correction aims at (see `CorrectionRequest`). A period must have started,
/// and its board must still be kept (not past its retention). On a tournament's board, only
/// the instance open at `now`: a correction after an instance's end (or between two) is refused
/// `PeriodClosed`, as a player's score then is, so what its results say stays what they said.
pub fn correction_periods(
    board: &Board,
    request: &CorrectionRequest,
    change: Change,
    now: DateTime<Utc>,
    window: &EventWindow,
) -> Result<Vec<Period>, ModerationError> {
    let mut periods = aimed_periods(board, request, change, now, window)?;
    if let Some(tournament) = board.tournament.as_deref() {
        let open = tournament.open_at(now).map(|instance| instance.id);
        let is_open = |period: &Period| open.as_deref() == Some(period.id.as_str());
        // Unnamed, a removal reaches the periods a ban would: of those, the open instance.
        if request.period.is_none() && request.at.is_none() && change == Change::Remove {
            periods.retain(is_open);
        }
        // The first period not open, or (none aimed at: no instance is open) the one of `now`.
        let closed =
            periods.iter().find(|period| !is_open(period)).map_or_else(|| tournament.period_at(now).id, |period| period.id.clone());
        if periods.is_empty() || !periods.iter().all(is_open) {
            return Err(GuardRefusal::PeriodClosed { board: board.name.clone(), period_id: closed }.into());
        }
    }
    Ok(periods)
}

fn aimed_periods(
    board: &Board,
    request: &CorrectionRequest,
    change: Change,
    now: DateTime<Utc>,
    window: &EventWindow,
) -> Result<Vec<Period>, ModerationError> {
    let bad = |message: String| ModerationError::BadPeriod(message);
    let only_named = !matches!(change, Change::Add(_));
    let periods: Vec<Period> = match (&request.period, &request.period_id, request.at) {
        (None, None, None) if change == Change::Remove => return Ok(live_periods(board, now, window)),
        (None, None, None) => return Ok(current_periods(board, now)),
        (None, None, Some(at)) => {
            let day: NaiveDate = crate::domain::period::in_range(at).map_err(|e| bad(format!("at: {e}")))?;
            board.periods.iter().map(|&kind| Period::on_date(kind, day, board.timezone)).collect()
        }
        (Some(kind), Some(id), None) => {
            let kind = board.period_kind(kind).ok_or_else(|| bad(format!("board {:?} has no period {kind:?}", board.name)))?;
            let named =
                Period::named(kind, id, board.timezone).map_err(|e| bad(format!("period_id {id:?} of a {} period: {e}", kind.as_str())))?;
            // The periods holding the named one's first instant (a cron instance starts at any
            // minute, not at midnight).
            let anchor = named.start.map_or(now, |start| start.with_timezone(&Utc));
            let kinds: Vec<PeriodKind> =
                if only_named { vec![kind] } else { board.periods.iter().copied().filter(|&other| other.contains(kind)).collect() };
            kinds.into_iter().map(|kind| Period::containing(kind, anchor, board.timezone)).collect()
        }
        _ => return Err(bad("give period and period_id together, or at alone".into())),
    };
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

impl Moderation {
    /// Applies the change `request` asks of the user's entry on `board_name`, on the periods
    /// it aims at, with an audit entry, atomically and exactly once per correction id. Refused
    /// (nothing written) when the board does not take that change, a score would leave its
    /// range, the user is banned, or a period is closed.
    pub async fn correct(
        &self,
        board_name: &str,
        user_id: &str,
        request: &CorrectionRequest,
        actor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<CorrectionReceipt, ModerationError> {
        self.correct_as(board_name, user_id, request, actor, now, None).await
    }

    /// `correct`, where a request without a `correction_id` gets `made_up` (a restore's replay:
    /// the id the first application made up, from its journal entry) instead of a new one.
    pub async fn correct_as(
        &self,
        board_name: &str,
        user_id: &str,
        request: &CorrectionRequest,
        actor: Option<&str>,
        now: DateTime<Utc>,
        made_up: Option<String>,
    ) -> Result<CorrectionReceipt, ModerationError> {
        let board = self.user_board(board_name)?;
        ids::validate_id("user_id", user_id)?;
        request.validate()?;
        let change = Change::of(board, request.delta, request.set, request.remove)?;
        let periods = correction_periods(board, request, change, now, &self.window)?;
        let mut conn = self.store.write_connection().await?;
        let layout = self.store.written_layout(&self.keys, board).await?;
        // Laid out as the board holds its scores (a move to the configured `max_score` may be
        // due): a change that fits only the configured one waits for the move.
        let held = scores::held_at(board, layout.held_scale());
        if !std::ptr::eq(board, &*held) && Change::of(&held, request.delta, request.set, request.remove).is_err() {
            return Err(StoreError::rescaled(board, &held).into());
        }
        let periods: Vec<(Period, i64)> = periods
            .into_iter()
            .map(|period| {
                // A period that has not started yet (the next day, open to a clock ahead of
                // ours) is reached no earlier than its start: a score board's time parts count
                // from there.
                let reached = period.start.map_or(now, |start| now.max(start.with_timezone(&Utc)));
                let time_part = scores::scale(&held, &period).time_part(reached)?;
                Ok((period, time_part))
            })
            .collect::<Result<_, crate::domain::tiebreak::RangeError>>()?;
        let scale = periods.first().map_or(crate::domain::tiebreak::Scale::POINTS, |(period, _)| scores::scale(&held, period));
        let (mode, operand) = change.script_operand(&scale);
        let correction_id = request.correction_id.clone().or(made_up).unwrap_or_else(ids::made_up_id);
        let fingerprint = scoring::fingerprint(&(user_id, request));
        let correction = ScoreCorrection {
            correction_id: &correction_id,
            fingerprint: &fingerprint,
            member: user_id,
            mode,
            operand,
            kind: match board.scores.map(|rules| rules.order) {
                None => "points",
                Some(Order::Desc) => "desc",
                Some(Order::Asc) => "asc",
            },
            scale,
            periods: &periods,
            now,
            reason: &request.reason,
            statements: board.statements,
            journal_entry: "",
            league: board.league.as_ref(),
            notify: board.notify.as_ref(),
        };
        let entry = AuditEntry {
            delta: request.delta,
            set: request.set,
            removed: (change == Change::Remove).then_some(true),
            reason: Some(request.reason.clone()),
            correction_id: Some(correction_id.clone()),
            ..AuditEntry::new(&board.name, AuditKind::Correction, user_id, actor, now)
        };
        let entry_json = entry.json();
        let journal_entry = if self.keys.journal_on() { journal_entry(&entry, request) } else { String::new() };
        let correction = ScoreCorrection { journal_entry: &journal_entry, ..correction };
        let keys = layout.of_user(user_id);
        let audit = AuditRecord { entry: &entry_json, keep: AUDIT_LOG_LEN };
        let (entry, duplicate, periods) = match script::correct_score(&mut conn, &keys, &correction, audit).await? {
            CorrectionReply::Corrected { entry, periods, duplicate } => {
                let entry = serde_json::from_str(&entry).map_err(|e| StoreError::Protocol(format!("correction entry: {e}")))?;
                (entry, duplicate, periods)
            }
            CorrectionReply::Conflict => return Err(ModerationError::Conflict(correction_id)),
            CorrectionReply::Banned => Err(GuardRefusal::Banned { user_id: user_id.to_owned(), board: board.name.clone() })?,
            CorrectionReply::PeriodClosed(period_id) => Err(GuardRefusal::PeriodClosed { board: board.name.clone(), period_id })?,
            CorrectionReply::OutOfRange if !std::ptr::eq(board, &*held) => return Err(StoreError::rescaled(board, &held).into()),
            CorrectionReply::OutOfRange => return Err(ModerationError::ScoreOutOfRange(board.name.clone())),
        };
        // Under a made-up id a duplicate can only be the client library's own re-send of this
        // request: the caller sent it once.
        let duplicate = duplicate && request.correction_id.is_some();
        let mut periods = periods;
        crate::services::reads::sharded::rank_standings(&conn, &self.keys, &layout, board, user_id, &mut periods).await?;
        Ok(CorrectionReceipt { entry, duplicate, periods })
    }
}

/// A correction's journal entry: its audit entry and, under `request`, what was asked, so a
/// replay asks the same.
fn journal_entry(entry: &AuditEntry, request: &CorrectionRequest) -> String {
    let mut json = serde_json::to_value(entry).expect("an audit entry always serializes");
    json["request"] = serde_json::to_value(request).expect("a correction request always serializes");
    json.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::moderation::MAX_REASON_CHARS;

    #[test]
    fn reasons_are_bounded() {
        let request = |reason: &str| CorrectionRequest {
            delta: Some(1),
            set: None,
            remove: None,
            reason: reason.into(),
            correction_id: None,
            period: None,
            period_id: None,
            at: None,
        };
        assert!(request("duplicate award").validate().is_ok());
        assert!(request(&"x".repeat(MAX_REASON_CHARS)).validate().is_ok());
        for reason in ["", "   ", "a\nb", &"x".repeat(MAX_REASON_CHARS + 1)] {
            assert!(matches!(request(reason).validate(), Err(ModerationError::BadReason)), "{reason:?}");
        }
    }
}
