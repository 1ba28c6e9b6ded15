//! The simulation's concurrent reads: a sharded board read while the member it reads writes.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::world::{World, event_answer, restoring};

impl World {
    /// `writes` posts of `user` to the sharded guild, one after the other, while `reads` reads of
    /// their rank with neighbours run beside them: each read answers a standing the user held
    /// between the first write and the last (their score only grows here).
    pub(super) async fn race(&mut self, first_id: u32, user: u8, writes: u8, reads: u8) -> Result<(), String> {
        let user = format!("u{user}");
        let before = self.model.guild_points(&user);
        let bodies: Vec<Value> =
            (0..u32::from(writes)).map(|i| json!({"event_id": format!("p{}", first_id + i), "user_id": user, "action": "post"})).collect();
        let app = &self.app;
        let writing = async {
            let mut answers = Vec::new();
            for body in &bodies {
                answers.push(app.event(body.clone()).await);
            }
            answers
        };
        let path = format!("/v1/boards/guild/users/{user}?period=all&around=2");
        let reading = async {
            let mut answers = Vec::new();
            for _ in 0..reads {
                answers.push(app.get(&path).await);
            }
            answers
        };
        let (written, read) = tokio::join!(writing, reading);
        let mut applied = 0;
        for (body, (status, reply)) in bodies.iter().zip(written) {
            if self.others_lost && restoring(status, &reply) {
                continue;
            }
            let mut next = self.model.clone();
            let expect = next.post(body["event_id"].as_str().unwrap_or_default(), &body.to_string(), &user, self.now());
            let (_, got) = event_answer(status, &reply);
            if got != expect {
                return Err(format!("guild post: expected {expect:?}, got {status} {reply}"));
            }
            self.model = next;
            applied += 1;
        }
        for (status, reply) in read {
            if self.others_lost && restoring(status, &reply) {
                continue;
            }
            let score = reply["score"].as_i64().unwrap_or(-1);
            let ranked = reply["rank"].as_u64().is_some() || (before == 0 && score == 0);
            if status != StatusCode::OK || !ranked || score < before || score > before + applied {
                return Err(format!("guild read of {user} while they wrote (from {before} points): {status} {reply}"));
            }
        }
        Ok(())
    }
}
