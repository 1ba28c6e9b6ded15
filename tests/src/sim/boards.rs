//! Runtime boards in the simulation (docs/runtime-boards.md): score boards created, written to
//! and deleted through the `ingest` routes, their end done by the archive's run, and after every
//! step each one's top read through a `query` function reading the catalog on every request,
//! against the model (`model::boards`).

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::model::Expect;
use super::model::boards::Submission;
use super::world::{World, event_answer, restoring};
use crate::runtime::call_on;
use crate::{ADMIN, Caller, WRITER};

use super::ops::BOARDS;

fn definition(latest: bool) -> Value {
    json!({"kind": "scores", "keep": if latest { "latest" } else { "best" }, "order": "desc", "timezone": "UTC",
        "periods": ["all"], "top": 100})
}

impl World {
    /// A refusal a lost deployment may give: 503 `board_restoring`, or (a function that read
    /// the lost catalog knows only the declared boards) 404 `unknown_board`.
    fn board_lost(&self, status: StatusCode, reply: &Value) -> bool {
        self.all_lost && (restoring(status, reply) || reply["error"]["code"] == "unknown_board")
    }

    pub(super) async fn put_board(&mut self, board: u8, latest: bool) -> Result<(), String> {
        let name = format!("rb{board}");
        let body = definition(latest);
        let (status, reply) = self.app.call(Method::PUT, &format!("/v1/admin/boards/{name}"), body.to_string(), ADMIN).await;
        if self.all_lost && restoring(status, &reply) {
            return Ok(());
        }
        let expected = self.model.boards.put(&name, &body.to_string(), latest);
        let code_ok = expected != 409 || reply["error"]["code"] == "board_exists";
        if status.as_u16() != expected || !code_ok {
            return Err(format!("PUT board {name}: expected {expected}, got {status} {reply}"));
        }
        Ok(())
    }

    pub(super) async fn submit(&mut self, id: u32, board: u8, user: u8, score: u32, again: bool) -> Result<(), String> {
        let (name, user, id) = (format!("rb{board}"), format!("u{user}"), format!("r{id}"));
        let body = json!({"event_id": id, "user_id": user, "score": score});
        for _ in 0..=u8::from(again) {
            let mut next = self.model.clone();
            let banned = next.banned().contains(&user);
            let payload = body.to_string();
            let submission = Submission { id: &id, payload: &payload, user: &user, score: i64::from(score) };
            let expected = next.boards.submit(&name, submission, banned, self.now());
            let path = format!("/v1/boards/{name}/scores");
            let (status, reply) = self.app.call(Method::POST, &path, payload, WRITER).await;
            if self.board_lost(status, &reply) {
                continue;
            }
            let got = match event_answer(status, &reply).1 {
                Expect::Refused { status, code } => Expect::Refused { status, code },
                _ => {
                    let (delta, reason) = (i64::from(reply["applied"] == true), reply["reason"].as_str().map(str::to_owned));
                    if reply["duplicate"] == true { Expect::Duplicate { delta, reason } } else { Expect::Took { delta, reason } }
                }
            };
            if got != expected {
                return Err(format!("score {id} of {user} on {name}: expected {expected:?}, got {status} {reply}"));
            }
            self.model = next;
        }
        Ok(())
    }

    pub(super) async fn delete_board(&mut self, board: u8) -> Result<(), String> {
        let name = format!("rb{board}");
        let path = format!("/v1/admin/boards/{name}?reason=simulated");
        let (status, reply) = self.app.call(Method::DELETE, &path, String::new(), ADMIN).await;
        if self.all_lost && restoring(status, &reply) {
            return Ok(());
        }
        let mut next = self.model.clone();
        let expected = next.boards.delete(&name);
        let got = match status {
            StatusCode::ACCEPTED => reply["state"] == "ending",
            StatusCode::NOT_FOUND => reply["error"]["code"] == "unknown_board",
            _ => false,
        };
        if status.as_u16() != expected || !got {
            return Err(format!("DELETE board {name}: expected {expected}, got {status} {reply}"));
        }
        self.model = next;
        Ok(())
    }

    /// Each runtime board's top as the model says; one never created is unknown.
    pub(super) async fn check_boards(&mut self) -> Result<(), String> {
        let reads = self.reads();
        for board in 0..BOARDS {
            let name = format!("rb{board}");
            self.stats.reads += 1;
            let (status, top) =
                call_on(&reads, Method::GET, &format!("/v1/boards/{name}/top?period=all&limit=100"), &Value::Null, Caller::Anonymous).await;
            if self.board_lost(status, &top) {
                continue;
            }
            // A board whose end is done reads empty: its keys are freed, its name kept.
            let expected = self.model.boards.boards.get(&name).map(|b| if b.retired { Vec::new() } else { b.ranking() });
            let listed: Vec<(String, i64)> = top["entries"]
                .as_array()
                .map(|e| e.iter().map(|e| (e["user_id"].as_str().unwrap_or("?").to_owned(), e["score"].as_i64().unwrap_or(-1))).collect())
                .unwrap_or_default();
            let agrees = match &expected {
                Some(ranking) => status == StatusCode::OK && listed == *ranking,
                None => status == StatusCode::NOT_FOUND && top["error"]["code"] == "unknown_board",
            };
            if !agrees {
                return Err(format!("runtime board {name} top: expected {expected:?}, got {status} {top}"));
            }
        }
        Ok(())
    }
}
