//! Reshards in the simulation: the guild moved to another count of slots as an operator does it
//! (docs/scaling.md#changing-shards): a deploy with the new count, then the journal function's
//! `reshard` until it answers `complete`. Both deploys' writes go on while the lines move (where
//! the data is) and are refused in the move's last step only; their reads answer as the model
//! says during the move and (the old deploy's, its layout probed before the switch) after it.
//! Every read then checks the moved board against the model.

use std::sync::Arc;

use axum::http::StatusCode;
use chrono::{Datelike, Duration, Utc};
use journal::{Resharder, S3Objects};
use serde_json::{Value, json};
use standings::domain::guard::closed_field;
use standings::redis::store::Store;

use super::faults::DrainOnList;
use super::world::{World, config, config_with, far};

/// Invocations a reshard in steps may take.
const MAX_INVOCATIONS: usize = 400;

/// A post refused in a move's last step as docs/scaling.md says, on either deploy.
fn refused(status: StatusCode, reply: &Value) -> bool {
    status == StatusCode::SERVICE_UNAVAILABLE && reply["error"]["code"] == "board_resharding"
}

/// Invocations of a move in steps whose writes and reads are checked on both deploys.
const CHECKED_STEPS: usize = 3;

impl World {
    pub(super) async fn reshard(
        &mut self,
        shards: u8,
        steps: bool,
        killed: Option<u8>,
        (lost, drained, unrecorded, half_frozen): (bool, bool, bool, bool),
    ) -> Result<(), String> {
        let shards = u32::from(shards.max(1));
        if shards == self.guild_shards {
            return Ok(());
        }
        if self.forum_lost || self.others_lost {
            // A board waiting for its restore is restored first, as its 503 asks.
            self.restore(false).await?;
        }
        if lost {
            // Everything else in S3 before the move: the loss after it takes only what the move wrote.
            self.drain().await?;
        }
        let assertions = Store::connect(&self.redis).expect("the world's Redis");
        let mut moved = self.deploy(config(shards), assertions).await?;
        moved.set_now(self.app.now());
        if unrecorded {
            self.lose_record_while_due(&mut moved, shards).await?;
            if lost {
                // Its post came after the drain above. A guild never written takes it in the
                // layout configured now, where the move has nothing to do and stores nothing:
                // undrained, the loss after the move would take it (the recovery point's loss).
                self.drain().await?;
            }
        }
        // With `drained`, the drain runs each time the move lists the guild's objects, and the
        // move reads its streams a few entries at a time: the drain stores and trims the old
        // layout's streams under the move, between the pages it reads.
        let armed = half_frozen && !unrecorded && !self.others_lost && self.half_freeze().await?;
        let mut half_frozen = armed;
        let drainer = drained.then(|| moved.drainer(S3Objects::new(self.s3.clone(), &self.bucket), Arc::default()));
        if drained {
            self.stats.faults += 1;
        }
        let objects = DrainOnList::new(S3Objects::new(self.s3.clone(), &self.bucket), drainer, "guild");
        let mut jobs = moved.journal_jobs_over(objects.clone(), Arc::default());
        jobs.resharder = Resharder::new(moved.config.clone(), moved.keys.clone(), moved.store.clone(), objects);
        if killed.is_some() {
            // A killed move's locks lapse within 2 s here (30 s deployed): a move renews its
            // lease with each run only, so one as short as the restores' (50 ms) lapses mid-move.
            jobs.resharder = jobs.resharder.with_lease_ms(2000);
        }
        if drained {
            jobs.resharder = jobs.resharder.with_stream_page(3);
        }
        let jobs = Arc::new(jobs);
        // Past its deadline, each invocation moves one run and stops.
        let deadline = if steps { Utc::now() - Duration::seconds(1) } else { far() };
        if let Some(yields) = killed {
            self.stats.faults += 1;
            let first = jobs.clone();
            let task = tokio::spawn(async move { first.run(json!({"reshard": {"board": "guild"}}), deadline).await.map(|_| ()) });
            for _ in 0..yields {
                tokio::task::yield_now().await;
            }
            task.abort();
            let _ = task.await;
        }
        // Any generation of the new count: a layout the guild had before is another time's, and
        // the move takes the next generation (docs/scaling.md#changing-shards).
        self.guild_moving_to =
            (0..8).flat_map(|generation| moved.keys.layout_at("guild", shards, generation).all()).map(|shard| shard.relative("")).collect();
        for invocation in 0..MAX_INVOCATIONS {
            let report = match jobs.run(json!({"reshard": {"board": "guild"}}), deadline).await {
                Ok(report) => report,
                // A killed move's lock, until its lease runs out.
                Err(error) if killed.is_some() && error.code() == "restore_running" => {
                    tokio::time::sleep(std::time::Duration::from_millis(25)).await;
                    continue;
                }
                // The season's loss, met where the move freezes the shard the archive left.
                Err(error) if half_frozen && error.code() == "board_restoring" => {
                    half_frozen = false;
                    self.others_lost = true;
                    self.restore(false).await?;
                    continue;
                }
                Err(error) => return Err(format!("reshard {} -> {shards}, invocation {invocation}: {error:?}", self.guild_shards)),
            };
            if report["status"] == "complete" {
                if half_frozen {
                    return Err("a move carried a season whose set one old shard had lost, unrefused".into());
                }
                if armed {
                    // The archive's next run, which the cut-off one left the season to: the
                    // season whole in the archive, as the model says (a frozen season reads
                    // nothing live until then).
                    self.archive_run().await.map_err(|e| format!("the archive's run after a move carried a half-frozen season: {e}"))?;
                    // Its releases stored before the loss below (`lost`): one within the recovery
                    // point brings the season back live until the archive's next run frees it again.
                    self.drain().await?;
                }
                self.guild_moving_to.clear();
                // The old deploy's probe of the layout predates the switch: it reads the freed
                // layout once, probes again and answers from the new one.
                self.check_reads().await.map_err(|e| format!("a read after the guild moved, old deploy: {e}"))?;
                self.app = moved;
                self.queue = self.app.queue(queue::DeadLetters::new(self.sqs.clone(), self.dlq.clone()));
                self.guild_shards = shards;
                if lost {
                    self.stats.faults += 1;
                    self.flush().await;
                }
                return Ok(());
            }
            if invocation < CHECKED_STEPS && !lost {
                for old in [true, false] {
                    let id = format!("move{}-{invocation}-{old}", self.stats.steps);
                    self.post_while_moving(&moved, old, &id, report["last_step"] == true).await?;
                }
                // Reads go on (the move's fence refuses writes only), on either deploy, as the
                // model says: every board as it was.
                self.check_reads().await.map_err(|e| format!("a read while the guild moves, old deploy: {e}"))?;
                std::mem::swap(&mut self.app, &mut moved);
                let read = self.check_reads().await;
                std::mem::swap(&mut self.app, &mut moved);
                read.map_err(|e| format!("a read while the guild moves, new deploy: {e}"))?;
            }
        }
        Err(format!("reshard {} -> {shards}: not complete in {MAX_INVOCATIONS} invocations", self.guild_shards))
    }

