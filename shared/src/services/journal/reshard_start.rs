//! What a move (`reshard`) checks and records before it moves a line, and the fence of its last
//! step (docs/scaling.md#changing-shards).

use chrono::Utc;

use super::Resharder;
use super::error::RestoreError;
use crate::archive::objects::{Objects, journal_objects};
use crate::domain::catch_up::{Round, Rounds};
use crate::domain::guard;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Layout};
use crate::redis::store::Connection;
use crate::redis::{journal, layout, restore};

/// The rounds' field of the first new shard's reshard checkpoint (`Rounds::text`).
const ROUNDS: &str = "rounds";
/// The checkpoint's record of where each old shard's journal stood once the last step fenced
/// them all: the step's bound.
const FENCED_AT: &str = "fenced_at";
/// The field of each new shard's reshard checkpoint naming the `max_score` a re-encode lays out.
const TO_SCALE: &str = "to_scale";

/// The fields of an old shard's guard a move checks: `fence`, whether it records a loss, a
/// rollback, and whether it is born.
async fn guard_state(conn: &mut Connection, source: &BoardKeys) -> Result<(Option<String>, bool, bool, bool), StoreError> {
    Ok(redis::pipe()
        .hget(source.guard(), guard::FENCE)
        .hexists(source.guard(), guard::LOST)
        .hexists(source.guard(), guard::ROLLBACK)
        .hexists(source.guard(), guard::BORN)
        .query_async(conn)
        .await?)
}

fn lost_while_moving(name: &str, source: &BoardKeys) -> RestoreError {
    RestoreError::Lost(format!("board {name:?} was lost or fenced while it moved ({}): restore it, then move it", source.guard()))
}

impl<O: Objects> Resharder<O> {
    /// Refuses a move before it fences or writes anything: an old shard lost, fenced or being
    /// restored (its closed seasons and bans are not there to carry: restored first; a guard not
    /// born with no history is a board that never took a write), a journal from before effects
    /// were recorded, or a new layout already holding boards or journal objects.
    pub(super) async fn movable(&self, conn: &mut Connection, name: &str, source: &Layout, target: &Layout) -> Result<(), RestoreError> {
        for (source, journal_name) in source.all().iter().zip(source.journals()) {
            // Fenced already (a loss a write found, a restore under way): not this move's fence
            // to lift if it is refused. (This move's own, from an invocation killed before it
            // moved a line, is taken up again.)
            let (fence, lost, _, born) = guard_state(conn, source).await?;
            let fenced = fence.is_some_and(|fence| fence != guard::MOVING);
            // A shard never judged (no write yet, its start's judgement failed) is judged now,
            // before its starting point makes it a stream: an empty stream is a history to the
            // judgement (mark_born.lua), which would then refuse its writes as lost.
            let unborn = !born && self.judged_lost(&journal_name).await?;
            if fenced || lost || unborn {
                return Err(RestoreError::Lost(format!(
                    "board {name:?} is lost, fenced or being restored ({} is not born, or fenced): restore it, then move it",
                    source.guard()
                )));
            }
        }
        super::generations::movable(conn, &self.objects, &self.keys, source).await?;
        for (target, journal_name) in target.all().iter().zip(target.journals()) {
            let objects = journal_objects(&self.objects, self.keys.prefix(), &journal_name).await?;
            if !objects.is_empty() || !conn.scan_slot_of(&target.guard(), &target.period_pattern()).await?.is_empty() {
                return Err(RestoreError::Invalid(format!(
                    "the new layout of board {name:?} already holds boards or journal objects (none of this move's): \
                     delete its keys and its objects under {journal_name:?} first"
                )));
            }
        }
        Ok(())
    }

    /// Whether a shard not born holds a history (`births::judge`): if not, it is marked born.
    async fn judged_lost(&self, journal_name: &str) -> Result<bool, RestoreError> {
        match super::births::judge(&self.config, &self.store, &self.keys, journal_name, &self.objects).await {
            Ok(birth) => Ok(birth == restore::Birth::History),
            Err(super::births::BirthError::Store(error)) => Err(error.into()),
            Err(super::births::BirthError::Objects(error)) => Err(error.into()),
        }
    }

