//! The Redis side of archiving a finished season: freeze it (one script: close it to events and
//! rename its board aside), page through the frozen board by rank, and release it once the
//! archive is verified. The DynamoDB side is `archive::table`; the job itself is
//! `archive::job`.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::domain::distribution::{CUTOFF_SHARES, Histogram, MAX_BUCKETS};
use crate::domain::guard::{closed_field, emptied_field, live_field, released_field};
use crate::domain::journal::{Entry, Stamp};
use crate::domain::period::{Period, PeriodKind};
use crate::domain::tiebreak::Scale;
use crate::redis::error::StoreError;
use crate::redis::keys::BoardKeys;
use crate::redis::scripts;
use crate::redis::settings::ReplicaWait;
use crate::redis::store::Connection;

/// The season named `id` (`YYYY-MM`, as its period id reads) in `tz`, if `id` names one.
pub fn season_named(id: &str, tz: Tz) -> Option<Period> {
    let first = crate::domain::period::parse_month(id).ok()?;
    let season = Period::on_date(PeriodKind::Season, first, tz);
    (season.id == id).then_some(season)
}

/// What freezing found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frozen {
    /// Members of the period when it was frozen; fixed from then on.
    pub members: u64,
    /// Whether the frozen board still exists (it is released once the archive is verified).
    pub present: bool,
    /// The period's board had members and was gone (expired, evicted, flushed) when it was
    /// frozen: the period is closed, and must not be archived as empty.
    pub lost: bool,
    /// Nothing in Redis says whether the period had members: no board, and its guard holds
    /// neither the period's live nor its emptied field (never played, or flushed with the
    /// guard). The job decides from what its runs saw while the period ran.
    pub unwitnessed: bool,
}

/// Closes `period` to events and renames its board to the frozen key, atomically; a re-run
/// only reports. `fenced`: the board is journaled (the function's clock), so a guard that is not
/// born or is fenced (lost, or being restored), or whose record of the period's set says it
/// exists where it is gone (the guard then fenced), is refused with `BOARD_RESTORING` and
/// nothing else is written: a restore brings the period back first.
pub async fn freeze(conn: &mut Connection, keys: &BoardKeys, period: &Period, fenced: Option<DateTime<Utc>>) -> Result<Frozen, StoreError> {
    freeze_holding(conn, keys, period, fenced, None).await
}

/// `freeze` journaled at `now` by the move that fenced the board `moving` (the fence it holds
/// passes): an old shard the archive had not frozen yet is frozen as the archive's next run
/// would have, and one whose guard records the period's set it lost is fenced lost and refused
/// the same way, so the move stops for a restore instead of closing the period `lost`.
pub async fn freeze_moving(conn: &mut Connection, keys: &BoardKeys, period: &Period, now: DateTime<Utc>) -> Result<Frozen, StoreError> {
    freeze_holding(conn, keys, period, Some(now), Some(crate::domain::guard::MOVING)).await
}

async fn freeze_holding(
    conn: &mut Connection,
    keys: &BoardKeys,
    period: &Period,
    fenced: Option<DateTime<Utc>>,
    held: Option<&str>,
) -> Result<Frozen, StoreError> {
    let (members, present, lost, unwitnessed): (u64, u8, u8, u8) = scripts::FREEZE_SEASON
        .key(keys.guard())
        .key(keys.period(period))
        .key(keys.frozen(period))
        .arg(closed_field(period))
        .arg(live_field(period))
        .arg(emptied_field(period))
        .arg(fenced.map_or(0, |now| now.timestamp_millis()))
        .arg(held.unwrap_or(""))
        .invoke_async(conn)
        .await?;
    Ok(Frozen { members, present: present == 1, lost: lost == 1, unwitnessed: unwitnessed == 1 })
}

/// Whether `period`'s live board has members (a sorted set exists only while it has some).
pub async fn has_members(conn: &mut Connection, keys: &BoardKeys, period: &Period) -> Result<bool, StoreError> {
    Ok(redis::cmd("EXISTS").arg(keys.period(period)).query_async(conn).await?)
}

/// One member of a frozen board with its final standing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// 1-based; unique (equal points are ordered by who reached them first).
    pub rank: u64,
    pub user_id: String,
    pub points: i64,
    pub reached_at: DateTime<Utc>,
}

/// Up to `count` members of the frozen board from 0-based position `start`, best first.
pub async fn frozen_page(
    conn: &mut Connection,
    keys: &BoardKeys,
    period: &Period,
    scale: &Scale,
    start: u64,
    count: u64,
) -> Result<Vec<Standing>, StoreError> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let members: Vec<(String, f64)> =
        redis::cmd("ZREVRANGE").arg(keys.frozen(period)).arg(start).arg(start + count - 1).arg("WITHSCORES").query_async(conn).await?;
    ranked(members, scale, start)
}

