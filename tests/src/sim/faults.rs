//! The simulation's faults that reach into Redis: keys deleted as a loss would, and a value
//! that makes a write script fail part-way. Key names come from the implementation's key
//! module: faults are the world's, never the model's.

use standings::domain::period::{Period, PeriodKind};

use axum::http::StatusCode;
use serde_json::Value;

use super::model::Expect;
use super::world::{Sent, World};
use crate::TestApp;

/// Deletes `keys` one at a time (a cluster's keys live on several nodes).
pub async fn delete(app: &TestApp, keys: &[String]) {
    let mut conn = app.redis.clone();
    for key in keys {
        let _: () = redis::cmd("DEL").arg(key).query_async(&mut conn).await.expect("DEL");
    }
}

/// The field `break_statement` broke and what it held.
pub struct Broken {
    key: String,
    held: Option<String>,
}

const FIELD: &str = "p:comment";

/// Makes the points field of `user`'s statement of today's forum day hold no number: a comment
/// then fails at the statement's `HINCRBY`, after the checks.
pub async fn break_statement(app: &TestApp, user: &str) -> Broken {
    let day = Period::containing(PeriodKind::Day, app.now(), chrono_tz::UTC);
    let key = app.keys.board("forum").statement(user, &day);
    let mut conn = app.redis.clone();
    let held: Option<String> = redis::cmd("HGET").arg(&key).arg(FIELD).query_async(&mut conn).await.expect("HGET");
    let _: () = redis::cmd("HSET").arg(&key).arg(FIELD).arg("not a number").query_async(&mut conn).await.expect("HSET");
    Broken { key, held }
}

/// Puts back what `break_statement` replaced.
pub async fn repair_statement(app: &TestApp, broken: Broken) {
    let mut conn = app.redis.clone();
    let _: () = match broken.held {
        Some(held) => redis::cmd("HSET").arg(&broken.key).arg(FIELD).arg(held).query_async(&mut conn).await,
        None => redis::cmd("HDEL").arg(&broken.key).arg(FIELD).query_async(&mut conn).await,
    }
    .expect("the statement is repaired");
}

impl World {
    pub(super) async fn lose(&mut self, pick: u64, guard: bool) {
        let keys = self.app.written_keys().await;
        let board = self.app.keys.board("forum");
        let (guard_key, journal) = (board.guard(), board.journal());
        let mut rng = fastrand::Rng::with_seed(pick);
        // With the guard kept, only period sets: a loss of markers, ledgers or statements alone is
        // not detected yet (docs/journal.md#losses); with the guard, any subset.
        let mut lost: Vec<String> = keys
            .into_iter()
            .filter(|k| k.contains("{forum}") && *k != journal && *k != guard_key && (guard || k.contains(":z:")) && rng.bool())
            .collect();
        if guard && !lost.contains(&guard_key) {
            lost.push(guard_key);
        }
        delete(&self.app, &lost).await;
        self.forum_lost |= !lost.is_empty();
    }

    pub(super) async fn corrupt(&mut self, id: u32, user: u8) -> Result<(), String> {
        let user = format!("u{user}");
        let restore = break_statement(&self.app, &user).await;
        let sent = Sent { id: format!("e{id}"), body: Value::Null, user: user.clone(), like: false, target: "t0".into(), give: true };
        let body = Self::body(&sent);
        let (next, expect) = self.expect_event(&sent, &body.to_string(), self.now());
        let (status, reply) = self.app.event(body.clone()).await;
        if matches!(expect, Expect::Took { .. }) && status != StatusCode::INTERNAL_SERVER_ERROR {
            return Err(format!("a write whose statement field holds no number: expected 500, got {status} {reply}"));
        }
        repair_statement(&self.app, restore).await;
        self.check_reads().await?;
        let sent = Sent { body, ..sent };
        let (status, reply) = self.app.event(sent.body.clone()).await;
        if self.agree("the retry of a write that failed part-way", &expect, status, &reply, false)? {
            self.model = next;
        }
        self.sent.push(sent);
        Ok(())
    }
}
