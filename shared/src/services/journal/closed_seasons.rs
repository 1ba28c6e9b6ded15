//! Archived seasons through a restore or a reshard (docs/archival.md, docs/scaling.md#changing-
//! shards). A season's freeze is not journaled (its archive in DynamoDB is its record), its
//! release is (`release_season.lua`: closed, its set gone, `released|`): lines that replay the
//! season's writes bring its set and statements back, and these steps put them away again.
//!
//! - A restore, before it completes: every season the guard says released has nothing left in
//!   Redis (its set, arrivals and statements, which the replayed lines recreated).
//! - A reshard, before it switches: each period closed in any old shard is made in the new
//!   layout what the old one holds: closed in every new guard, nothing live, the frozen board's
//!   members each in their user's new shard, the statements as they are (none once released).
//!   An old shard the archive had not frozen yet is frozen first, as the archive's next run
//!   would have. Once switched, a season released in every shard is recorded released in each
//!   new one (journaled there, for the new layout's restores). Every step may run again.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use crate::archive::freeze;
use crate::domain::config::Board;
use crate::domain::guard::{CLOSED, KEPT, RELEASED, closed_field, closed_period, emptied_field, live_field, released_period};
use crate::domain::period::{Period, PeriodKind};
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, user_shard};
use crate::redis::store::Connection;

/// Members of a frozen board read at once.
const PAGE: isize = 1000;

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
pub(super) async fn carry(conn: &mut Connection, board: &Board, sources: &[BoardKeys], targets: &[BoardKeys]) -> Result<usize, StoreError> {
    let periods = periods_named(conn, Some(board), sources, CLOSED, closed_period).await?;
    for period in &periods {
        carry_period(conn, period, sources, targets).await?;
    }
    Ok(periods.len())
}

/// Once the new layout takes writes (born, unfenced): each period closed in `targets` whose
/// frozen board is gone from all of them recorded released in each (`record_release`,
/// journaled in its journal at `now`), so a restore from the new layout's journal ends with it
/// closed. A shard that recorded it already writes nothing.
pub(super) async fn record_released(
    conn: &mut Connection,
    board: &Board,
    targets: &[BoardKeys],
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    for period in periods_named(conn, Some(board), targets, CLOSED, closed_period).await? {
        let mut frozen = false;
        for target in targets {
            frozen |= redis::cmd("EXISTS").arg(target.frozen(&period)).query_async::<bool>(conn).await?;
        }
        if !frozen {
            for target in targets {
                freeze::record_release(conn, target, &period, 0, now).await?;
            }
        }
    }
    Ok(())
}

/// Deletes what the restored lines brought back of each season `shard`'s guard says released.
/// (`board` may be unknown here, a runtime board's: a period's keys need only its kind and id.)
pub(super) async fn drop_released(conn: &mut Connection, board: Option<&Board>, shard: &BoardKeys) -> Result<(), StoreError> {
    for period in periods_named(conn, board, std::slice::from_ref(shard), RELEASED, released_period).await? {
        let mut gone = vec![shard.period(&period), shard.arrivals(&period), shard.frozen(&period)];
        gone.extend(conn.scan_slot_of(&shard.guard(), &shard.statement_pattern(&period)).await?);
        for chunk in gone.chunks(500) {
            let _: () = redis::cmd("DEL").arg(chunk).query_async(conn).await?;
        }
    }
    Ok(())
}

/// The periods named by the guard fields starting with `prefix` in any of `shards`.
async fn periods_named(
    conn: &mut Connection,
    board: Option<&Board>,
    shards: &[BoardKeys],
    prefix: &str,
    label: fn(&str) -> Option<(&str, &str)>,
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
    Ok(fields.iter().filter_map(named).collect())
}

async fn carry_period(conn: &mut Connection, period: &Period, sources: &[BoardKeys], targets: &[BoardKeys]) -> Result<(), StoreError> {
    let field = closed_field(period);
    let mut closed = Vec::with_capacity(sources.len());
    for source in sources {
        let value: Option<String> = redis::cmd("HGET").arg(source.guard()).arg(&field).query_async(conn).await?;
        if value.is_none() {
            // Fenced by the move, so unfenced here: the freeze the archive's next run would do.
            freeze::freeze(conn, source, period, false).await?;
        }
        let value: Option<String> = redis::cmd("HGET").arg(source.guard()).arg(&field).query_async(conn).await?;
        closed.push(Closed::parse(value.as_deref().unwrap_or("unwitnessed")));
    }
    // Nothing of the period is live in the new layout: the lines recreated it.
    for target in targets {
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
        let moved = copy_frozen(conn, period, source, targets, &mut frozen).await?;
        if let (Closed::Members(members), false) = (closed, moved) {
            released += members;
        }
        copy_statements(conn, period, source, targets).await?;
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
    }
    Ok(())
}

/// Copies `source`'s frozen board of `period`, a page at a time, each member into its user's
/// target; `counts` gets each target's members. Whether the source had one.
async fn copy_frozen(
    conn: &mut Connection,
    period: &Period,
    source: &BoardKeys,
    targets: &[BoardKeys],
    counts: &mut [u64],
) -> Result<bool, StoreError> {
    let key = source.frozen(period);
    let mut start = 0isize;
    loop {
        let page: Vec<(String, f64)> =
            redis::cmd("ZRANGE").arg(&key).arg(start).arg(start + PAGE - 1).arg("WITHSCORES").query_async(conn).await?;
        if page.is_empty() {
            return Ok(start > 0);
        }
        let mut by_target: Vec<Vec<(f64, &str)>> = vec![Vec::new(); targets.len()];
        for (member, composite) in &page {
            by_target[user_shard(member, targets.len() as u32) as usize].push((*composite, member));
        }
        for (index, members) in by_target.iter().enumerate().filter(|(_, members)| !members.is_empty()) {
            let mut zadd = redis::cmd("ZADD");
            zadd.arg(targets[index].frozen(period));
            for (composite, member) in members {
                zadd.arg(*composite).arg(*member);
            }
            let added: u64 = zadd.query_async(conn).await?;
            counts[index] += added;
        }
        start += PAGE;
    }
}

/// Copies `source`'s statements of `period`, each to its user's target, with their expiry.
async fn copy_statements(conn: &mut Connection, period: &Period, source: &BoardKeys, targets: &[BoardKeys]) -> Result<(), StoreError> {
    for key in conn.scan_slot_of(&source.guard(), &source.statement_pattern(period)).await? {
        let Some(user) = source.statement_user(&key, period) else { continue };
        let (dump, ttl): (Option<Vec<u8>>, i64) =
            (redis::cmd("DUMP").arg(&key).query_async(conn).await?, redis::cmd("PTTL").arg(&key).query_async(conn).await?);
        let Some(dump) = dump else { continue };
        let target = &targets[user_shard(user, targets.len() as u32) as usize];
        let _: () =
            redis::cmd("RESTORE").arg(target.statement(user, period)).arg(ttl.max(0)).arg(dump).arg("REPLACE").query_async(conn).await?;
    }
    Ok(())
}