    /// Whether an old shard's journal holds anything (its stream or its objects in S3).
    async fn has_history(&self, conn: &mut Connection, source: &BoardKeys, journal_name: &str) -> Result<bool, RestoreError> {
        Ok(journal::len(conn, source).await? > 0 || !journal_objects(&self.objects, self.keys.prefix(), journal_name).await?.is_empty())
    }

    /// Records on each new shard what the move is from (for a move that records the layout and
    /// stops before its end, `moved_from`) and the `max_score` a re-encode lays its lines out at
    /// (`to_scale`, `begun_scale`), and has each take the moved lines' bans into its guard even
    /// where the guard exists (a new board's is born at a function's start).
    pub(super) async fn start_targets(
        &self,
        conn: &mut Connection,
        source: &Layout,
        targets: &[BoardKeys],
        to_scale: Option<i64>,
    ) -> Result<(), StoreError> {
        for target in targets {
            let mut pipe = redis::pipe();
            pipe.hset(target.reshard_checkpoint(), "from", layout::text(source.shards(), source.generation())).hset(
                target.restore_claims(),
                target.guard(),
                "1",
            );
            if let Some(to_scale) = to_scale {
                pipe.hset(target.reshard_checkpoint(), TO_SCALE, to_scale);
            }
            let _: () = pipe.query_async(conn).await?;
        }
        Ok(())
    }

    /// Refuses to go on with a re-encode begun to another `max_score` than `to` (the
    /// configuration changed again in the middle of a move): its new layout holds lines laid out
    /// at that one, which the compare would find different from every old entry, and stop the
    /// move fenced. Nothing is written; the board goes on as it is.
    pub(super) async fn begun_scale(&self, conn: &mut Connection, name: &str, targets: &[BoardKeys], to: i64) -> Result<(), RestoreError> {
        let begun: Option<i64> = redis::cmd("HGET").arg(targets[0].reshard_checkpoint()).arg(TO_SCALE).query_async(conn).await?;
        match begun {
            Some(begun) if begun != to => Err(RestoreError::Invalid(format!(
                "board {name:?}: a move to max_score {begun} was begun and is not finished; deploy max_score {begun} again and \
                 run it to its end (then change it), or delete the new generation's keys and journal objects first"
            ))),
            _ => Ok(()),
        }
    }

    /// The move's rounds so far (`domain::catch_up`), kept on the first new shard's checkpoint
    /// (`None`: not begun, or begun by a release that fenced a move from its first step).
    pub(super) async fn kept_rounds(
        &self,
        conn: &mut Connection,
        source: &Layout,
        targets: &[BoardKeys],
    ) -> Result<Option<Rounds>, StoreError> {
        let kept: Option<String> = redis::cmd("HGET").arg(targets[0].reshard_checkpoint()).arg(ROUNDS).query_async(conn).await?;
        kept.map(|text| {
            Rounds::parse(&text, source.shards() as usize)
                .ok_or_else(|| StoreError::Protocol(format!("a move's rounds {text:?} are not one point an old shard")))
        })
        .transpose()
    }

    /// Round 0, taken by a move's first invocation: each old shard's journal point now.
    pub(super) async fn first_round(&self, conn: &mut Connection, source: &Layout, targets: &[BoardKeys]) -> Result<Rounds, StoreError> {
        let rounds = Rounds(vec![Round { start_ms: Utc::now().timestamp_millis(), points: self.journal_points(conn, source).await? }]);
        self.keep_rounds(conn, targets, &rounds).await?;
        Ok(rounds)
    }

    /// Errs when a new shard's lock is no longer this move's `token` (its lease lapsed and
    /// another invocation took it); renewed otherwise.
    pub(super) async fn still_held(&self, conn: &mut Connection, targets: &[BoardKeys], token: &str) -> Result<(), RestoreError> {
        for target in targets {
            if !restore::renew(conn, target, token, self.lease_ms).await? {
                return Err(RestoreError::Running(target.guard()));
            }
        }
        Ok(())
    }

    /// Where each old shard's journal stands now.
    pub(super) async fn journal_points(&self, conn: &mut Connection, source: &Layout) -> Result<Vec<String>, StoreError> {
        let mut points = Vec::new();
        for old in source.all() {
            points.push(journal::point(conn, &old).await?);
        }
        Ok(points)
    }