    /// Fault `half_frozen`: last month's guild season, not closed in any shard, frozen in one
    /// shard holding its set (an archive run cut off there), and the set of another deleted, its
    /// guard kept. Whether it was armed (a history with no such season, or one shard, has none).
    async fn half_freeze(&mut self) -> Result<bool, String> {
        let now = self.app.now();
        let first = now.date_naive().with_day(1).expect("a month's first day") - chrono::Months::new(1);
        let Some(season) = standings::archive::freeze::season_named(&first.format("%Y-%m").to_string(), chrono_tz::UTC) else {
            return Ok(false);
        };
        // Only a season the archive's run would have begun on (due, not archived).
        if !self.model.due(Self::start(), self.now()).contains(&season.id) {
            return Ok(false);
        }
        let mut conn = self.app.redis.clone();
        let Some((shards, generation)) =
            standings::redis::layout::read(&mut conn, &self.app.keys, "guild").await.map_err(|e| e.to_string())?
        else {
            return Ok(false);
        };
        let mut holding = Vec::new();
        for shard in self.app.keys.layout_at("guild", shards, generation).all() {
            let closed: bool =
                redis::cmd("HEXISTS").arg(shard.guard()).arg(closed_field(&season)).query_async(&mut conn).await.expect("HEXISTS");
            if closed {
                return Ok(false);
            }
            let held: bool = redis::cmd("EXISTS").arg(shard.period(&season)).query_async(&mut conn).await.expect("EXISTS");
            if held {
                holding.push(shard);
            }
        }
        let [frozen, lost, ..] = holding.as_slice() else { return Ok(false) };
        standings::archive::freeze::freeze(&mut conn, frozen, &season, Some(now))
            .await
            .map_err(|e| format!("a freeze of one guild shard: {e}"))?;
        super::faults::delete(&self.app, &[lost.period(&season)]).await;
        self.stats.faults += 1;
        Ok(true)
    }

