//! Typed wrapper of `sign_in.lua`.

use chrono::Datelike;
use serde::{Deserialize, Serialize};

use super::{EVENT_MARKER_TTL_SECS, SIGN_IN, Status};
use crate::domain::period::{days_in_month, month_id, previous_month};
use crate::domain::sign_in::SignInPlan;
use crate::redis::error::StoreError;
use crate::redis::keys::BoardKeys;
use crate::redis::settings::ReplicaWait;
use crate::redis::store::{Connection, ScriptCall};

/// What a sign-in did. Stored verbatim in the event marker so a duplicate gets the first answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignInOutcome {
    /// The day signed, as first recorded (markers written before it was kept lack it).
    #[serde(default, skip_serializing)]
    pub date: Option<chrono::NaiveDate>,
    pub already_signed: bool,
    /// Consecutive days ending on the signed date.
    pub streak: u64,
    /// Signed days in the month of the signed date.
    pub days_this_month: u32,
    /// Sign-in points plus any streak bonus given by this call (0 when already signed).
    pub points_awarded: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignInReply {
    New(SignInOutcome),
    Duplicate(SignInOutcome),
    Conflict,
    /// A first delivery for a date the policy no longer accepts.
    OutsideWindow,
    Banned,
    /// The period (id) is frozen for archiving.
    PeriodClosed(String),
    OutOfRange,
}

/// Signs `member` in for `plan.date`: bitmap, streak, points and bonuses, atomically, in one
/// round trip (with `wait` for replicas in the same one).
pub async fn sign_in(conn: &mut Connection, keys: &BoardKeys, plan: &SignInPlan<'_>, wait: ReplicaWait) -> Result<SignInReply, StoreError> {
    let (date, member) = (plan.date, plan.user_id.as_str());
    let next_day = date.succ_opt().expect("planned dates have a next day");
    let previous_month = previous_month(date);
    let bonuses: Vec<String> = plan.sign_in.streak_bonuses.iter().map(|(days, bonus)| format!("{days}:{bonus}")).collect();

    let mut invocation = ScriptCall::new(&SIGN_IN);
    invocation
        .key(keys.event(&plan.event_id))
        .key(keys.sign_ins(member, &month_id(date)))
        .key(keys.sign_ins(member, &month_id(previous_month)))
        .key(keys.sign_ins(member, &month_id(next_day)))
        .key(keys.guard())
        .key(keys.journal());
    for period in plan.periods.iter().chain(&plan.next_day_periods) {
        invocation.key(keys.period(period));
    }
    if plan.board.statements {
        for period in plan.periods.iter().chain(&plan.next_day_periods) {
            invocation.key(keys.statement(member, period));
        }
    }
    invocation
        .arg(&plan.fingerprint)
        .arg(member)
        .arg(date.day())
        .arg(days_in_month(previous_month))
        .arg(next_day.day())
        .arg(plan.sign_in.points)
        .arg(bonuses.join(","))
        .arg(plan.time_part)
        .arg(keys.ttl(EVENT_MARKER_TTL_SECS as i64, plan.now))
        .arg(keys.ttl(plan.bitmap_ttl_secs, plan.now))
        .arg(plan.first_delivery.as_ref().map_or("", |refusal| refusal.code()))
        .arg(date.to_string())
        .arg(if plan.board.statements { 1 } else { 0 })
        .arg(if keys.journaled() { plan.journal_entry.as_str() } else { "" });
    for period in plan.periods.iter().chain(&plan.next_day_periods) {
        invocation.arg(period.kind.as_str()).arg(&period.id).arg(keys.ttl(period.ttl_secs(plan.now), plan.now));
    }
    let (status, body): (String, String) = conn.run_script(&invocation, wait).await?;
    let outcome = || serde_json::from_str(&body).map_err(|e| StoreError::Protocol(format!("sign_in: {e}")));
    match Status::parse("sign_in", &status, plan.first_delivery.as_ref().map(|refusal| refusal.code()))? {
        Status::New => Ok(SignInReply::New(outcome()?)),
        Status::Duplicate => Ok(SignInReply::Duplicate(outcome()?)),
        Status::Conflict => Ok(SignInReply::Conflict),
        Status::OutsideWindow => Ok(SignInReply::OutsideWindow),
        Status::Banned => Ok(SignInReply::Banned),
        Status::PeriodClosed => Ok(SignInReply::PeriodClosed(body)),
        Status::OutOfRange => Ok(SignInReply::OutOfRange),
        other => Err(other.unexpected("sign_in")),
    }
}
