//! Fault: Redis restarted under requests. Standalone, the world runs a Redis of its own with an
//! append-only file written before every reply (`appendfsync always`); the fault kills it
//! (SIGKILL: no shutdown) while concurrent writes are in flight and starts it again on the same
//! file. Each write is answered, or fails and is sent again by its client, byte for byte, until
//! answered: each must be applied exactly once, and nothing acknowledged lost. On the cluster
//! (the suite's) the same writes run without the fault.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::world::{Sent, World};
use crate::servers::RedisServer;

/// The world's own Redis.
pub(super) async fn server() -> RedisServer {
    RedisServer::start(&["--appendonly", "yes", "--appendfsync", "always"]).await
}

/// How many times a client sends a write that failed with Redis down before giving up.
const SENDS: usize = 200;

impl World {
    pub(super) async fn restart(&mut self, first_id: u32, users: &[u8], yields: u8) -> Result<(), String> {
        let sents = Self::comments(first_id, users);
        let bodies: Vec<Value> = sents.iter().map(Self::body).collect();
        let writes = futures::future::join_all(bodies.iter().map(|body| self.app.event(body.clone())));
        let replies = match self.server.as_mut() {
            Some(server) => {
                self.stats.faults += 1;
                let kill = async {
                    for _ in 0..yields {
                        tokio::task::yield_now().await;
                    }
                    server.kill();
                };
                let (replies, ()) = tokio::join!(writes, kill);
                server.restart().await;
                self.reconnected().await;
                replies
            }
            None => writes.await,
        };
        // Comments commute: every order of them leaves the same boards.
        for ((mut sent, body), (mut status, mut reply)) in sents.into_iter().zip(bodies).zip(replies) {
            sent.body = body;
            // The client's retries: the same request until Redis answers it.
            for _ in 0..SENDS {
                if !matches!(status, StatusCode::SERVICE_UNAVAILABLE | StatusCode::INTERNAL_SERVER_ERROR)
                    || super::world::restoring(status, &reply)
                {
                    break;
                }
                tokio::task::yield_now().await;
                (status, reply) = self.app.event(sent.body.clone()).await;
            }
            let (next, expect) = self.expect_event(&sent, &sent.body.to_string(), self.now());
            // A write applied before the kill and sent again is the duplicate of that answer.
            let (_, got) = super::world::event_answer(status, &reply);
            let same = match (&expect, &got) {
                (super::model::Expect::Took { delta, reason }, super::model::Expect::Duplicate { delta: d, reason: r }) => {
                    delta == d && reason == r
                }
                _ => false,
            };
            if same || self.agree("a write across a restart", &expect, status, &reply, self.forum_lost)? {
                self.model = next;
            }
            self.sent.push(sent);
        }
        Ok(())
    }
}

impl World {
    /// Waits until the functions' store reaches the restarted Redis.
    async fn reconnected(&self) {
        let store = self.app.store.clone();
        crate::servers::eventually("the functions' store reaches Redis again", std::time::Duration::from_secs(30), || {
            let store = store.clone();
            async move {
                let mut conn = store.connection().await.ok()?;
                redis::cmd("PING").query_async::<String>(&mut conn).await.ok()
            }
        })
        .await;
    }

    /// The forum's slot as an older copy of its node's files holds it: each key's dump and
    /// absolute expiry (ms; -1 none).
    async fn slot_copy(&self) -> Vec<(String, Vec<u8>, i64)> {
        let mut conn = self.app.redis.clone();
        let mut copy = Vec::new();
        for key in self.app.written_keys().await.into_iter().filter(|key| key.contains("{forum}")) {
            let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(&key).query_async(&mut conn).await.expect("a key's dump");
            let expiry: i64 = redis::cmd("PEXPIRETIME").arg(&key).query_async(&mut conn).await.expect("a key's expiry");
            // -2: it expired between the two reads.
            if let (Some(dump), false) = (dump, expiry == -2) {
                copy.push((key, dump, expiry));
            }
        }
        copy
    }

    /// The forum's slot started again on `copy` (a node restarted from an older RDB, its slots
    /// only): every key written since gone, every key of the copy as it was then (a key whose
    /// expiry passed since is not loaded, as Redis drops it on loading).
    async fn slot_roll_back(&self, copy: &[(String, Vec<u8>, i64)]) {
        let mut conn = self.app.redis.clone();
        for key in self.app.written_keys().await.into_iter().filter(|key| key.contains("{forum}")) {
            let () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.expect("a key deleted");
        }
        for (key, dump, expiry) in copy {
            let mut restore = redis::cmd("RESTORE");
            restore.arg(key).arg((*expiry).max(0)).arg(dump).arg("REPLACE");
            if *expiry >= 0 {
                restore.arg("ABSTTL");
            }
            let () = restore.query_async(&mut conn).await.expect("a key loaded from the copy");
        }
    }

