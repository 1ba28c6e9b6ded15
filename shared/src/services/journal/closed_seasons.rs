//! Archived seasons through a restore or a reshard (docs/archival.md, docs/scaling.md#changing-
//! shards). A season's freeze is not journaled (its archive in DynamoDB is its record), its
//! release is (`release_season.lua`: closed, its set gone, `released|`): lines that replay the
//! season's writes bring its set and statements back, and these steps put them away again.
//!
//! - A restore, before it completes: every season the guard says released has nothing left in
//!   Redis (its set, arrivals and statements, which the replayed lines recreated); a season
//!   closed and not released keeps its frozen board and nothing live.
//! - A reshard, before it switches: each period closed in any old shard is made in the new
//!   layout what the old one holds: closed in every new guard, nothing live, the frozen board's
//!   members each in their user's new shard, the statements as they are (none once released).
//!   An old shard the archive had not frozen yet is frozen first, as the archive's next run
//!   would have. Once switched, a season every old shard recorded released is recorded released
//!   in each new one (journaled there, for the new layout's restores). Every step may run again.
//!
//! Released seasons past their retention (a season's end plus 90 days) are not looked at: their
//! keys, and their lines', are gone.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use crate::archive::freeze;
use crate::domain::config::Board;
use crate::domain::guard::{
    CLOSED, KEPT, RELEASED, closed_field, closed_period, emptied_field, live_field, released_field, released_period,
};
use crate::domain::period::{Period, PeriodKind};
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Layout};
use crate::redis::store::Connection;

use super::error::RestoreError;
use crate::domain::rescale::Rescale;

/// A new shard's `released|` field for a season every old shard recorded released, until the
/// release is recorded (journaled) there: `release_season.lua` takes only "1" as recorded.
const MOVED: &str = "moved";

/// What the archive recorded in an old shard's closed field (`freeze_season.lua`).
enum Closed {
    Members(u64),
    Lost,
    Unwitnessed,
}

impl Closed {
    fn parse(value: &str) -> Self {
        match value {
            "lost" => Closed::Lost,
            "unwitnessed" => Closed::Unwitnessed,
            count => Closed::Members(count.parse().unwrap_or(0)),
        }
    }
}

/// Makes every period closed in `sources` closed in `targets` as it is in `sources`. The count
/// of periods carried.
pub(super) async fn carry(
    conn: &mut Connection,
    board: &Board,
    sources: &[BoardKeys],
    target: &Layout,
    rescale: Option<&Rescale>,
    now: DateTime<Utc>,
) -> Result<Vec<Period>, RestoreError> {
    let periods = periods_named(conn, Some(board), sources, CLOSED, closed_period, now).await?;
    for period in &periods {
        carry_period(conn, period, sources, (target, rescale), now).await?;
    }
    Ok(periods)
}

/// Before the last step takes any place (the old layout fenced `moving`): each old shard the
/// archive had not frozen yet, of a period closed in another, frozen now as the archive's next
/// run would (`freeze_moving`). One whose guard records the period's set Redis lost is fenced
/// lost and refused (`board_restoring`) here, where a restore and a run again go on with a new
/// round; found by the carry after the last step, the run again would take that step's places
/// a second time and skip writes the restore let in.
pub(super) async fn freeze_unfrozen(
    conn: &mut Connection,
    board: &Board,
    sources: &[BoardKeys],
    now: DateTime<Utc>,
) -> Result<(), RestoreError> {
    for period in periods_named(conn, Some(board), sources, CLOSED, closed_period, now).await? {
        for source in sources {
            let closed: bool = redis::cmd("HEXISTS").arg(source.guard()).arg(closed_field(&period)).query_async(conn).await?;
            if !closed {
                freeze::freeze_moving(conn, source, &period, now).await?;
            }
        }
    }
    Ok(())
}

/// Once the new layout takes writes (born, unfenced): each season the move found released in
/// every old shard recorded released in each new one (`record_release`, journaled in its
/// journal at `now`), so a restore from the new layout's journal ends with it closed. A season
/// released before releases were recorded is left to the archive's next run, which reads the
/// archive to know. A shard that recorded it already writes nothing.
pub(super) async fn record_released(
    conn: &mut Connection,
    board: &Board,
    targets: &[BoardKeys],
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    for period in periods_named(conn, Some(board), targets, RELEASED, released_period, now).await? {
        for target in targets {
            freeze::record_release(conn, target, &period, 0, now).await?;
        }
    }
    Ok(())
}