    /// A deploy of `config` beside the world's: its start judges the boards it finds not born
    /// against the journal, as a function's does (it marks none born by itself: a layout a
    /// move left, or one it will take, is not the deploy's to mark).
    async fn deploy(&self, config: standings::domain::config::Config, assertions: Store) -> Result<crate::TestApp, String> {
        let (keys, store, table) = (self.app.keys.clone(), self.app.store.clone(), Some(self.table.clone()));
        let app = crate::spawn_app_born(config, keys, store, assertions, table, false).await;
        let objects = S3Objects::new(self.s3.clone(), &self.bucket);
        for (name, birth) in standings::services::journal::births::at_start(&app.config, &app.keys, &app.store, &objects).await {
            birth.map_err(|error| format!("a deploy's start: {name}: {error}"))?;
        }
        Ok(app)
    }

    /// A move of the arcade to another `max_score`: refused by name before anything is fenced or
    /// written (its league's cohort order is not re-encoded), every key of the deployment as it
    /// was; the deploy on that `max_score` reads the arcade and writes a score to it at the scale
    /// it holds, and its verify finds the arcade equal to its journal; the reads after the step
    /// check the arcade against the model.
    pub(super) async fn rescale(&mut self) -> Result<(), String> {
        if self.forum_lost || self.others_lost {
            // A board waiting for its restore is restored first, as its 503 asks.
            self.restore(false).await?;
        }
        let assertions = Store::connect(&self.redis).expect("the world's Redis");
        let config = config_with(self.guild_shards, "max_score = 4194303");
        let rescaled = self.deploy(config, assertions).await?;
        let jobs = rescaled.journal_jobs(&self.s3, &self.bucket, Arc::default());
        let before = self.app.keyspace().await;
        match jobs.run(json!({"reshard": {"board": "arcade"}}), far()).await {
            Err(error) if format!("{error:?}").contains("league") => {}
            // An arcade holding no score in any kept period takes the new scale with its next
            // write: nothing to move (docs/boards.md#changing-max_score).
            Ok(report) if report["status"] == "complete" && report["moved"] == 0 && report.get("max_score").is_none() => {}
            other => return Err(format!("a move of the arcade to another max_score: {other:?}")),
        }
        if self.app.keyspace().await != before {
            return Err("a refused move of the arcade to another max_score wrote".into());
        }
        // The deploy on the other `max_score` reads the arcade from its scores as they are held
        // (issue 58): what the model says, not 503 `board_scale_changed`.
        rescaled.set_now(self.app.now());
        let date = super::model::day_of(self.app.now().timestamp());
        let expected = self.model.arcade_top(&format!("day:{date}"));
        let (status, top) = rescaled.get(&format!("/v1/boards/arcade/top?period=day&at={date}&limit=100")).await;
        let got: Vec<(String, i64)> = top["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| (e["user_id"].as_str().unwrap_or("?").to_owned(), e["score"].as_i64().unwrap_or(-1)))
            .collect();
        if status != axum::http::StatusCode::OK || got != expected {
            return Err(format!("the arcade read by a deploy on another max_score: expected {expected:?}, got {status} {top}"));
        }
        // And writes it at the scale it holds (every score of the arcade fits either), as the
        // model says a submission goes, its league and notifications included.
        let body = json!({"event_id": format!("rescaled{}", self.stats.steps), "user_id": "u0", "score": 12});
        let answered = rescaled.post("/v1/boards/arcade/scores", &body).await;
        self.scored(&body, answered).map_err(|e| format!("a deploy on another max_score: {e}"))?;
        // Its verify replays the arcade's journal at the scale the arcade holds: nothing differs.
        let report = jobs.run(json!({"verify": {"board": "arcade"}}), far()).await.map_err(|e| format!("verify: {e:?}"))?;
        match report["mismatches"] == 0 {
            true => Ok(()),
            false => Err(format!("a verify of the arcade by a deploy on another max_score: {report}")),
        }
    }

    /// A post to the guild from the old deploy (`old`) or the new one while the guild moves: taken
    /// where the data is while the lines move, refused in the move's last step (`last_step`).
    /// Fault `unrecorded`: the guild's layout record lost alone while its move is due (the new
    /// deploy's start judged the layout it moves to a target). A post through a container of the
    /// new deploy that has not probed the guild is refused (503 `board_restoring`) and writes
    /// nothing, where a record was lost (a guild in its one slot at generation 0 has none, and
    /// its post is applied); the restore, run by the new deploy, records the layout the data is
    /// in again, and every read is as the model says.
    async fn lose_record_while_due(&mut self, moved: &mut crate::TestApp, shards: u32) -> Result<(), String> {
        self.stats.faults += 1;
        let layout = self.app.keys.board_layout("guild");
        let mut conn = self.app.redis.clone();
        let held: Option<String> = redis::cmd("GET").arg(&layout).query_async(&mut conn).await.expect("GET");
        super::faults::delete(&self.app, std::slice::from_ref(&layout)).await;
        let assertions = Store::connect(&self.redis).expect("the world's Redis");
        let fresh = self.deploy(config(shards), assertions).await?;
        fresh.set_now(self.app.now());
        let before = self.app.keyspace().await;
        let id = format!("unrecorded{}", self.stats.steps);
        let body = json!({"event_id": id, "user_id": "u0", "action": "post"});
        let (status, reply) = fresh.event(body.clone()).await;
        // In its one slot (generation 0), the guild is found by its data there, as a board
        // written before layouts were recorded is (docs/scaling.md#changing-shards).
        let in_one_slot = held.as_deref() == Some("1");
        if held.is_some() && !in_one_slot {
            if status != StatusCode::SERVICE_UNAVAILABLE || reply["error"]["code"] != "board_restoring" {
                return Err(format!("a post to the guild, its layout record ({held:?}) lost while a move is due: {status} {reply}"));
            }
            if self.app.keyspace().await != before {
                return Err("a post refused for a lost layout record wrote to the store".into());
            }
        } else {
            let mut next = self.model.clone();
            let expect = next.post(&id, &body.to_string(), "u0", self.now());
            self.agree("a post to the guild in its one slot, its record lost or never written", &expect, status, &reply, false)?;
            self.model = next;
        }
        std::mem::swap(&mut self.app, moved);
        let restored = self.restore(false).await;
        std::mem::swap(&mut self.app, moved);
        restored.map_err(|e| format!("the restore after the guild's layout record was lost: {e}"))?;
        let again: Option<String> = redis::cmd("GET").arg(&layout).query_async(&mut conn).await.expect("GET");
        // Nothing recorded (a guild never written, or in its one slot): a post records what it finds.
        if held.is_some() && !in_one_slot && again != held {
            return Err(format!("the guild's layout record after its restore: {again:?}, it was {held:?}"));
        }
        self.check_reads().await.map_err(|e| format!("a read after the guild's layout record was restored: {e}"))
    }

    async fn post_while_moving(&mut self, moved: &crate::TestApp, old: bool, id: &str, last_step: bool) -> Result<(), String> {
        let body = json!({"event_id": id, "user_id": "u0", "action": "post"});
        let (status, reply) = if old { self.app.event(body.clone()).await } else { moved.event(body.clone()).await };
        let which = if old { "old" } else { "new" };
        if last_step {
            return match refused(status, &reply) {
                true => Ok(()),
                false => Err(format!("a post to the guild in its move's last step, {which} deploy: {status} {reply}")),
            };
        }
        let mut next = self.model.clone();
        let expect = next.post(id, &body.to_string(), "u0", self.now());
        self.agree(&format!("a post to the guild while it moves, {which} deploy"), &expect, status, &reply, false)?;
        // Its data is in the old layout until the switch: sharded, a write knows its shard's
        // rank only and answers none (docs/scaling.md#what-a-write-answers), whatever either
        // deploy is configured with.
        let periods = reply["results"][0]["periods"].as_array().cloned().unwrap_or_default();
        if self.guild_shards > 1 && periods.iter().any(|period| !period["rank"].is_null()) {
            return Err(format!(
                "a post to the guild moving from {} slots, {which} deploy, answered a shard's rank: {reply}",
                self.guild_shards
            ));
        }
        self.model = next;
        Ok(())
    }
}