    /// Fault: Redis started again on an older copy of its files (a snapshot restored,
    /// docs/journal.md#rollbacks): a drain (nothing left to send), the copy, comments of `users`
    /// (acknowledged: the model takes them), a drain that stores them in S3, then the server
    /// killed and started on the copy. Before the drain's next run fences the forum (its journal
    /// holds the comments, Redis does not), the older store takes writes: a retry of the first
    /// comment (the snapshot has no marker of it) and a new comment of each user. Their replies
    /// are the snapshot's; the model takes those it applied as the restore decides them again
    /// (the retry a duplicate, each new one applied once, or refused as the model says); those
    /// it refused are not in the journal. Its reads and writes may answer 503
    /// `board_restoring` until a restore brings the comments back. Standalone: the whole server;
    /// on the cluster, the forum's slot alone. With `moved` (standalone), the guild is moved between the copy
    /// and the drain, and a user posts to it after the switch: the copy records the layout it
    /// moved from, fenced until the restore brings it back in the layout S3 says it switched to
    /// (docs/scaling.md#changing-shards); a post to it on the older store before the fence, in
    /// the layout it moved from, is decided again there by the restore (the model takes it).
    /// On the cluster (no server of the world's own) the node holding the forum's slot is the
    /// one started on an older copy, its slot alone (`slot_copy`): the other boards stay as they
    /// are, and the guild is not moved.
    pub(super) async fn rollback(&mut self, first_id: u32, users: &[u8], moved: Option<u8>) -> Result<(), String> {
        let whole = self.server.is_some();
        let moved = moved.filter(|_| whole);
        self.drain().await?;
        // A forum lost when the copy is taken comes back lost: the copy refuses its writes.
        let lost_in_copy = self.forum_lost;
        // So do the others and the catalog (a restore part-way when the copy was taken: its
        // fences come back with the copy).
        let others_in_copy = (self.others_lost, self.all_lost);
        let slot = match self.server.as_ref() {
            Some(server) => {
                server.snapshot();
                None
            }
            None => Some(self.slot_copy().await),
        };
        self.stats.faults += 1;
        self.burst(first_id, users).await?;
        if let Some(shards) = moved {
            self.reshard(shards, false, None, (false, false, false, false)).await?;
            // Its id after the comments' (`p` ids are the races').
            self.race(first_id + users.len() as u32, users.first().copied().unwrap_or(0), 1, 0).await?;
        }
        self.drain().await?;
        if let Some(server) = self.server.as_mut() {
            server.roll_back().await;
        }
        if let Some(copy) = &slot {
            self.slot_roll_back(copy).await;
        }
        if whole {
            // The guild moved (or posted to) since the copy: the copy's guild is older than its journal.
            self.others_lost |= moved.is_some() || others_in_copy.0;
            self.all_lost |= others_in_copy.1;
        }
        self.reconnected().await;
        let retried = Self::comments(first_id, &users[..users.len().min(1)]);
        let fresh = Self::comments(first_id, users).into_iter().map(|sent| Sent { id: format!("w{}", sent.id), ..sent });
        for mut sent in retried.into_iter().chain(fresh) {
            sent.body = Self::body(&sent);
            let (status, reply) = self.app.event(sent.body.clone()).await;
            if lost_in_copy && super::world::restoring(status, &reply) {
                continue;
            }
            // Refused by the copy (a user banned then): not applied, nothing journaled.
            if status.is_client_error() {
                continue;
            }
            if status != StatusCode::OK {
                return Err(format!("a write on the older store before its fence: {status} {reply}"));
            }
            let (next, _) = self.expect_event(&sent, &sent.body.to_string(), self.now());
            self.model = next;
            self.sent.push(sent);
        }
        // A post to the moved guild on the older store, in the layout it moved from: decided
        // again where the guild switched to once the restore has brought it back there.
        if let (Some(_), Some(user)) = (moved, users.first()) {
            let user = format!("u{user}");
            let body = json!({"event_id": format!("pw{first_id}"), "user_id": user, "action": "post"});
            let (status, reply) = self.app.event(body.clone()).await;
            if status == StatusCode::OK {
                let _ = self.model.post(&format!("pw{first_id}"), &body.to_string(), &user, self.now());
            } else if !status.is_client_error() && !super::world::restoring(status, &reply) {
                return Err(format!("a guild post on the older store before its fence: {status} {reply}"));
            }
        }
        self.forum_lost = true;
        self.drain().await
    }
}