/// Entries of a frozen board in rank order from 0-based position `start`, decoded.
fn ranked(entries: Vec<(String, f64)>, scale: &Scale, start: u64) -> Result<Vec<Standing>, StoreError> {
    (start + 1..)
        .zip(entries)
        .map(|(rank, (user_id, composite))| {
            let (points, reached_at) =
                scale.decode(composite).map_err(|e| StoreError::Protocol(format!("member {user_id:?} of a frozen board: {e}")))?;
            Ok(Standing { rank, user_id, points, reached_at })
        })
        .collect()
}

/// The frozen board's histogram for every bucket count a distribution may ask for (1 to
/// `MAX_BUCKETS`), so the archive can answer any of them exactly once Redis is freed. The
/// reads go out at once on the multiplexed connection (the frozen board never changes).
pub async fn frozen_histograms(conn: &Connection, keys: &BoardKeys, period: &Period, scale: &Scale) -> Result<Vec<Histogram>, StoreError> {
    let key = keys.frozen(period);
    let reads = (1..=MAX_BUCKETS).map(|buckets| {
        let (mut conn, key) = (conn.clone(), &key);
        async move { scripts::read_distribution(&mut conn, key, None, scale, buckets, &CUTOFF_SHARES).await }
    });
    futures::future::try_join_all(reads).await
}

/// Members of the frozen board right now.
pub async fn frozen_members(conn: &mut Connection, keys: &BoardKeys, period: &Period) -> Result<u64, StoreError> {
    Ok(redis::cmd("ZCARD").arg(keys.frozen(period)).query_async(conn).await?)
}

/// Deletes the frozen board (in the background: UNLINK) once its archive is verified. The guard
/// field stays, so the period remains closed.
pub async fn release_frozen(conn: &mut Connection, keys: &BoardKeys, period: &Period, statements: bool) -> Result<(), StoreError> {
    // The members' statements go first, read from the frozen board itself: a crash in between
    // leaves the board, and the next run releases the rest (UNLINK of a gone key is a no-op).
    if statements {
        let frozen = keys.frozen(period);
        let mut start = 0u64;
        loop {
            let members: Vec<String> = redis::cmd("ZRANGE").arg(&frozen).arg(start).arg(start + RELEASE_PAGE - 1).query_async(conn).await?;
            if members.is_empty() {
                break;
            }
            let statements: Vec<String> = members.iter().map(|member| keys.statement(member, period)).collect();
            let _: u64 = redis::cmd("UNLINK").arg(&statements).query_async(conn).await?;
            start += RELEASE_PAGE;
        }
        // Users of the season no longer on its board (taken back to 0, corrected away, emptied)
        // keep a statement too: found by name in the board's slot.
        let left = conn.scan_slot_of(&keys.guard(), &keys.statement_pattern(period)).await?;
        for page in left.chunks(RELEASE_PAGE as usize) {
            let _: u64 = redis::cmd("UNLINK").arg(page).query_async(conn).await?;
        }
    }
    let _: u64 = redis::cmd("UNLINK").arg(keys.frozen(period)).query_async(conn).await?;
    Ok(())
}

/// Records `period`'s release once its frozen board and statements are freed
/// (`release_season.lua`), journaled as a `season_release` line at `now`; a season not closed in
/// Redis is closed with `members`. Whether it recorded it (false: recorded before, or the
/// board is lost).
pub async fn record_release(
    conn: &mut Connection,
    keys: &BoardKeys,
    period: &Period,
    members: u64,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let label = format!("{}:{}", period.kind.as_str(), period.id);
    let entry = if keys.journaled() { Entry::SeasonRelease { at: Stamp(now), period: &label }.json() } else { String::new() };
    let recorded: u8 = scripts::RELEASE_SEASON
        .key(keys.guard())
        .key(keys.period(period))
        .key(keys.arrivals(period))
        .key(keys.journal())
        .arg(closed_field(period))
        .arg(live_field(period))
        .arg(emptied_field(period))
        .arg(released_field(period))
        .arg(entry)
        .arg(members)
        .invoke_async(conn)
        .await?;
    Ok(recorded == 1)
}

/// Frees ended instance `period` of the tournament board `keys` once its results are stored
/// (`release_instance.lua`), journaled as a `release` line at `now`; the kept size lives as the
/// instance's board would have (a TTL on `now`'s clock). Whether it freed anything.
pub async fn release_instance(
    conn: &mut Connection,
    keys: &BoardKeys,
    period: &Period,
    now: DateTime<Utc>,
    wait: ReplicaWait,
) -> Result<bool, StoreError> {
    let ttl = keys.ttl(period.ttl_secs(now), now).to_string();
    let entry = if keys.journaled() { Entry::Release { at: Stamp(now), instance: &period.id }.json() } else { String::new() };
    scripts::tournament::release(conn, keys, period, &ttl, &entry, wait).await
}