/// Before a restore of `shard` completes: what the restored lines brought back of its closed
/// seasons is put away again. A season released has nothing left (set, arrivals, statements);
/// a season closed and not released keeps its frozen board and statements, and a live set
/// found beside it goes (a closed season's set is never live), or becomes the frozen board
/// when that is gone (the archive's next run then finishes or releases it).
/// (`board` is unknown for a board no longer defined: a period's keys need only its kind and
/// id, which day, week, month and season periods give by name; a cron period needs its board's
/// schedule, so the restore passes the runtime boards too.)
pub(super) async fn settle_closed(
    conn: &mut Connection,
    board: Option<&Board>,
    shard: &BoardKeys,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let shards = std::slice::from_ref(shard);
    let released = periods_named(conn, board, shards, RELEASED, released_period, now).await?;
    for period in &released {
        let mut gone = vec![shard.period(period), shard.arrivals(period), shard.frozen(period)];
        gone.extend(conn.scan_slot_of(&shard.guard(), &shard.statement_pattern(period)).await?);
        for chunk in gone.chunks(500) {
            let _: () = redis::cmd("DEL").arg(chunk).query_async(conn).await?;
        }
    }
    for period in periods_named(conn, board, shards, CLOSED, closed_period, now).await?.iter().filter(|p| !released.contains(p)) {
        let (live, frozen): (bool, bool) = (
            redis::cmd("EXISTS").arg(shard.period(period)).query_async(conn).await?,
            redis::cmd("EXISTS").arg(shard.frozen(period)).query_async(conn).await?,
        );
        if live && !frozen {
            // As the freeze does: the frozen board lives until the archive releases it.
            let _: () = redis::cmd("RENAME").arg(shard.period(period)).arg(shard.frozen(period)).query_async(conn).await?;
            let _: () = redis::cmd("PERSIST").arg(shard.frozen(period)).query_async(conn).await?;
        }
        let _: () = redis::cmd("DEL").arg(shard.period(period)).arg(shard.arrivals(period)).query_async(conn).await?;
    }
    Ok(())
}

