//! The simulation's faults that reach into Redis: keys deleted as a loss would, and a value
//! that makes a write script fail part-way. Key names come from the implementation's key
//! module: faults are the world's, never the model's.

use std::sync::Arc;

use standings::domain::period::{Period, PeriodKind};

use axum::http::StatusCode;
use serde_json::Value;

use journal::{Drainer, ObjectError, Objects, Put, S3Objects};

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

/// The journal's objects as a restore or a move reads them, with a drain run each time one
/// lists `board`'s (any of its layouts' journals; none when `drainer` is `None`, nor before key
/// `once` exists when one is named): the drain on its schedule meeting a restore or a move under
/// way, then a listing as slow as `pause`. `drains` counts the drains run.
#[derive(Clone)]
pub struct DrainOnList {
    pub inner: S3Objects,
    pub drainer: Option<Arc<Drainer<S3Objects>>>,
    pub board: &'static str,
    pub pause: std::time::Duration,
    pub once: Option<(standings::redis::store::Connection, String)>,
    pub drains: Arc<std::sync::atomic::AtomicUsize>,
}

impl DrainOnList {
    pub fn new(inner: S3Objects, drainer: Option<Drainer<S3Objects>>, board: &'static str) -> Self {
        let (pause, once, drains) = (std::time::Duration::ZERO, None, Arc::default());
        Self { inner, drainer: drainer.map(Arc::new), board, pause, once, drains }
    }

    /// Whether a listing of `prefix` drains now.
    async fn due(&self, prefix: &str) -> bool {
        let (own, sharded) = (format!("board={}/", self.board), format!("board={}:", self.board));
        // When the board's own objects are listed: an earlier board's list would drain it
        // before its restore began.
        if self.drainer.is_none() || !(prefix.contains(&own) || prefix.contains(&sharded)) {
            return false;
        }
        match &self.once {
            Some((conn, key)) => redis::cmd("EXISTS").arg(key).query_async(&mut conn.clone()).await.unwrap_or(false),
            None => true,
        }
    }
}

impl Objects for DrainOnList {
    async fn put_new(&self, key: &str, body: Vec<u8>) -> Result<Put, ObjectError> {
        self.inner.put_new(key, body).await
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, ObjectError> {
        self.inner.get(key).await
    }

    async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), ObjectError> {
        self.inner.put(key, body).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, ObjectError> {
        let listed = self.inner.list(prefix).await?;
        if let Some(drainer) = &self.drainer
            && self.due(prefix).await
        {
            drainer.drain(chrono::Utc::now() + chrono::Duration::minutes(5)).await;
            self.drains.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tokio::time::sleep(self.pause).await;
        }
        Ok(listed)
    }

    async fn list_sized(&self, prefix: &str) -> Result<Vec<(String, u64)>, ObjectError> {
        let names = self.list(prefix).await?;
        // The sizes as S3 lists them (the drain above may have stored more since).
        let sized = self.inner.list_sized(prefix).await?;
        Ok(names
            .into_iter()
            .map(|name| {
                let bytes = sized.iter().find(|(listed, _)| *listed == name).map_or(0, |(_, bytes)| *bytes);
                (name, bytes)
            })
            .collect())
    }
}

/// The journal's objects on an S3 that fails a share of calls: a third of them, and half of the
/// failed puts after storing the object (its reply lost).
pub struct FailingObjects {
    pub inner: S3Objects,
    pub rng: std::sync::Mutex<fastrand::Rng>,
}

impl FailingObjects {
    fn fails(&self) -> (bool, bool) {
        let mut rng = self.rng.lock().unwrap();
        (rng.u8(..3) == 0, rng.bool())
    }
}

const S3_DOWN: &str = "InternalError: the simulated S3 failed the call";

impl Objects for FailingObjects {
    async fn put_new(&self, key: &str, body: Vec<u8>) -> Result<Put, ObjectError> {
        match self.fails() {
            (false, _) => self.inner.put_new(key, body).await,
            (true, stored) => {
                if stored {
                    self.inner.put_new(key, body).await?;
                }
                Err(ObjectError(S3_DOWN.into()))
            }
        }
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, ObjectError> {
        if self.fails().0 { Err(ObjectError(S3_DOWN.into())) } else { self.inner.get(key).await }
    }

    async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), ObjectError> {
        match self.fails() {
            (false, _) => self.inner.put(key, body).await,
            (true, stored) => {
                if stored {
                    self.inner.put(key, body).await?;
                }
                Err(ObjectError(S3_DOWN.into()))
            }
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, ObjectError> {
        if self.fails().0 { Err(ObjectError(S3_DOWN.into())) } else { self.inner.list(prefix).await }
    }

    async fn list_sized(&self, prefix: &str) -> Result<Vec<(String, u64)>, ObjectError> {
        if self.fails().0 { Err(ObjectError(S3_DOWN.into())) } else { self.inner.list_sized(prefix).await }
    }
}

/// A season table's DynamoDB failing a share of calls: a third of them, half of those after
/// the call reached the table (its reply lost).
#[derive(Debug)]
pub struct FailingTable {
    pub rng: std::sync::Mutex<fastrand::Rng>,
}

const DYNAMODB_DOWN: &str = "the simulated DynamoDB failed the call";

impl FailingTable {
    /// A third of the calls fail, before sending or after the reply alike.
    fn fails(&self) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        let mut rng = self.rng.lock().unwrap();
        if rng.u8(..3) == 0 { Err(DYNAMODB_DOWN.into()) } else { Ok(()) }
    }
}

impl aws_sdk_dynamodb::config::Intercept for FailingTable {
    fn name(&self) -> &'static str {
        "FailingTable"
    }

