//! Voids in the simulation: the `void` function's service (`Voids`, as its route calls it),
//! which decides from the journal (S3 and Redis) what the user's events in a window still hold;
//! its answer and the reads after it checked against the model's voids.
//!
//! The void lists the journal's objects of the window's dates (a day either side), dated by
//! Redis's clock, which the simulation's functions do not share (their clock is moved by days):
//! here it lists every object of the journal for each date (lines read twice count once), so
//! what it reads is what it would read with the clocks together.

use chrono::DateTime;
use journal::S3Objects;
use serde_json::Value;
use standings::archive::objects::{ObjectError, Objects, Put};
use standings::http::ApiError;
use standings::services::moderation::Moderation;
use standings::services::voids::{VoidRequest, Voids};

use super::model::{Expect, day_number};
use super::world::World;

/// The journal's objects, each date's listing answered with the whole journal's.
struct EveryDate(S3Objects);

impl Objects for EveryDate {
    async fn put_new(&self, key: &str, body: Vec<u8>) -> Result<Put, ObjectError> {
        self.0.put_new(key, body).await
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, ObjectError> {
        self.0.get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, ObjectError> {
        self.0.list(prefix.split("dt=").next().unwrap_or(prefix)).await
    }
}

/// A void's answer as the model states it: each period's change, the live ones only (a day
/// more than a day old may have expired in Redis, which the model keeps).
fn changes(reply: &Value, now: i64) -> Vec<(String, i64)> {
    let mut changes: Vec<(String, i64)> = reply["periods"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| {
            let (kind, id) = (p["period"].as_str().unwrap_or("?"), p["period_id"].as_str().unwrap_or("?"));
            (if kind == "all" { "all".to_owned() } else { format!("{kind}:{id}") }, p["delta"].as_i64().unwrap_or(i64::MIN))
        })
        .collect();
    changes.sort();
    live(changes, now)
}

fn live(changes: Vec<(String, i64)>, now: i64) -> Vec<(String, i64)> {
    changes
        .into_iter()
        .filter(|(period, delta)| {
            *delta != 0
                && period.strip_prefix("day:").is_none_or(|day| {
                    let day = chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d").expect("a date");
                    day_number(now) - day.and_hms_opt(0, 0, 0).expect("midnight").and_utc().timestamp().div_euclid(86_400) <= 1
                })
        })
        .collect()
}

impl World {
    /// A void of `user`'s forum events in `[now - back, now - back + span)`; sent again when
    /// `again` (a retry: the first answer, marked a duplicate, nothing taken twice).
    pub(super) async fn void(&mut self, id: u32, user: u8, back: u32, span: u32, again: bool) -> Result<(), String> {
        let (now, user) = (self.now(), format!("u{user}"));
        let (from, to) = (now - i64::from(back), now - i64::from(back) + i64::from(span.max(1)));
        let request: VoidRequest = serde_json::from_value(serde_json::json!({
            "void_id": format!("v{id}"),
            "from": DateTime::from_timestamp(from, 0),
            "to": DateTime::from_timestamp(to, 0),
            "reason": "simulation",
        }))
        .map_err(|e| format!("a void request: {e}"))?;
        let moderation = Moderation::new(self.app.config.clone(), self.app.keys.clone(), self.app.store.clone());
        let voids = Voids::new(moderation, Some(EveryDate(S3Objects::new(self.s3.clone(), &self.bucket))), 3650);
        let sent = voids.void("forum", &user, &request, Some("tester"), self.app.now()).await;
        let described = format!("{sent:?}");
        let (code, reply) = match sent {
            Ok(receipt) => (None, serde_json::to_value(&receipt).unwrap_or_default()),
            Err(error) => (Some(ApiError::from(error).code), Value::Null),
        };
        if self.forum_lost && code == Some("board_restoring") {
            return Ok(());
        }
        let mut next = self.model.clone();
        let expected = match next.void(&user, from, to) {
            Err(Expect::Refused { code: want, .. }) => {
                if code != Some(want.as_str()) {
                    return Err(format!("void: expected {want}, got {described}"));
                }
                return Ok(());
            }
            Err(other) => return Err(format!("void: the model answered {other:?}")),
            Ok(changes) => live(changes, now),
        };
        let got = changes(&reply, now);
        if code.is_some() || reply["duplicate"] != false || got != expected {
            return Err(format!("void {from}..{to} of {user}: expected {expected:?}, got {got:?} {described}"));
        }
        self.model = next;
        self.last_audit = Some(("void", user.clone(), now));
        self.audited("void", user.clone());
        if again {
            let retry = voids.void("forum", &user, &request, Some("tester"), self.app.now()).await;
            let duplicate = retry.as_ref().is_ok_and(|receipt| receipt.duplicate);
            let got = retry.as_ref().map(|receipt| changes(&serde_json::to_value(receipt).unwrap_or_default(), now));
            if !duplicate || got.as_ref().ok() != Some(&expected) {
                return Err(format!("void {from}..{to} of {user} sent again: expected {expected:?} as a duplicate, got {retry:?}"));
            }
        }
        Ok(())
    }
}
