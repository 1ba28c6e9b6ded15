//! Sign-ins in the simulation (docs/sign-ins.md): the forum takes them, one a day per user,
//! a point each and a bonus on the day a streak is exactly 7, 14 or 28 days, to the signed
//! day's periods. The model keeps each user's signed days and states every answer from them.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::model::{Model, day_of, season_of};
use super::world::{World, restoring};

/// `sign_in = { points = 1 }`, with the default bonuses.
const POINT: i64 = 1;
const BONUSES: [(i64, i64); 3] = [(7, 10), (14, 20), (28, 40)];
/// A sign-in's id is remembered this long after its first delivery.
const MARKER_SECS: i64 = 48 * 3600;

/// A sign-in's answer as the model states it: refused (status, code), or
/// (duplicate, already_signed, streak, days_this_month, points_awarded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignedIn {
    Refused(u16, String),
    Answer { duplicate: bool, already_signed: bool, streak: i64, days: i64, points: i64 },
}

impl Model {
    /// A sign-in of `user` for today at `now`.
    pub fn sign_in(&mut self, id: &str, user: &str, now: i64) -> SignedIn {
        if let Some((first, answer)) = self.sign_in_ids.get(id)
            && now - first < MARKER_SECS
        {
            return match answer.clone() {
                SignedIn::Answer { already_signed, streak, days, points, .. } => {
                    SignedIn::Answer { duplicate: true, already_signed, streak, days, points }
                }
                refused => refused,
            };
        }
        if self.is_banned(user) {
            return SignedIn::Refused(422, "user_banned".into());
        }
        let today = now.div_euclid(86_400);
        let signed = self.signed.entry(user.to_owned()).or_default();
        let already = signed.contains(&today);
        signed.insert(today);
        let streak = (0..).take_while(|back| signed.contains(&(today - back))).count() as i64;
        let month = &day_of(now)[..7];
        let days = signed.iter().filter(|d| day_of(*d * 86_400).starts_with(month)).count() as i64;
        let points = if already { 0 } else { POINT + BONUSES.iter().find(|(at, _)| *at == streak).map_or(0, |b| b.1) };
        if points > 0 {
            let periods = [format!("day:{}", day_of(now)), format!("season:{}", season_of(now)), "all".to_owned()];
            self.give_forum(user, &periods, points, now);
        }
        let answer = SignedIn::Answer { duplicate: false, already_signed: already, streak, days, points };
        self.sign_in_ids.insert(id.to_owned(), (now, answer.clone()));
        answer
    }
}

fn answer_of(status: StatusCode, reply: &Value) -> SignedIn {
    if status != StatusCode::OK {
        return SignedIn::Refused(status.as_u16(), reply["error"]["code"].as_str().unwrap_or_default().to_owned());
    }
    let n = |field: &str| reply[field].as_i64().unwrap_or(-1);
    SignedIn::Answer {
        duplicate: reply["duplicate"] == true,
        already_signed: reply["already_signed"] == true,
        streak: n("streak"),
        days: n("days_this_month"),
        points: n("points_awarded"),
    }
}

impl World {
    /// `POST /v1/sign-ins` for today, sent again at once when `again`.
    pub(super) async fn sign_in(&mut self, id: u32, user: u8, again: bool) -> Result<(), String> {
        let (id, user) = (format!("g{id}"), format!("u{user}"));
        for _ in 0..if again { 2 } else { 1 } {
            let mut next = self.model.clone();
            let expect = next.sign_in(&id, &user, self.now());
            let (status, reply) = self.app.post("/v1/sign-ins", &json!({"event_id": id, "user_id": user})).await;
            if self.forum_lost && restoring(status, &reply) {
                continue;
            }
            let got = answer_of(status, &reply);
            if got != expect {
                return Err(format!("sign-in {id} of {user}: expected {expect:?}, got {status} {reply}"));
            }
            self.model = next;
        }
        Ok(())
    }
}