    fn read_before_attempt(
        &self,
        _: &aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef<'_>,
        _: &aws_sdk_dynamodb::config::RuntimeComponents,
        _: &mut aws_sdk_dynamodb::config::ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        self.fails()
    }

    fn read_before_deserialization(
        &self,
        _: &aws_sdk_dynamodb::config::interceptors::BeforeDeserializationInterceptorContextRef<'_>,
        _: &aws_sdk_dynamodb::config::RuntimeComponents,
        _: &mut aws_sdk_dynamodb::config::ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        self.fails()
    }
}

/// `table` reached through a DynamoDB that fails as `FailingTable` says, from `pick`.
pub fn failing_table(table: &standings::archive::table::SeasonTable, pick: u64) -> standings::archive::table::SeasonTable {
    let failing = FailingTable { rng: std::sync::Mutex::new(fastrand::Rng::with_seed(pick)) };
    let config = table.client().config().to_builder().interceptor(failing).build();
    standings::archive::table::SeasonTable::new(aws_sdk_dynamodb::Client::from_conf(config), table.name())
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
    /// Every key of the deployment deleted (a `FLUSHALL` of its prefix): the runtime boards'
    /// catalog's guard too.
    pub(super) async fn flush(&mut self) {
        let mut keys = self.app.written_keys().await;
        keys.push(self.app.keys.catalog().guard());
        delete(&self.app, &keys).await;
        self.lost_everywhere(true);
    }

    pub(super) async fn lose(&mut self, pick: u64, guard: bool, markers: bool) {
        let keys = self.app.written_keys().await;
        let board = self.app.keys.board("forum");
        let (guard_key, journal) = (board.guard(), board.journal());
        let mut rng = fastrand::Rng::with_seed(pick);
        // With the guard kept, only period sets (and marker buckets, below): a loss of ledgers or
        // statements alone is not detected yet (docs/journal.md#losses); with the guard, any subset.
        let mut lost: Vec<String> = keys
            .into_iter()
            .filter(|k| k.contains("{forum}") && *k != journal && *k != guard_key && (guard || k.contains(":z:")) && rng.bool())
            .collect();
        if guard && !lost.contains(&guard_key) {
            lost.push(guard_key);
        }
        delete(&self.app, &lost).await;
        self.forum_lost |= !lost.is_empty();
        // The score board's period sets too, its guard kept.
        let arcade: Vec<String> =
            self.app.written_keys().await.into_iter().filter(|k| k.contains("{arcade}:z:") && rng.u8(..4) == 0).collect();
        delete(&self.app, &arcade).await;
        self.others_lost |= !arcade.is_empty();
        // The sharded guild's period sets, some shards' each, their guards kept: every read of
        // the period refuses, not the other shards' members as the whole board (drawn apart, so
        // the draws below, and the histories recorded before, stay as they were).
        let mut apart = fastrand::Rng::with_seed(pick.wrapping_add(2));
        let guild: Vec<String> = self
            .app
            .written_keys()
            .await
            .into_iter()
            .filter(|k| k.contains("{guild") && k.contains("}:z:") && apart.u8(..4) == 0)
            .collect();
        delete(&self.app, &guild).await;
        self.others_lost |= !guild.is_empty();
        // Marker buckets of both boards, their guards kept (drawn apart: the histories shrunk
        // before this fault lose what they lost).
        if markers {
            let mut rng = fastrand::Rng::with_seed(pick.wrapping_add(1));
            let buckets: Vec<String> = self
                .app
                .written_keys()
                .await
                .into_iter()
                .filter(|k| (k.contains("{forum}:evt:") || k.contains("{arcade}:evt:")) && rng.bool())
                .collect();
            self.forum_lost |= buckets.iter().any(|k| k.contains("{forum}"));
            self.others_lost |= buckets.iter().any(|k| k.contains("{arcade}"));
            delete(&self.app, &buckets).await;
        }
        // Or the arcade's scale record alone (held since a deploy on another `max_score` made
        // its first write): its guard's copy says the scale, nothing is fenced.
        if rng.u8(..4) == 0 {
            delete(&self.app, &[self.app.keys.board_scale("arcade")]).await;
        }
        // Or the guild's layout record alone: the guild is then found where its data is, or
        // refused (503 `board_restoring`) until a restore, never written into another layout.
        if rng.u8(..4) == 0 {
            let layout = self.app.keys.board_layout("guild");
            let held: bool = redis::cmd("EXISTS").arg(&layout).query_async(&mut self.app.redis.clone()).await.expect("EXISTS");
            delete(&self.app, &[layout]).await;
            self.others_lost |= held;
        }
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

    /// A ban whose first script reply is lost with its connection: answered 200 (the call
    /// was sent again) or an error, then sent again by the operator. Each board's audit log
    /// holds one entry for it; two only where the operator sent it twice; none where the same
    /// ban was the newest entry, in the same second.
    pub(super) async fn dropped_ban(&mut self, user: u8) -> Result<(), String> {
        if self.forum_lost || self.others_lost {
            return Ok(());
        }
        let (path, user) = (format!("/v1/admin/users/u{user}/ban"), format!("u{user}"));
        let before = self.audit_entries(&user).await?;
        if let Some(proxy) = &self.proxy {
            // The forum's ban script's (the route records the ban for the deployment first).
            proxy.drop_next_reply_to(self.app.keys.board("forum").guard().as_bytes());
        }
        let (status, reply) = self.app.call(axum::http::Method::POST, &path, "", crate::ADMIN).await;
        let sends = if status == StatusCode::OK {
            1
        } else {
            let (status, reply) = self.app.call(axum::http::Method::POST, &path, "", crate::ADMIN).await;
            if status != StatusCode::OK {
                return Err(format!("a ban sent again after a lost reply: {status} {reply}"));
            }
            2
        };
        let was = self.model.clone();
        self.model.ban(&user, self.now());
        self.expect_moves(&was, &user, true);
        let added = self.audit_entries(&user).await? - before;
        let same = self.last_audit == Some(("ban", user.clone(), self.now()));
        self.last_audit = Some(("ban", user.clone(), self.now()));
        if !(usize::from(!same)..=sends).contains(&added) {
            return Err(format!("a ban sent {sends} time(s) (first answer {status} {reply}) left {added} audit entries"));
        }
        // As many as it left: the operator's second send may be a ban of its own.
        for _ in 0..added {
            self.forum_audit.push(("ban", user.clone(), self.now()));
        }
        Ok(())
    }

    /// The forum's audit entries of bans of `user`.
    async fn audit_entries(&self, user: &str) -> Result<usize, String> {
        let (status, audit) = self.app.call(axum::http::Method::GET, "/v1/admin/audit?board=forum&limit=100", "", crate::ADMIN).await;
        if status != StatusCode::OK {
            return Err(format!("audit: {status} {audit}"));
        }
        let entries = audit["entries"].as_array().cloned().unwrap_or_default();
        Ok(entries.iter().filter(|e| e["kind"] == "ban" && e["user_id"] == user).count())
    }
}