/// The periods named by the guard fields starting with `prefix` in any of `shards`; of those
/// released, only the ones whose keys may still be there at `now` (a period past its retention
/// has none, its lines' neither).
async fn periods_named(
    conn: &mut Connection,
    board: Option<&Board>,
    shards: &[BoardKeys],
    prefix: &str,
    label: fn(&str) -> Option<(&str, &str)>,
    now: DateTime<Utc>,
) -> Result<Vec<Period>, StoreError> {
    let mut fields = BTreeSet::new();
    for shard in shards {
        let mut cursor = 0u64;
        loop {
            let (next, pairs): (u64, Vec<String>) = redis::cmd("HSCAN")
                .arg(shard.guard())
                .arg(cursor)
                .arg("MATCH")
                .arg(format!("{prefix}*"))
                .arg("COUNT")
                .arg(1000)
                .query_async(conn)
                .await?;
            fields.extend(pairs.into_iter().step_by(2));
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    let named = |field: &String| {
        let (kind, id) = label(field)?;
        let configured = board.and_then(|board| board.periods.iter().copied().find(|k| k.as_str() == kind));
        let kind = configured.or_else(|| PeriodKind::parse(kind))?;
        Period::named(kind, id, board.map_or(chrono_tz::UTC, |board| board.timezone)).ok()
    };
    // A closed period's frozen board outlives its retention (the freeze drops the expiry):
    // only released ones are known gone once past it.
    let kept = |period: &Period| prefix != RELEASED || period.expires_at().is_none_or(|at| at > now.timestamp());
    Ok(fields.iter().filter_map(named).filter(kept).collect())
}

async fn carry_period(
    conn: &mut Connection,
    period: &Period,
    sources: &[BoardKeys],
    (target, rescale): (&Layout, Option<&Rescale>),
    now: DateTime<Utc>,
) -> Result<(), RestoreError> {
    let targets = target.all();
    let field = closed_field(period);
    let mut closed = Vec::with_capacity(sources.len());
    for source in sources {
        let value: Option<String> = redis::cmd("HGET").arg(source.guard()).arg(&field).query_async(conn).await?;
        if value.is_none() {
            // Done before the last step (`freeze_unfrozen`); a resumed move's last step, whose
            // freezes an earlier invocation did, finds none left.
            freeze::freeze_moving(conn, source, period, now).await?;
        }
        let value: Option<String> = redis::cmd("HGET").arg(source.guard()).arg(&field).query_async(conn).await?;
        closed.push(Closed::parse(value.as_deref().unwrap_or("unwitnessed")));
    }
    // Nothing of the period is live in the new layout: the lines recreated it.
    for target in &targets {
        let mut gone = vec![target.period(period), target.arrivals(period), target.frozen(period)];
        gone.extend(conn.scan_slot_of(&target.guard(), &target.statement_pattern(period)).await?);
        for chunk in gone.chunks(500) {
            let _: () = redis::cmd("DEL").arg(chunk).query_async(conn).await?;
        }
        let kept = format!("{KEPT}{}:{}", period.kind.as_str(), period.id);
        let _: () =
            redis::cmd("HDEL").arg(target.guard()).arg(kept).arg(live_field(period)).arg(emptied_field(period)).query_async(conn).await?;
    }
    let mut frozen = vec![0u64; targets.len()];
    let mut released = 0u64;
    for (source, closed) in sources.iter().zip(&closed) {
        let moved = copy_frozen(conn, period, source, (target, rescale), &mut frozen).await?;
        if let (Closed::Members(members), false) = (closed, moved) {
            released += members;
        }
        copy_statements(conn, period, source, target).await?;
    }
    let mut released_everywhere = true;
    for source in sources {
        released_everywhere &= redis::cmd("HEXISTS").arg(source.guard()).arg(released_field(period)).query_async::<bool>(conn).await?;
    }
    let lost = closed.iter().any(|c| matches!(c, Closed::Lost));
    let unwitnessed = closed.iter().all(|c| matches!(c, Closed::Unwitnessed));
    for (index, target) in targets.iter().enumerate() {
        // The archive sums the shards' counts: a released shard's count stays, in the first.
        let value = match (lost, unwitnessed) {
            (true, _) => "lost".to_owned(),
            (false, true) => "unwitnessed".to_owned(),
            (false, false) => (frozen[index] + if index == 0 { released } else { 0 }).to_string(),
        };
        let _: () = redis::cmd("HSET").arg(target.guard()).arg(&field).arg(value).query_async(conn).await?;
        if released_everywhere {
            // Not "1": `record_released` journals it once the new layout takes writes.
            let _: () = redis::cmd("HSET").arg(target.guard()).arg(released_field(period)).arg(MOVED).query_async(conn).await?;
        }
    }
    Ok(())
}

/// Copies `source`'s frozen board of `period`, a page at a time, each member into its user's
/// target; `counts` gets each target's members. Whether the source had one.
async fn copy_frozen(
    conn: &mut Connection,
    period: &Period,
    source: &BoardKeys,
    (target, rescale): (&Layout, Option<&Rescale>),
    counts: &mut [u64],
) -> Result<bool, RestoreError> {
    let key = source.frozen(period);
    let mut start = 0isize;
    loop {
        let page = super::reshard_check::members_page(conn, &key, start).await?;
        if page.is_empty() {
            return Ok(start > 0);
        }
        for (index, members) in target.by_shard(&page, |(member, _)| member.as_str()) {
            let mut zadd = redis::cmd("ZADD");
            zadd.arg(target.shard(index).frozen(period));
            for (member, composite) in members {
                zadd.arg(Rescale::text(super::rescale::composite(rescale, period, *composite)?)).arg(member);
            }
            let added: u64 = zadd.query_async(conn).await.map_err(StoreError::from)?;
            counts[index] += added;
        }
        start += super::reshard_check::PAGE;
    }
}

/// Copies `source`'s statements of `period`, each to its user's target, with their expiry.
async fn copy_statements(conn: &mut Connection, period: &Period, source: &BoardKeys, target: &Layout) -> Result<(), StoreError> {
    for key in conn.scan_slot_of(&source.guard(), &source.statement_pattern(period)).await? {
        let Some(user) = source.statement_user(&key, period) else { continue };
        let (dump, ttl): (Option<Vec<u8>>, i64) =
            (redis::cmd("DUMP").arg(&key).query_async(conn).await?, redis::cmd("PTTL").arg(&key).query_async(conn).await?);
        let Some(dump) = dump else { continue };
        let _: () = redis::cmd("RESTORE")
            .arg(target.of_user(user).statement(user, period))
            .arg(ttl.max(0))
            .arg(dump)
            .arg("REPLACE")
            .query_async(conn)
            .await?;
    }
    Ok(())
}
