//! The system under simulation: the real `ingest`, `query`, `queue` and `journal` code over the
//! suite's Redis (standalone or cluster), a journal bucket on moto_server's S3 and a dead-letter
//! queue on its SQS, on an injected clock. Each operation runs here, its answers are compared
//! with the model's, and every read is checked after every step.

use axum::http::{Method, StatusCode};
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use standings::domain::config::Config;

use super::model::{Expect, Fix, GRACE_SECS, Model};
use super::ops::{Op, QueueMessage};
use crate::journal::{new_bucket, s3};
use crate::proxy::DroppingProxy;
use crate::queue::{new_queue, record, sqs, sqs_event};
use crate::{TestApp, at};
use standings::redis::keys::Keys;
use standings::redis::settings::RedisSettings;
use standings::redis::store::Store;

/// Where every history starts: 30 minutes before a UTC midnight, a fixed instant (no test
/// depends on today's date).
pub const START: &str = "2026-11-22T23:30:00Z";

/// The simulated deployment, its guild spread over `guild_shards` slots.
pub(super) fn config(guild_shards: u32) -> Config {
    config_with(guild_shards, "")
}

/// `config` with `arcade` lines added to the arcade (a changed `max_score`).
pub(super) fn config_with(guild_shards: u32, arcade: &str) -> Config {
    Config::parse(&format!(
        r#"
        [[boards]]
        name = "forum"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["day", "season", "all"]
        top = 10
        statements = true
        archive = true
        sign_in = {{ points = 1 }}
        rules = [
          {{ action = "comment", points = 3, scope = "none" }},
          {{ action = "like", points = 2, scope = "user_target_day", reversible = true, daily_cap = 6 }},
        ]

        [[boards]]
        name = "guild"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["season", "all"]
        top = 10
        statements = true
        archive = true
        shards = {guild_shards}
        rules = [{{ action = "post", points = 1, scope = "none" }}]

        [[boards]]
        name = "arcade"
        kind = "scores"
        keep = "best"
        order = "desc"
        timezone = "UTC"
        periods = ["day"]
        top = 10
        notify = {{ top = {top} }}
        league = {{ period = "day", cohort_size = 3, tiers = ["low", "mid", "high"], promote = 1, demote = 1 }}
        {arcade}
        "#,
        top = super::notify::TOP
    ))
    .expect("the simulation's configuration is valid")
}

/// What a run did: the numbers docs/testing.md reports.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub steps: u64,
    pub faults: u64,
    pub reads: u64,
}

pub(super) struct Sent {
    pub(super) id: String,
    pub(super) body: Value,
    pub(super) user: String,
    pub(super) like: bool,
    pub(super) target: String,
    pub(super) give: bool,
}

