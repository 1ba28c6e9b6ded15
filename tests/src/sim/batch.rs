//! `POST /v1/events:batch` in the simulation: each item answered as the event alone would be.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::ops::BatchItem;
use super::world::{Sent, World, restoring};

impl World {
    pub(super) async fn batch(&mut self, first_id: u32, items: &[BatchItem]) -> Result<(), String> {
        let mut sents: Vec<Sent> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let sent = match sents.last() {
                Some(last) if item.repeat => {
                    Sent { body: last.body.clone(), id: last.id.clone(), user: last.user.clone(), target: last.target.clone(), ..*last }
                }
                _ => {
                    let mut sent = Sent {
                        id: format!("e{}", first_id + i as u32),
                        body: Value::Null,
                        user: format!("u{}", item.user),
                        like: item.like,
                        target: format!("t{}", item.target),
                        give: item.give || !item.like,
                    };
                    sent.body = Self::body(&sent);
                    sent
                }
            };
            sents.push(sent);
        }
        let bodies: Vec<Value> = sents.iter().map(|sent| sent.body.clone()).collect();
        let (status, reply) = self.app.post("/v1/events:batch", &json!({"events": bodies})).await;
        if self.forum_lost && restoring(status, &reply) {
            return Ok(());
        }
        if status != StatusCode::OK {
            return Err(format!("batch: {status} {reply}"));
        }
        let answers = reply["results"].as_array().cloned().unwrap_or_default();
        if answers.len() != sents.len() {
            return Err(format!("batch of {}: {} results: {reply}", sents.len(), answers.len()));
        }
        for (sent, answer) in sents.into_iter().zip(answers) {
            // An item of its own error carries the status a single event would have had.
            let item_status = answer["status"].as_u64().and_then(|s| StatusCode::from_u16(s as u16).ok()).unwrap_or(StatusCode::OK);
            let (next, expect) = self.expect_event(&sent, &sent.body.to_string(), self.now());
            if self.agree("batch item", &expect, item_status, &answer, self.forum_lost)? {
                self.model = next;
            }
            self.sent.push(sent);
        }
        Ok(())
    }
}
