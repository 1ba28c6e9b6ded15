//! Admin writes in the simulation: bans and unbans of a user on every board (restored first
//! where a fault left a board lost, as the 503 asks), and corrections of the forum.

use axum::http::{Method, StatusCode};
use serde_json::json;

use super::model::Expect;
use super::world::{World, event_answer, restoring};
use crate::ADMIN;

impl World {
    pub(super) async fn moderate(&mut self, method: Method, user: u8) -> Result<(), String> {
        let path = format!("/v1/admin/users/u{user}/ban");
        let (mut status, mut reply) = self.app.call(method.clone(), &path, "", ADMIN).await;
        if (self.forum_lost || self.others_lost) && restoring(status, &reply) {
            // Refused by a lost catalog, or applied board by board (the boards not lost took
            // it): the operator restores, as the 503 asks, and sends it again.
            self.restore(false).await?;
            (status, reply) = self.app.call(method.clone(), &path, "", ADMIN).await;
        }
        if status != StatusCode::OK {
            return Err(format!("{method} ban: {status} {reply}"));
        }
        self.last_audit = Some((if method == Method::POST { "ban" } else { "unban" }, format!("u{user}"), self.now()));
        if method == Method::POST {
            let before = self.model.clone();
            self.model.ban(&format!("u{user}"), self.now());
            self.expect_moves(&before, &format!("u{user}"), true);
        } else {
            self.model.unban(&format!("u{user}"));
        }
        Ok(())
    }

    pub(super) async fn correct(&mut self, id: u32, user: u8, delta: i64) -> Result<(), String> {
        let mut next = self.model.clone();
        let expect = next.correct(&format!("c{id}"), &format!("u{user}"), delta, self.now());
        let request = json!({"correction_id": format!("c{id}"), "delta": delta, "reason": "simulation"});
        let path = format!("/v1/admin/boards/forum/users/u{user}/corrections");
        let (status, reply) = self.app.call(Method::POST, &path, request.to_string(), ADMIN).await;
        if self.forum_lost && restoring(status, &reply) {
            return Ok(());
        }
        let got = if status == StatusCode::OK {
            if reply["duplicate"].as_bool() == Some(true) {
                Expect::Duplicate { delta, reason: None }
            } else {
                Expect::Took { delta, reason: None }
            }
        } else {
            event_answer(status, &reply).1
        };
        if got != expect {
            return Err(format!("correction: expected {expect:?}, got {status} {reply}"));
        }
        if matches!(expect, Expect::Took { .. }) {
            self.last_audit = Some(("correction", format!("u{user}"), self.now()));
        }
        self.model = next;
        Ok(())
    }
}
