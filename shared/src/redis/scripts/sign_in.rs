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

/// Signs in every plan of `plans` (all of the sign-in board), in order, in one script call:
/// bitmap, streak, points and bonuses of each, atomically, in one round trip (with `wait` for
/// replicas in the same one). The HTTP route sends one plan; a queue's batch up to `CHUNK`.
pub async fn sign_in_chunk(
    conn: &mut Connection,
    keys: &BoardKeys,
    plans: &[SignInPlan<'_>],
    wait: ReplicaWait,
) -> Result<Vec<SignInReply>, StoreError> {
    let mut invocation = ScriptCall::new(&SIGN_IN);
    invocation.arg(plans.len());
    for plan in plans {
        let (plan_keys, args) = one(keys, plan);
        invocation.arg(plan_keys.len()).arg(args.len());
        for key in plan_keys {
            invocation.key(key);
        }
        for arg in args {
            invocation.arg(arg);
        }
    }
    let flat: Vec<String> = conn.run_script(&invocation, wait).await?;
    if flat.len() != 2 * plans.len() {
        return Err(StoreError::Protocol(format!("sign_in: {} values for {} sign-ins", flat.len(), plans.len())));
    }
    plans.iter().zip(flat.chunks(2)).map(|(plan, pair)| reply(plan, &pair[0], &pair[1])).collect()
}

/// One sign-in's keys and arguments, as the script numbers them.
fn one(keys: &BoardKeys, plan: &SignInPlan<'_>) -> (Vec<String>, Vec<String>) {
    let (date, member) = (plan.date, plan.user_id.as_str());
    let next_day = date.succ_opt().expect("planned dates have a next day");
    let previous_month = previous_month(date);
    let bonuses: Vec<String> = plan.sign_in.streak_bonuses.iter().map(|(days, bonus)| format!("{days}:{bonus}")).collect();
    let periods = || plan.periods.iter().chain(&plan.next_day_periods);

    let mut plan_keys = vec![
        keys.event(&plan.event_id),
        keys.sign_ins(member, &month_id(date)),
        keys.sign_ins(member, &month_id(previous_month)),
        keys.sign_ins(member, &month_id(next_day)),
        keys.guard(),
        keys.journal(),
    ];
    plan_keys.extend(periods().map(|period| keys.period(period)));
    if plan.board.statements {
        plan_keys.extend(periods().map(|period| keys.statement(member, period)));
    }
    let mut args = vec![
        plan.fingerprint.clone(),
        member.to_owned(),
        date.day().to_string(),
        days_in_month(previous_month).to_string(),
        next_day.day().to_string(),
        plan.sign_in.points.to_string(),
        bonuses.join(","),
        plan.time_part.to_string(),
        keys.ttl(EVENT_MARKER_TTL_SECS as i64, plan.now).to_string(),
        keys.ttl(plan.bitmap_ttl_secs, plan.now).to_string(),
        plan.first_delivery.as_ref().map_or("", |refusal| refusal.code()).to_owned(),
        date.to_string(),
        if plan.board.statements { "1" } else { "0" }.to_owned(),
        if keys.journaled() { plan.journal_entry.clone() } else { String::new() },
        plan.now.timestamp_millis().to_string(),
    ];
    for period in periods() {
        args.extend([period.kind.as_str().to_owned(), period.id.clone(), keys.ttl(period.ttl_secs(plan.now), plan.now).to_string()]);
    }
    (plan_keys, args)
}

fn reply(plan: &SignInPlan<'_>, status: &str, body: &str) -> Result<SignInReply, StoreError> {
    let outcome = || serde_json::from_str(body).map_err(|e| StoreError::Protocol(format!("sign_in: {e}")));
    match Status::parse("sign_in", status, plan.first_delivery.as_ref().map(|refusal| refusal.code()))? {
        Status::New => Ok(SignInReply::New(outcome()?)),
        Status::Duplicate => Ok(SignInReply::Duplicate(outcome()?)),
        Status::Conflict => Ok(SignInReply::Conflict),
        Status::OutsideWindow => Ok(SignInReply::OutsideWindow),
        Status::Banned => Ok(SignInReply::Banned),
        Status::PeriodClosed => Ok(SignInReply::PeriodClosed(body.to_owned())),
        Status::OutOfRange => Ok(SignInReply::OutOfRange),
        other => Err(other.unexpected("sign_in")),
    }
}