pub struct World {
    pub(super) app: TestApp,
    /// Standalone: the world's own Redis (none on the cluster, the suite's).
    pub(super) server: Option<crate::servers::RedisServer>,
    /// How the world's own checks reach Redis (not through the proxy).
    pub(super) redis: RedisSettings,
    pub(super) proxy: Option<DroppingProxy>,
    pub(super) s3: aws_sdk_s3::Client,
    pub(super) table: standings::archive::table::SeasonTable,
    pub(super) bucket: String,
    pub(super) queue: queue::App,
    pub(super) sqs: aws_sdk_sqs::Client,
    pub(super) dlq: String,
    /// The slots the guild is spread over now (a reshard changes them).
    pub(super) guild_shards: u32,
    /// The bases of the layout a move of the guild takes it to, while it moves: keys no read
    /// answers from until the switch, which the move's last step makes what the old layout
    /// holds (a closed season's set, brought back by its moved lines, removed).
    pub(super) guild_moving_to: Vec<String>,
    pub(super) model: Model,
    pub(super) sent: Vec<Sent>,
    /// A fault took some of the forum's keys (or a restore was stopped part-way) and no restore
    /// has completed since: the board may refuse with 503 `board_restoring`.
    pub(super) forum_lost: bool,
    /// The same for the arcade and the guild, which only whole-deployment faults reach.
    pub(super) others_lost: bool,
    /// A fault may have reached every board (a loss of every key, a restore stopped part-way):
    /// the tournaments' boards and the runtime boards' catalog too.
    pub(super) all_lost: bool,
    /// The forum's newest audit entry: its kind, user and second. A ban sent again in the
    /// second of the same ban (nothing between) is the same ban, recorded once.
    pub(super) last_audit: Option<(&'static str, String, i64)>,
    /// The forum's audit log as the docs say it grows (docs/moderation.md), oldest first: each
    /// admin action it took, its kind, user and second (`World::audited`).
    pub(super) forum_audit: Vec<(&'static str, String, i64)>,
    pub(super) notified: super::notify::Notified,
    pub stats: Stats,
}

pub(super) fn far() -> DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

/// A 200's per-board answer as the model states it, or a refusal's status and code.
pub(super) fn event_answer(status: StatusCode, body: &Value) -> (bool, Expect) {
    if status != StatusCode::OK {
        let code = body["error"]["code"].as_str().unwrap_or_default().to_owned();
        return (false, Expect::Refused { status: status.as_u16(), code });
    }
    let result = &body["results"][0];
    let (delta, reason) = (result["delta"].as_i64().unwrap_or(i64::MIN), result["reason"].as_str().map(str::to_owned));
    let duplicate = body["duplicate"].as_bool() == Some(true);
    (duplicate, if duplicate { Expect::Duplicate { delta, reason } } else { Expect::Took { delta, reason } })
}

pub(super) fn restoring(status: StatusCode, body: &Value) -> bool {
    status == StatusCode::SERVICE_UNAVAILABLE && body["error"]["code"] == "board_restoring"
}

impl World {
    pub async fn new() -> Self {
        let cluster = std::env::var("REDIS_CLUSTER").is_ok_and(|v| v == "true");
        // Standalone, a Redis of the world's own (so it can be killed and restarted: `restart`),
        // reached by the functions through a proxy that can lose a reply.
        let server = if cluster { None } else { Some(super::restart::server().await) };
        let proxy = match &server {
            Some(server) => Some(DroppingProxy::start(server.port).await),
            None => None,
        };
        let table = crate::archive::unique_season_table().await;
        let keys = Keys::new(&crate::unique_prefix()).expect("a valid prefix").with_journal(true).with_notices(true);
        let mut redis = server.as_ref().map_or_else(crate::redis_settings, |server| RedisSettings::standalone(&server.url()));
        // A reply is waited for 10 s, not a deployment's 2: on 2 cores running the whole suite
        // beside it a reply can stall past 2 s (CI129: a batch answered 503 `store_unavailable`,
        // the same seed alone passes), and no fault here needs a timeout to show (the proxy and
        // a restart close connections).
        redis.response_timeout = std::time::Duration::from_secs(10);
        let assertions = Store::connect(&redis).expect("the world's Redis");
        let settings = match &proxy {
            Some(proxy) => RedisSettings { urls: vec![proxy.url()], ..redis.clone() },
            None => redis.clone(),
        };
        let store = Store::connect(&settings).expect("a valid Redis URL");
        let app = crate::spawn_app(config(4), keys, store, assertions, Some(table.clone())).await;
        app.set_now(at(START));
        let s3 = s3().await;
        let bucket = new_bucket(&s3).await;
        let sqs = sqs().await;
        let dlq = new_queue(&sqs, "sim-dlq").await;
        let queue = app.queue(queue::DeadLetters::new(sqs.clone(), dlq.clone()));
        Self {
            app,
            server,
            redis,
            proxy,
            s3,
            table,
            bucket,
            queue,
            sqs,
            dlq,
            guild_shards: 4,
            guild_moving_to: Vec::new(),
            model: Model::default(),
            sent: Vec::new(),
            forum_lost: false,
            others_lost: false,
            all_lost: false,
            last_audit: None,
            forum_audit: Vec::new(),
            notified: super::notify::Notified::new().await,
            stats: Stats::default(),
        }
    }

    /// Every board may refuse until a restore completes (`lost`), or none.
    pub(super) fn lost_everywhere(&mut self, lost: bool) {
        (self.forum_lost, self.others_lost, self.all_lost) = (lost, lost, lost);
    }

    pub(super) fn now(&self) -> i64 {
        self.app.now().timestamp()
    }

    /// Runs one operation and checks what it answered; then checks every read.
    pub async fn step(&mut self, op: &Op) -> Result<(), String> {
        self.stats.steps += 1;
        match op {
            Op::Event { id, user, like, target, give } => {
                let sent = Sent {
                    id: format!("e{id}"),
                    body: Value::Null,
                    user: format!("u{user}"),
                    like: *like,
                    target: format!("t{target}"),
                    give: *give || !like,
                };
                self.send(sent).await?;
            }
            Op::Retry { back } => {
                if let Some(sent) = self.recent(*back) {
                    self.send(sent).await?;
                }
            }
            Op::Conflict { back } => {
                if let Some(mut sent) = self.recent(*back) {
                    sent.target.push('x');
                    sent.body = Value::Null;
                    self.send(sent).await?;
                }
            }
            Op::Burst { first_id, users } => self.burst(*first_id, users).await?,
            Op::Batch { first_id, items } => self.batch(*first_id, items).await?,
            Op::Queue { first_id, messages, again } => {
                self.deliver(*first_id, messages, 1).await?;
                if *again {
                    self.deliver(*first_id, messages, 2).await?;
                }
            }
            Op::Score { id, user, score } => self.score(*id, *user, *score).await?,
            Op::FixScore { id, user, remove, score } => {
                let fix = if *remove { Fix::Remove } else { Fix::Set(i64::from(*score)) };
                self.fix(*id, *user, fix).await?;
            }
            Op::SignIn { id, user, again } => self.sign_in(*id, *user, *again).await?,
            Op::Race { first_id, user, writes, reads } => self.race(*first_id, *user, *writes, *reads).await?,
            Op::Ban { user } => self.moderate(Method::POST, *user).await?,
            Op::Unban { user } => self.moderate(Method::DELETE, *user).await?,
            Op::DroppedBan { user } => {
                self.stats.faults += 1;
                self.dropped_ban(*user).await?;
            }
            Op::Correct { id, user, delta } => self.correct(*id, *user, if *delta == 0 { 1 } else { i64::from(*delta) }).await?,
            Op::DroppedCorrect { id, user, delta } => {
                self.dropped_correct(*id, *user, if *delta == 0 { 1 } else { i64::from(*delta) }).await?
            }
            Op::Void { id, user, back, span, again } => self.void(*id, *user, *back, *span, *again).await?,
            Op::Advance { secs } => self.app.set_now(self.app.now() + Duration::seconds(i64::from(*secs))),
            Op::Drain => self.drain().await?,
            Op::BusFaults { pick } => {
                self.stats.faults += 1;
                self.refusing_drain(*pick).await?;
            }
            Op::CloseLeague { back } => self.close_league(*back).await?,
            Op::S3Faults { pick } => {
                self.stats.faults += 1;
                self.failing_s3(*pick).await?;
            }
            Op::Restore { drain_at_list, in_steps } => self.restore_in(*drain_at_list, *in_steps).await?,
            Op::DroppedRestoreLock => {
                self.stats.faults += 1;
                self.dropped_restore_lock().await?;
            }
            Op::KilledRestore { yields } => {
                self.stats.faults += 1;
                self.killed_restore(*yields).await;
            }
            Op::Lose { pick, guard, markers } => {
                self.stats.faults += 1;
                self.lose(*pick, *guard, *markers).await;
            }
            Op::LoseAll => {
                self.stats.faults += 1;
                self.drain().await?;
                self.flush().await;
            }
            Op::Start => self.function_start().await?,
            Op::StaleNodes => {
                self.stats.faults += 1;
                self.app.store.node_map().pretend_all_on("127.0.0.1:1");
            }
            Op::FlushScripts => {
                self.stats.faults += 1;
                let () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut self.app.redis.clone()).await.expect("SCRIPT FLUSH");
            }
            Op::LoseCatalogLog => {
                self.stats.faults += 1;
                super::faults::delete(&self.app, &[self.app.keys.catalog().catalog_log()]).await;
            }
            Op::Reshard { shards, steps, killed, lost, drained, unrecorded, half_frozen } => {
                self.reshard(*shards, *steps, *killed, (*lost, *drained, *unrecorded, *half_frozen)).await?
            }
            Op::Rescale => self.rescale().await?,
            Op::Archive => self.archive().await?,
            Op::Verify => self.verify().await?,
            Op::ArchiveUnrestored => self.archive_unrestored().await?,
            Op::ArchiveLost => {
                self.stats.faults += 1;
                self.archive_lost().await?;
            }
            Op::Corrupt { id, user } => {
                if !self.forum_lost {
                    self.stats.faults += 1;
                    self.corrupt(*id, *user).await?;
                }
            }
            Op::Cup { cup, join, hours, again, back } => self.put_cup(*cup, *join, *hours, *again, *back).await?,
            Op::Join { cup, user } => self.join_cup(*cup, *user).await?,
            Op::Play { id, cup, user, score, again } => self.play_cup(*id, *cup, *user, *score, *again).await?,
            Op::EndCup { cup, delete } => self.end_cup(*cup, *delete).await?,
            Op::CorrectCup { cup, user, score } => self.correct_cup(*cup, *user, *score).await?,
            Op::EditCup { cup, minutes, title, more } => self.edit_cup(*cup, *minutes, *title, *more).await?,
            Op::GrantCup { cup, user, add, grant, again } => self.grant_cup(*cup, *user, *add, *grant, *again).await?,
            Op::RuntimeBoard { board, latest } => self.put_board(*board, *latest).await?,
            Op::Submit { id, board, user, score, again } => self.submit(*id, *board, *user, *score, *again).await?,
            Op::DeleteBoard { board } => self.delete_board(*board).await?,
            Op::Rollback { first_id, users, moved } => self.rollback(*first_id, users, *moved).await?,
            Op::Restart { first_id, users, yields } => self.restart(*first_id, users, *yields).await?,
            Op::TableFaults { pick } => {
                self.stats.faults += 1;
                self.failing_archive(*pick).await?;
            }
        }
        self.check_reads().await
    }

    fn recent(&self, back: u8) -> Option<Sent> {
        let sent = self.sent.iter().rev().nth(usize::from(back))?;
        Some(Sent { body: sent.body.clone(), id: sent.id.clone(), user: sent.user.clone(), target: sent.target.clone(), ..*sent })
    }

    pub(super) fn body(sent: &Sent) -> Value {
        if !sent.body.is_null() {
            return sent.body.clone();
        }
        let action = if sent.like { "like" } else { "comment" };
        json!({"event_id": sent.id, "user_id": sent.user, "action": action, "target": sent.target, "active": sent.give})
    }

    /// The model's answer to `sent` now, on a copy of the model (kept only once the system
    /// agreed it applied).
    pub(super) fn expect_event(&self, sent: &Sent, payload: &str, at: i64) -> (Model, Expect) {
        let mut next = self.model.clone();
        let action = if sent.like { "like" } else { "comment" };
        let expect = next.event(&sent.id, payload, &sent.user, action, &sent.target, sent.give, self.now(), at);
        (next, expect)
    }

    async fn send(&mut self, mut sent: Sent) -> Result<(), String> {
        sent.body = Self::body(&sent);
        let payload = sent.body.to_string();
        let (next, expect) = self.expect_event(&sent, &payload, self.now());
        let (status, reply) = self.app.event(sent.body.clone()).await;
        let agreed = self.agree("event", &expect, status, &reply, self.forum_lost)?;
        if agreed {
            self.model = next;
        }
        self.sent.push(sent);
        Ok(())
    }

    /// Whether the system's answer is the model's (true) or a refusal a lost board may give
    /// instead (false, nothing applied); an error for anything else.
    pub(super) fn agree(&self, what: &str, expect: &Expect, status: StatusCode, reply: &Value, lost: bool) -> Result<bool, String> {
        if lost && restoring(status, reply) {
            return Ok(false);
        }
        let (_, got) = event_answer(status, reply);
        if got != *expect {
            return Err(format!("{what}: expected {expect:?}, got {status} {reply}"));
        }
        Ok(true)
    }

    /// One comment by each user, ids from `first_id` on: writes that commute.
    pub(super) fn comments(first_id: u32, users: &[u8]) -> Vec<Sent> {
        users
            .iter()
            .enumerate()
            .map(|(i, user)| Sent {
                id: format!("e{}", first_id + i as u32),
                body: Value::Null,
                user: format!("u{user}"),
                like: false,
                target: "t0".into(),
                give: true,
            })
            .collect()
    }

    pub(super) async fn burst(&mut self, first_id: u32, users: &[u8]) -> Result<(), String> {
        let sents = Self::comments(first_id, users);
        let replies = futures::future::join_all(sents.iter().map(|sent| self.app.event(Self::body(sent)))).await;
        // Comments commute: every order of them leaves the same boards.
        for (mut sent, (status, reply)) in sents.into_iter().zip(replies) {
            sent.body = Self::body(&sent);
            let (next, expect) = self.expect_event(&sent, &sent.body.to_string(), self.now());
            if self.agree("burst event", &expect, status, &reply, self.forum_lost)? {
                self.model = next;
            }
            self.sent.push(sent);
        }
        Ok(())
    }

    async fn deliver(&mut self, first_id: u32, messages: &[QueueMessage], receive: u32) -> Result<(), String> {
        let now = self.now();
        let mut records = Vec::new();
        let mut sents = Vec::new();
        for (i, message) in messages.iter().enumerate() {
            let id = format!("q{}", first_id + i as u32);
            let (action, target) = message.like.map_or(("comment", "t0".to_owned()), |t| ("like", format!("t{t}")));
            let body = json!({"event_id": id, "user_id": format!("u{}", message.user), "action": action, "target": target});
            let sent_ms = (now - i64::from(message.ago)) * 1000;
            let mut item = record(&id, &body.to_string(), receive);
            item["attributes"]["SentTimestamp"] = json!(sent_ms.to_string());
            records.push(item);
            let sent = Sent { id, body, user: format!("u{}", message.user), like: message.like.is_some(), target, give: true };
            sents.push((sent, message.ago));
        }
        let response = self.queue.handle(sqs_event(records)).await;
        let failed: Vec<String> = response.batch_item_failures.iter().map(|f| f.item_identifier.clone()).collect();
        for (sent, ago) in sents {
            let at = if i64::from(ago) <= GRACE_SECS { now - i64::from(ago) } else { now };
            let (next, expect) = self.expect_event(&sent, &sent.body.to_string(), at);
            if failed.contains(&sent.id) {
                // Handed back: applied nothing, SQS delivers it again later (only a lost board may).
                if !self.forum_lost {
                    return Err(format!("queue: {} handed back ({expect:?} expected)", sent.id));
                }
                continue;
            }
            if let Expect::Refused { .. } = expect {
                // Dead-lettered or dropped as the refusal says; the model is unchanged.
                continue;
            }
            self.model = next;
        }
        Ok(())
    }
}
