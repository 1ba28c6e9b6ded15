//! The arcade in the simulation: score submissions, an admin's corrections of them, and the
//! reads of its daily league (every user's cohort with its zones, and their results of the
//! days closed), each against the model (`ladder`).

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::ladder::TIERS;
use super::model::{Expect, Fix, day_number};
use super::world::{World, event_answer, restoring};
use crate::ADMIN;

/// A 200's answer as the model states it: taken, or (a retry) the first one's; `reason`: the
/// answer names why it changed nothing (a correction's is the admin's).
fn answer(status: StatusCode, reply: &Value, delta: i64, reason: bool) -> Expect {
    if status != StatusCode::OK {
        return event_answer(status, reply).1;
    }
    let reason = reply["reason"].as_str().filter(|_| reason).map(str::to_owned);
    if reply["duplicate"].as_bool() == Some(true) { Expect::Duplicate { delta, reason } } else { Expect::Took { delta, reason } }
}

impl World {
    pub(super) async fn score(&mut self, id: u32, user: u8, score: u32) -> Result<(), String> {
        let body = json!({"event_id": format!("s{id}"), "user_id": format!("u{user}"), "score": score});
        let answered = self.app.post("/v1/boards/arcade/scores", &body).await;
        self.scored(&body, answered)
    }

    /// A score submission `body` answered `(status, reply)` (by this world's deploy, or one on
    /// another configuration), against the model.
    pub(super) fn scored(&mut self, body: &Value, (status, reply): (StatusCode, Value)) -> Result<(), String> {
        let (id, user) = (body["event_id"].as_str().unwrap_or_default(), body["user_id"].as_str().unwrap_or_default().to_owned());
        let mut next = self.model.clone();
        let expect = next.score(id, &body.to_string(), &user, body["score"].as_i64().unwrap_or_default(), self.now());
        if self.others_lost && restoring(status, &reply) {
            return Ok(());
        }
        let got = answer(status, &reply, i64::from(reply["applied"].as_bool() == Some(true)), true);
        if got != expect {
            return Err(format!("score: expected {expect:?}, got {status} {reply}"));
        }
        let before = std::mem::replace(&mut self.model, next);
        self.expect_moves(&before, &user, false);
        Ok(())
    }

    /// An admin's correction of the arcade (`remove`, or `set` today's kept score).
    pub(super) async fn fix(&mut self, id: u32, user: u8, fix: Fix) -> Result<(), String> {
        let id = format!("f{id}");
        let request = match fix {
            Fix::Remove => json!({"correction_id": id, "remove": true, "reason": "simulation"}),
            Fix::Set(score) => json!({"correction_id": id, "set": score, "reason": "simulation"}),
        };
        let mut next = self.model.clone();
        let expect = next.fix(&id, &request.to_string(), &format!("u{user}"), fix, self.now());
        let path = format!("/v1/admin/boards/arcade/users/u{user}/corrections");
        let (status, reply) = self.app.call(Method::POST, &path, request.to_string(), ADMIN).await;
        if self.others_lost && restoring(status, &reply) {
            return Ok(());
        }
        let got = answer(status, &reply, 0, false);
        if got != expect {
            return Err(format!("arcade correction {fix:?}: expected {expect:?}, got {status} {reply}"));
        }
        let before = std::mem::replace(&mut self.model, next);
        self.expect_moves(&before, &format!("u{user}"), false);
        Ok(())
    }

    /// Every user's cohort of today's league, zones as the day would end now, and their
    /// results of the days before.
    pub(super) async fn check_league(&mut self) -> Result<(), String> {
        let today = day_number(self.now());
        for user in (0..super::ops::USERS).map(|u| format!("u{u}")) {
            self.stats.reads += 2;
            let (status, read) = self.app.get(&format!("/v1/boards/arcade/users/{user}/league")).await;
            if !(self.others_lost && restoring(status, &read)) {
                self.check_cohort(&user, today, status, &read)?;
            }
            let (status, read) = self.app.get(&format!("/v1/boards/arcade/users/{user}/league/history")).await;
            if !(self.others_lost && restoring(status, &read)) {
                self.check_history(&user, today, status, &read)?;
            }
        }
        Ok(())
    }

    /// `user`'s cohort of `today` as the league route answered it.
    fn check_cohort(&self, user: &str, today: i64, status: StatusCode, read: &Value) -> Result<(), String> {
        let ladder = &self.model.ladder;
        let (tier, entries) = match ladder.cohort(user, today) {
            Some((tier, _)) => (tier, ladder.entries(user, today, &self.model.arcade_day(today), self.model.banned())),
            None => (ladder.tier_of(user), Vec::new()),
        };
        let expected = json!({
            "tier": TIERS[tier],
            "waiting": ladder.is_waiting(user, today),
            "entries": entries.iter().enumerate().map(|(i, (u, score, zone))| json!({"rank": i + 1, "user_id": u, "score": score, "zone": zone})).collect::<Vec<_>>(),
        });
        let listed: Vec<Value> = read["entries"]
            .as_array()
            .map(|list| {
                list.iter().map(|e| json!({"rank": e["rank"], "user_id": e["user_id"], "score": e["score"], "zone": e["zone"]})).collect()
            })
            .unwrap_or_default();
        let got = json!({"tier": read["tier"], "waiting": read["waiting"], "entries": listed});
        if status != StatusCode::OK || got != expected {
            return Err(format!("arcade league of {user}: expected {expected}, got {status} {got}"));
        }
        Ok(())
    }

    /// `user`'s results of the days before `today` as the history route answered them.
    fn check_history(&self, user: &str, today: i64, status: StatusCode, read: &Value) -> Result<(), String> {
        let fields = ["period_id", "tier", "rank", "cohort_size", "score", "zone", "next_tier"];
        let expected: Vec<Value> = self
            .model
            .ladder
            .history(user, today)
            .into_iter()
            .map(|(day, o)| {
                json!({"period_id": super::model::day_of(day * 86_400), "tier": TIERS[o.tier], "rank": o.rank, "cohort_size": o.size,
                    "score": o.score, "zone": o.zone, "next_tier": TIERS[o.next_tier]})
            })
            .collect();
        let got: Vec<Value> = read["results"]
            .as_array()
            .map(|list| list.iter().map(|r| fields.iter().map(|f| ((*f).to_owned(), r[*f].clone())).collect()).collect())
            .unwrap_or_default();
        if status != StatusCode::OK || got != expected {
            return Err(format!("arcade league history of {user}: expected {expected:?}, got {status} {read}"));
        }
        Ok(())
    }
}