    pub(super) async fn keep_rounds(&self, conn: &mut Connection, targets: &[BoardKeys], rounds: &Rounds) -> Result<(), StoreError> {
        Ok(redis::cmd("HSET").arg(targets[0].reshard_checkpoint()).arg(ROUNDS).arg(rounds.text()).query_async(conn).await?)
    }

    /// Fences every old shard for the move's last step (`moving`: writes refused, reads go on),
    /// then checks that no fence of another kind was found (a loss a write found, a rollback the
    /// drain found): restored first, as at the start; the switch would free it with the rest.
    /// Once all are fenced, where each old shard's journal stands is recorded as the last step's
    /// bound (`FENCED_AT`, kept from the first invocation that fenced them all).
    pub(super) async fn fence(
        &self,
        conn: &mut Connection,
        name: &str,
        (source, targets): (&Layout, &[BoardKeys]),
    ) -> Result<(), RestoreError> {
        let sources = source.all();
        for source in &sources {
            let _: () = redis::cmd("HSETNX").arg(source.guard()).arg(guard::FENCE).arg(guard::MOVING).query_async(conn).await?;
        }
        for source in &sources {
            let (fence, lost, rolled_back, _) = guard_state(conn, source).await?;
            if fence.as_deref() != Some(guard::MOVING) || lost || rolled_back {
                return Err(lost_while_moving(name, source));
            }
        }
        let points = self.journal_points(conn, source).await?.join(" ");
        let _: () = redis::cmd("HSETNX").arg(targets[0].reshard_checkpoint()).arg(FENCED_AT).arg(points).query_async(conn).await?;
        Ok(())
    }

    /// Whether every old shard is fenced by the move (`moving`).
    pub(super) async fn all_moving(&self, conn: &mut Connection, sources: &[BoardKeys]) -> Result<bool, StoreError> {
        for source in sources {
            let (fence, ..) = guard_state(conn, source).await?;
            if fence.as_deref() != Some(guard::MOVING) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The last step's bound its fence recorded (`fence`), one point an old shard.
    pub(super) async fn fenced_at(
        &self,
        conn: &mut Connection,
        source: &Layout,
        targets: &[BoardKeys],
    ) -> Result<Option<Vec<String>>, StoreError> {
        let kept: Option<String> = redis::cmd("HGET").arg(targets[0].reshard_checkpoint()).arg(FENCED_AT).query_async(conn).await?;
        Ok(kept.map(|text| text.split(' ').map(str::to_owned).collect::<Vec<_>>()).filter(|points| points.len() == source.all().len()))
    }

    /// A last step begun and stopped by a loss, whose restore lifted the fence: counted as a
    /// round up to its bound (the places it took are that round's), so the next round's writes,
    /// those the restore let in among them, go past every place it took; its compare's progress
    /// forgotten (those writes may touch periods it had checked). One transaction.
    pub(super) async fn last_step_as_round(
        &self,
        conn: &mut Connection,
        targets: &[BoardKeys],
        rounds: &mut Rounds,
        points: Vec<String>,
    ) -> Result<(), StoreError> {
        rounds.0.push(Round { start_ms: Utc::now().timestamp_millis(), points });
        let checkpoint = targets[0].reshard_checkpoint();
        let _: () = redis::pipe()
            .atomic()
            .hset(&checkpoint, ROUNDS, rounds.text())
            .hdel(&checkpoint, &[FENCED_AT, super::reshard_check::CHECKED][..])
            .query_async(conn)
            .await?;
        Ok(())
    }

    /// Whether the move's last step began (an old shard fenced by it); an error when an old
    /// shard was lost (its guard with it, once it had taken a write: `movable` let it through
    /// born or without history) or fenced otherwise while writes went on.
    pub(super) async fn fenced(&self, conn: &mut Connection, name: &str, layout: &Layout) -> Result<bool, RestoreError> {
        let mut fenced = false;
        for (source, journal_name) in layout.all().iter().zip(layout.journals()) {
            let (fence, lost, rolled_back, born) = guard_state(conn, source).await?;
            let gone = !born && self.has_history(conn, source, &journal_name).await?;
            if lost || rolled_back || gone || fence.as_deref().is_some_and(|fence| fence != guard::MOVING) {
                return Err(lost_while_moving(name, source));
            }
            fenced |= fence.is_some();
        }
        Ok(fenced)
    }
}