/// Where the prune of a recurring tournament's records stands (`guard::PRUNED`): the end of the
/// last instance forgotten, if any was.
pub async fn pruned_through(conn: &mut Connection, keys: &BoardKeys) -> Result<Option<DateTime<Utc>>, StoreError> {
    let ms: Option<i64> = redis::cmd("HGET").arg(keys.guard()).arg(crate::domain::guard::PRUNED).query_async(conn).await?;
    Ok(ms.and_then(DateTime::from_timestamp_millis))
}

/// Forgets the records of `instances` (`prune_instances.lua`), the last of which ended at
/// `through`, journaled as a `prune` line at `now`. How many it removed; `None` when the
/// journaled board is lost or fenced (nothing written: the next run, once it is restored).
pub async fn prune_instances(
    conn: &mut Connection,
    keys: &BoardKeys,
    instances: &[Period],
    through: DateTime<Utc>,
    now: DateTime<Utc>,
    wait: ReplicaWait,
) -> Result<Option<u64>, StoreError> {
    let entry = if keys.journaled() { Entry::Prune { at: Stamp(now), through: Stamp(through) }.json() } else { String::new() };
    let fields: Vec<String> = instances.iter().map(closed_field).collect();
    scripts::tournament::prune(conn, keys, &fields, through.timestamp_millis(), &entry, wait).await
}

/// A season of a board spread over shards (docs/scaling.md): each shard's period frozen on its
/// own (its guard closes it to that shard's writes), read as one board.
pub mod shards {
    use super::*;
    use crate::redis::sharded::{self, ShardSet};

    fn frozen_sets(shards: &[BoardKeys], period: &Period) -> Vec<ShardSet> {
        shards.iter().map(|keys| ShardSet { set: keys.frozen(period), guard: None, kept: None, closed: None }).collect()
    }

    /// Freezes every shard; what each found.
    pub async fn freeze(
        conn: &mut Connection,
        shards: &[BoardKeys],
        period: &Period,
        fenced: Option<DateTime<Utc>>,
    ) -> Result<Vec<Frozen>, StoreError> {
        let mut frozen = Vec::with_capacity(shards.len());
        for keys in shards {
            frozen.push(super::freeze(conn, keys, period, fenced).await?);
        }
        Ok(frozen)
    }

    /// `frozen_page` of the whole board: each shard read from where the page starts in it.
    pub async fn page(
        conn: &mut Connection,
        shards: &[BoardKeys],
        period: &Period,
        scale: &Scale,
        start: u64,
        count: u64,
    ) -> Result<Vec<Standing>, StoreError> {
        if let [keys] = shards {
            return frozen_page(conn, keys, period, scale, start, count).await;
        }
        let entries = crate::redis::sharded_window::window(conn, &frozen_sets(shards, period), start, count).await?;
        ranked(entries, scale, start)
    }

    /// `frozen_histograms` of the whole board.
    pub async fn histograms(conn: &Connection, shards: &[BoardKeys], period: &Period, scale: &Scale) -> Result<Vec<Histogram>, StoreError> {
        if let [keys] = shards {
            return frozen_histograms(conn, keys, period, scale).await;
        }
        let sets = frozen_sets(shards, period);
        let reads = (1..=MAX_BUCKETS).map(|buckets| sharded::distribution(conn, &sets, scale, buckets, &CUTOFF_SHARES));
        futures::future::try_join_all(reads).await
    }

    /// Members of every shard's frozen board right now.
    pub async fn members(conn: &mut Connection, shards: &[BoardKeys], period: &Period) -> Result<u64, StoreError> {
        let mut total = 0;
        for keys in shards {
            total += frozen_members(conn, keys, period).await?;
        }
        Ok(total)
    }

    /// `release_frozen` of every shard; a season's (not a tournament instance's, which
    /// `release_instance` records) then recorded on each (`record_release`), `members` being the
    /// season's archived total and the time.
    pub async fn release(
        conn: &mut Connection,
        shards: &[BoardKeys],
        period: &Period,
        statements: bool,
        season: Option<(u64, DateTime<Utc>)>,
    ) -> Result<(), StoreError> {
        for (index, keys) in shards.iter().enumerate() {
            release_frozen(conn, keys, period, statements).await?;
            if let Some((total, now)) = season {
                // Counted once over the shards, as the freeze's counts are summed.
                super::record_release(conn, keys, period, if index == 0 { total } else { 0 }, now).await?;
            }
        }
        Ok(())
    }
}

/// Members whose statements one UNLINK releases.
const RELEASE_PAGE: u64 = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seasons_are_named_by_month_only() {
        let october = season_named("2026-10", chrono_tz::Asia::Shanghai).unwrap();
        assert_eq!(october.end.unwrap().to_rfc3339(), "2026-11-01T00:00:00+08:00");
        for bad in ["2026-13", "2026-1", "2026-10-01", "october", "", "2026-00", "+2026-10", "+262142-12", "9999-12"] {
            assert_eq!(season_named(bad, chrono_tz::UTC), None, "{bad:?} accepted");
        }
    }
}
