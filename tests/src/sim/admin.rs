//! Admin writes in the simulation: bans and unbans of a user on every board (restored first
//! where a fault left a board lost, as the 503 asks), and corrections of the forum, their
//! first reply lost or not.

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
        let kind = if method == Method::POST { "ban" } else { "unban" };
        self.last_audit = Some((kind, format!("u{user}"), self.now()));
        self.audited(kind, format!("u{user}"));
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
        self.correct_once(id, user, delta, false).await
    }

    /// Fault: a correction whose first script call reaches Redis while its reply is lost with
    /// the connection (standalone: a proxy in front of Redis; the cluster pass sends it
    /// plainly). Answered, or an error and sent again by the operator under its id: applied
    /// once, whichever answer said so (a resend finds its own first call: `duplicate`), and one
    /// audit entry under its id.
    pub(super) async fn dropped_correct(&mut self, id: u32, user: u8, delta: i64) -> Result<(), String> {
        self.correct_once(id, user, delta, true).await
    }

    async fn correct_once(&mut self, id: u32, user: u8, delta: i64, dropped: bool) -> Result<(), String> {
        let mut next = self.model.clone();
        let expect = next.correct(&format!("c{id}"), &format!("u{user}"), delta, self.now());
        let request = json!({"correction_id": format!("c{id}"), "delta": delta, "reason": "simulation"});
        let path = format!("/v1/admin/boards/forum/users/u{user}/corrections");
        let dropped = dropped && !self.forum_lost && self.proxy.is_some();
        // The correction's own marker names the script call alone (the guard is in other
        // requests too: the layout's probe).
        let swallowed = self.proxy.as_ref().map_or(0, |proxy| proxy.dropped());
        if let (true, Some(proxy)) = (dropped, &self.proxy) {
            self.stats.faults += 1;
            proxy.drop_next_reply_to(self.app.keys.board("forum").correction(&format!("c{id}")).as_bytes());
        }
        let (mut status, mut reply) = self.app.call(Method::POST, &path, request.to_string(), ADMIN).await;
        if let Some(proxy) = &self.proxy {
            proxy.disarm();
            // A correction refused before its script (a lost board) sends none to drop.
            if dropped && proxy.dropped() == swallowed && !restoring(status, &reply) {
                return Err(format!("a correction whose reply was to be lost was answered {status} {reply} with none lost"));
            }
        }
        if dropped && status.is_server_error() {
            (status, reply) = self.app.call(Method::POST, &path, request.to_string(), ADMIN).await;
        }
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
        let resent = dropped && matches!((&expect, &got), (Expect::Took { .. }, Expect::Duplicate { .. }));
        if got != expect && !resent {
            return Err(format!("correction: expected {expect:?}, got {status} {reply}"));
        }
        if matches!(expect, Expect::Took { .. }) {
            self.last_audit = Some(("correction", format!("u{user}"), self.now()));
            self.audited("correction", format!("u{user}"));
            if dropped {
                let entries = self.correction_entries(&format!("c{id}")).await?;
                if entries != 1 {
                    return Err(format!("a correction whose reply was lost left {entries} audit entries (answer {status} {reply})"));
                }
            }
        }
        self.model = next;
        Ok(())
    }

    /// The forum took an admin action (its audit entry): a ban or unban the same as the newest
    /// entry, in the same second, is that entry (`ban.lua` writes nothing more).
    pub(super) fn audited(&mut self, kind: &'static str, user: String) {
        let entry = (kind, user, self.now());
        if matches!(kind, "ban" | "unban") && self.forum_audit.last() == Some(&entry) {
            return;
        }
        self.forum_audit.push(entry);
    }

    /// The forum's audit log (docs/moderation.md): every action it took, newest first, whatever
    /// restores, rollbacks and losses came between; while the forum is lost, `board_restoring`
    /// (its guard lost or fenced) or the whole log (the faults that keep the guard take period
    /// sets and markers, never the log).
    pub(super) async fn check_audit(&mut self) -> Result<(), String> {
        self.stats.reads += 1;
        let (status, audit) = self.app.call(Method::GET, "/v1/admin/audit?board=forum&limit=1000", "", ADMIN).await;
        let entries = audit["entries"].as_array().cloned().unwrap_or_default();
        let got: Vec<(&str, &str)> =
            entries.iter().map(|e| (e["kind"].as_str().unwrap_or("?"), e["user_id"].as_str().unwrap_or("?"))).collect();
        let expected: Vec<(&str, &str)> = self.forum_audit.iter().rev().map(|(kind, user, _)| (*kind, user.as_str())).collect();
        if self.forum_lost && restoring(status, &audit) {
            return Ok(());
        }
        if status != StatusCode::OK || got != expected {
            return Err(format!("the forum's audit log: expected {expected:?}, got {status} {got:?}"));
        }
        Ok(())
    }

    /// The forum's audit entries of correction `id`.
    async fn correction_entries(&self, id: &str) -> Result<usize, String> {
        let (status, audit) = self.app.call(Method::GET, "/v1/admin/audit?board=forum&limit=100", "", ADMIN).await;
        if status != StatusCode::OK {
            return Err(format!("audit: {status} {audit}"));
        }
        let entries = audit["entries"].as_array().cloned().unwrap_or_default();
        Ok(entries.iter().filter(|e| e["kind"] == "correction" && e["correction_id"] == id).count())
    }
}
