//! The typed wrapper of `apply_event.lua`: a chunk of one board's events in one call, and the
//! compact marker that makes each of them exactly once.
//!
//! A marker is one field of a small hash: the event id's 8-byte digest → the payload's 4-byte
//! fingerprint and a receipt of what the event did (a few characters). The hashes are bucketed
//! by the board's local day (on the function's clock) and sharded by the id's digest, so each
//! stays small enough for Redis's compact listpack encoding (about 20 bytes a marker, against
//! about 300 for a string key with its own TTL); a bucket expires as a whole at the end of the
//! next local day, so every id is remembered for at least 24 hours. A duplicate is answered
//! from the receipt and the member's standing now, read in the same call; the bucket that held
//! it names the day an event sent without `occurred_at` landed on.

use chrono::{DateTime, Duration, NaiveDate, Utc};
use chrono_tz::Tz;
use sha2::{Digest, Sha256};

use super::key_list::KeyList;
use super::pack::Block;
use super::receipt::{Decision, Receipt};
use super::{APPLY_EVENT, ApplyReply, BoardOutcome, PeriodStanding, Status};
use crate::domain::period::{EventTimeError, Period, PeriodKind, ttl_secs};
use crate::domain::scoring::{BoardPlan, Ledger, Mode, RateWindow};
use crate::domain::tiebreak;
use crate::redis::error::StoreError;
use crate::redis::keys::BoardKeys;
use crate::redis::settings::ReplicaWait;
use crate::redis::store::{Connection, ScriptCall};

/// Marker hashes per bucket. A day's markers of one board spread over this many hashes; each
/// stays listpack-encoded up to Redis's `hash-max-listpack-entries` (512 by default), i.e. up
/// to about 520,000 events a day on one board (see docs on memory for larger boards).
pub const MARKER_SHARDS: u16 = 1024;
/// The field a marker bucket created by a journaled write holds beside its markers (never a
/// marker's: those are 8 bytes), so a write tells a lost bucket from a new one
/// (prelude_markers.lua).
pub const MARKER_HELD: &str = "#";
/// Most events of one board in one script call: the call holds Redis for about 25 µs an event.
pub const CHUNK: usize = 100;
/// Day ledgers outlive their day by this much (~31 days of history).
pub const LEDGER_RETENTION_SECS: i64 = 30 * 24 * 3600;
const DAY_SECS: i64 = 24 * 3600;
/// How far ahead of ours another function's clock may run: only this close to the end of the
/// local day can the next day's marker bucket already hold an id (written by that clock), so
/// only then is it read (a read less per event the rest of the day).
pub const MARKER_CLOCK_SKEW_SECS: i64 = 300;

/// Where an event id's marker lives on a board: its field and its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerSlot {
    pub field: [u8; 8],
    pub shard: u16,
}

impl MarkerSlot {
    pub fn of(event_id: &str) -> Self {
        let digest = Sha256::digest(event_id.as_bytes());
        let field = digest[..8].try_into().expect("a SHA-256 digest has 32 bytes");
        Self { field, shard: u16::from_be_bytes([digest[8], digest[9]]) % MARKER_SHARDS }
    }
}

/// The marker bucket of `now` on a board in `tz`: its local day (days since 1970-01-01), the
/// day's first instant, and how long the bucket is kept from now: to the end of the next local
/// day, so at least 24 hours.
pub fn marker_bucket(now: DateTime<Utc>, tz: Tz) -> MarkerBucket {
    let today = Period::containing(PeriodKind::Day, now, tz);
    let start = today.start.expect("a day has a start").with_timezone(&Utc);
    let end = today.end.expect("a day has an end").with_timezone(&Utc);
    // The next local day's own end, not end + 24 h: a day of 23 or 25 hours (daylight saving)
    // must not cut the window short.
    let tomorrow = Period::containing(PeriodKind::Day, end, tz);
    let next_end = tomorrow.end.expect("a day has an end").with_timezone(&Utc);
    let day = now.with_timezone(&tz).date_naive().signed_duration_since(NaiveDate::default()).num_days();
    let near_end = (end - now).num_seconds() <= MARKER_CLOCK_SKEW_SECS;
    MarkerBucket { day, start, ttl_secs: (next_end - now).num_seconds(), near_end }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerBucket {
    pub day: i64,
    pub start: DateTime<Utc>,
    pub ttl_secs: i64,
    /// Within `MARKER_CLOCK_SKEW_SECS` of the local day's end.
    pub near_end: bool,
}

impl MarkerBucket {
    /// The days whose buckets an id is looked up in, as the scripts take them: today (where a
    /// new id is written), the day before, and the day after or `None` (index 0, not read)
    /// unless the day is near its end.
    pub fn read_days(&self) -> [Option<i64>; 3] {
        [Some(self.day), Some(self.day - 1), self.near_end.then_some(self.day + 1)]
    }
}

/// Each of `bucket`'s read days as a key index of the call (0 for a day not read), then its day
/// and `shard` (the guard's record of buckets, prelude_markers.lua).
pub(super) fn bucket_args(call: &mut ScriptCall<'_>, key_list: &mut KeyList, keys: &BoardKeys, bucket: &MarkerBucket, shard: u16) {
    for day in bucket.read_days() {
        let index = day.map_or(0, |day| key_list.add(call, keys.marker_bucket(day, shard)));
        call.arg(index);
    }
    call.arg(bucket.day).arg(shard);
}

/// The field a ledger entry (`action|target`) is stored under: 8 bytes of its digest, a third
/// of a typical entry's bytes, since ledger fields are most of an active member's memory.
/// Empty for no entry.
pub(super) fn ledger_field(entry: &str) -> Vec<u8> {
    if entry.is_empty() { Vec::new() } else { Sha256::digest(entry.as_bytes())[..8].to_vec() }
}

/// The 4 bytes of a payload fingerprint (hex) that a marker keeps.
pub(super) fn short_fingerprint(fingerprint: &str) -> Vec<u8> {
    (0..4).map(|i| fingerprint.get(2 * i..2 * i + 2).and_then(|byte| u8::from_str_radix(byte, 16).ok()).unwrap_or(0)).collect()
}

/// One board's share of one event.
#[derive(Debug, Clone, Copy)]
pub struct BoardEvent<'a> {
    pub plan: &'a BoardPlan<'a>,
    /// Refuses the event unless its id was already applied here.
    pub first_delivery: Option<EventTimeError>,
    pub event_id: &'a str,
    pub member: &'a str,
    /// The payload fingerprint (hex).
    pub fingerprint: &'a str,
    /// Whether the event named its time (`occurred_at`); if not, it landed at `now`.
    pub timed: bool,
    /// A take-back that finds nothing to take back is answered `Deferred`, nothing written (a
    /// queue's delivery, which may overtake its give's).
    pub defer_orphan_take_back: bool,
    /// The event's journal entry (`domain::journal::Entry`), "" when the journal is off.
    pub journal_entry: &'a str,
    /// When the write happens (the function's clock, or when SQS took an untimed message):
    /// its marker bucket's day, its rate window and the clock its TTLs count from.
    pub now: DateTime<Utc>,
}

/// Applies a chunk of one board's events (at most `CHUNK`) in order: dedupe, ledgers, caps,
/// every period board, TTLs and the new ranks, atomically, in one round trip (with `wait` for
/// replicas in the same one). One reply per event.
pub async fn apply_events(
    conn: &mut Connection,
    keys: &BoardKeys,
    events: &[BoardEvent<'_>],
    wait: ReplicaWait,
) -> Result<Vec<ApplyReply>, StoreError> {
    let Some(first) = events.first() else {
        return Ok(Vec::new());
    };
    let tz = first.plan.board.timezone;
    // Each event's marker goes to the bucket of its own day; the latest event's bucket lives
    // longest, so its TTL covers every bucket the chunk creates.
    let buckets: Vec<MarkerBucket> = events.iter().map(|event| marker_bucket(event.now, tz)).collect();
    let (latest, bucket) = events.iter().map(|event| event.now).zip(&buckets).max_by_key(|(now, _)| *now).expect("a chunk has an event");
    let mut call = ScriptCall::new(&APPLY_EVENT);
    let mut key_list = KeyList::new(&mut call, keys.guard());
    call.arg(events.len()).arg(keys.ttl(bucket.ttl_secs, latest));
    let journal = key_list.add(&mut call, keys.journal());
    call.arg(journal);
    let notices = first.plan.board.notify.as_ref().filter(|_| keys.noticed()).map(|_| key_list.add(&mut call, keys.notices()));
    call.arg(notices.unwrap_or(0));
    for (event, bucket) in events.iter().zip(&buckets) {
        let block = event_block(&mut call, &mut key_list, keys, event, bucket, event.now);
        call.arg(block.into_bytes());
    }
    let reply: Vec<String> = conn.run_script(&call, wait).await?;
    let mut values = reply.into_iter();
    let read =
        events.iter().zip(&buckets).map(|(event, bucket)| read_reply(event, &mut values, bucket.start)).collect::<Result<Vec<_>, _>>()?;
    let mut replies = Vec::with_capacity(read.len());
    for (event, read) in events.iter().zip(read) {
        replies.push(match read {
            Read::Done(reply) => reply,
            Read::LandedElsewhere { receipt, periods } => {
                let standings: Vec<(i64, u64)> = standings(conn, keys, event.member, &periods)
                    .await?
                    .into_iter()
                    .map(|(composite, rank)| (composite.map_or(0, tiebreak::points_of), rank))
                    .collect();
                ApplyReply::Duplicate(outcome(&receipt, &periods, &standings))
            }
        });
    }
    Ok(replies)
}

/// One event's block of `apply_event.lua` (its header lists the layout), its keys added to
/// the call.
fn event_block(
    call: &mut ScriptCall<'_>,
    key_list: &mut KeyList,
    keys: &BoardKeys,
    event: &BoardEvent<'_>,
    bucket: &MarkerBucket,
    now: DateTime<Utc>,
) -> Block {
    let plan = event.plan;
    let slot = MarkerSlot::of(event.event_id);
    let day_ledger = keys.day_ledger(event.member, &plan.day.id);
    let day_ledger_ttl = ttl_secs(plan.day.end.map(|end| end.timestamp() + LEDGER_RETENTION_SECS), now);
    let (ledger, ledger_ttl) = match plan.ledger {
        Ledger::Day | Ledger::None => (day_ledger.clone(), day_ledger_ttl),
        Ledger::Lifetime => (keys.lifetime_ledger(event.member), 0),
        Ledger::Target => (keys.target_ledger(), 0),
    };
    let (cap_field, cap) = plan.cap.clone().unwrap_or_default();
    let rate = plan.rate_limit.unwrap_or(RateWindow { max: 0, window_ms: 0, now_ms: now.timestamp_millis() });
    let mut block = Block::default();
    for day in bucket.read_days() {
        block.index(day.map_or(0, |day| key_list.add(call, keys.marker_bucket(day, slot.shard))));
    }
    block
        .number(bucket.day)
        .index(usize::from(slot.shard))
        .fixed(&slot.field)
        .fixed(&short_fingerprint(event.fingerprint))
        .text(event.member)
        .byte(u8::from(plan.mode == Mode::Give))
        .text(plan.points.to_string())
        .number(plan.points)
        .index(key_list.add(call, ledger))
        .text(ledger_field(&plan.ledger_field))
        .text(&plan.ledger_field)
        .index(key_list.add(call, day_ledger))
        .text(cap_field)
        .number(cap)
        .text(keys.ttl(ledger_ttl, now).to_string())
        .text(keys.ttl(day_ledger_ttl, now).to_string())
        .text(event.first_delivery.map_or("", |refusal| refusal.code()))
        .index(key_list.add(call, keys.rate_log(event.member, &plan.rule.action)))
        .number(i64::from(rate.max))
        .number(rate.window_ms)
        .number(rate.now_ms)
        .number(plan.time_part)
        .byte(u8::try_from(plan.periods.len()).expect("a board has a handful of periods"))
        .text(&plan.rule.action)
        .byte(u8::from(event.defer_orphan_take_back))
        .text(event.journal_entry);
    let league = plan.board.league.as_ref().and_then(|league| {
        let at = plan.periods.iter().position(|p| p.kind == league.period)?;
        Some((league, &plan.periods[at], at + 1))
    });
    block.byte(league.map_or(0, |(_, _, at)| u8::try_from(at).expect("a board has a handful of periods")));
    let notify = plan.board.notify.as_ref().filter(|_| keys.noticed());
    block.text(if notify.is_some() { event.event_id } else { "" });
    for period in &plan.periods {
        let board = key_list.add(call, keys.period(period));
        let statement = if plan.board.statements { key_list.add(call, keys.statement(event.member, period)) } else { 0 };
        let top = notify.map_or(0, |notify| notify_top(notify, period));
        block
            .index(board)
            .text(period.kind.as_str())
            .text(&period.id)
            .text(keys.ttl(period.ttl_secs(now), now).to_string())
            .index(statement)
            .byte(top)
            .index(if top > 0 { key_list.add(call, keys.arrivals(period)) } else { 0 });
    }
    if let Some((league, period, _)) = league {
        super::league::league_keys(&mut block, call, key_list, keys, league, period);
    }
    block
}

/// The top watched on `period`'s board, as the scripts take it (`MAX_TOP` fits a byte).
pub(super) fn notify_top(notify: &crate::domain::notify::Notify, period: &Period) -> u8 {
    u8::try_from(notify.top_of(period.kind)).expect("validated: top <= MAX_TOP")
}

/// One event's reply, or a duplicate whose first delivery landed in other periods than the
/// retry names (an event without `occurred_at`, retried on another day): its standing there
/// is read separately.
enum Read {
    Done(ApplyReply),
    LandedElsewhere { receipt: Receipt, periods: Vec<Period> },
}

/// The member's composite and 1-based rank (0: absent) in each of `periods`, in one pipeline:
/// the standing of a duplicate whose first delivery landed in other periods than its retry's.
pub(super) async fn standings(
    conn: &mut Connection,
    keys: &BoardKeys,
    member: &str,
    periods: &[Period],
) -> Result<Vec<(Option<f64>, u64)>, StoreError> {
    let mut pipe = redis::pipe();
    for period in periods {
        pipe.zscore(keys.period(period), member).zrevrank(keys.period(period), member);
    }
    let values: Vec<Option<f64>> = pipe.query_async(conn).await?;
    Ok(values.chunks(2).map(|pair| (pair[0], pair.get(1).copied().flatten().map_or(0, |rank| rank as u64 + 1))).collect())
}

/// One event's reply from the script's flat answer: status, detail, then points and rank for
/// each period. `today` is the first instant of the local day of the call's marker bucket.
fn read_reply(event: &BoardEvent<'_>, values: &mut impl Iterator<Item = String>, today: DateTime<Utc>) -> Result<Read, StoreError> {
    let protocol = |what: &str| StoreError::Protocol(format!("apply_event: {what}"));
    let (status, detail) = values.next().zip(values.next()).ok_or_else(|| protocol("reply too short"))?;
    let mut standings = Vec::with_capacity(event.plan.periods.len());
    for _ in &event.plan.periods {
        let (points, rank) = values.next().zip(values.next()).ok_or_else(|| protocol("reply too short"))?;
        let points: i64 = points.parse().map_err(|_| protocol("points"))?;
        let rank: u64 = rank.parse().map_err(|_| protocol("rank"))?;
        standings.push((points, rank));
    }
    let outside = event.first_delivery.map(|refusal| refusal.code());
    let status = Status::parse("apply_event", &status, outside)?;
    let receipt = |detail: &str| Receipt::parse(detail).ok_or_else(|| protocol(&format!("receipt {detail:?}")));
    let periods = &event.plan.periods;
    let reply = match status {
        Status::OutsideWindow => ApplyReply::OutsideWindow(event.first_delivery.expect("parsed only with a refusal")),
        Status::New => ApplyReply::New(outcome(&receipt(&detail)?, periods, &standings)),
        Status::Duplicate => {
            let (landed, first) = duplicate_of(&detail, event.timed, today, periods.iter(), event.plan.board.timezone)
                .ok_or_else(|| protocol(&format!("duplicate {detail:?}")))?;
            let receipt = receipt(first)?;
            if let Some(periods) = landed {
                return Ok(Read::LandedElsewhere { receipt, periods });
            }
            ApplyReply::Duplicate(outcome(&receipt, periods, &standings))
        }
        Status::Conflict => ApplyReply::Conflict,
        Status::OutOfRange => ApplyReply::OutOfRange,
        Status::Banned => ApplyReply::Banned,
        Status::PeriodClosed => ApplyReply::PeriodClosed(detail),
        Status::RateLimited => ApplyReply::RateLimited(detail.parse().map_err(|_| protocol(&format!("retry-after {detail:?}")))?),
        Status::Deferred => ApplyReply::Deferred,
        Status::Stale | Status::Seat(_) => return Err(status.unexpected("apply_event")),
    };
    Ok(Read::Done(reply))
}

/// A duplicate's detail (`<bucket index><receipt>`, see `marker_seen` in prelude.lua): the
/// periods its first delivery landed in when they are not `periods` (sent without a time, it
/// landed on its marker's day), and its receipt. `None` for a malformed detail.
pub(super) fn duplicate_of<'d, 'p>(
    detail: &'d str,
    timed: bool,
    today: DateTime<Utc>,
    periods: impl Iterator<Item = &'p Period> + Clone,
    tz: Tz,
) -> Option<(Option<Vec<Period>>, &'d str)> {
    let days_away = match detail.get(..1)? {
        "0" => 0,
        "1" => -1,
        "2" => 1,
        _ => return None,
    };
    let receipt = &detail[1..];
    if timed || days_away == 0 {
        return Some((None, receipt));
    }
    // Midday of the marker's local day names the same periods whatever the day's length.
    let landed = today + Duration::seconds(days_away * DAY_SECS + DAY_SECS / 2);
    let first: Vec<Period> = periods.clone().map(|p| Period::containing(p.kind, landed, tz)).collect();
    let moved = first.iter().ne(periods);
    Some((moved.then_some(first), receipt))
}

/// What the event did on the board, with the member's standing in each period.
fn outcome(receipt: &Receipt, periods: &[Period], standings: &[(i64, u64)]) -> BoardOutcome {
    let applied = receipt.decision == Decision::Applied;
    BoardOutcome {
        applied,
        delta: receipt.delta,
        reason: receipt.decision.reason().map(str::to_owned),
        capped: receipt.capped,
        periods: periods
            .iter()
            .zip(standings)
            .enumerate()
            .map(|(i, (period, &(score, rank)))| PeriodStanding {
                period: period.kind.as_str().to_owned(),
                period_id: period.id.clone(),
                score: Some(score),
                delta: if applied { receipt.change(i) } else { 0 },
                rank: (rank > 0).then_some(rank),
            })
            .collect(),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_bucket_is_the_boards_local_day_kept_to_the_end_of_the_next() {
        let shanghai = chrono_tz::Asia::Shanghai;
        for (at, day) in
            [("2026-11-23T16:00:00Z", "2026-11-24"), ("2026-11-24T04:00:00Z", "2026-11-24"), ("2026-11-24T15:59:59Z", "2026-11-24")]
        {
            let now: DateTime<Utc> = at.parse().unwrap();
            let bucket = marker_bucket(now, shanghai);
            let date: NaiveDate = day.parse().unwrap();
            assert_eq!(bucket.day, date.signed_duration_since(NaiveDate::default()).num_days(), "{at}");
            assert_eq!(bucket.start, "2026-11-23T16:00:00Z".parse::<DateTime<Utc>>().unwrap());
            assert_eq!(now + Duration::seconds(bucket.ttl_secs), "2026-11-25T16:00:00Z".parse::<DateTime<Utc>>().unwrap(), "{at}");
            assert!((DAY_SECS + 1..=2 * DAY_SECS).contains(&bucket.ttl_secs), "{at}");
        }
        // A 23-hour local day (spring forward) still keeps a marker at least 24 hours.
        let new_york = chrono_tz::America::New_York;
        let bucket = marker_bucket("2026-03-08T23:00:00-04:00".parse().unwrap(), new_york);
        assert!(bucket.ttl_secs > DAY_SECS);
    }

    #[test]
    fn the_next_days_bucket_is_read_only_near_the_end_of_the_day() {
        let shanghai = chrono_tz::Asia::Shanghai;
        let days = |at: &str| marker_bucket(at.parse().unwrap(), shanghai).read_days();
        let day = marker_bucket("2026-11-22T04:00:00Z".parse().unwrap(), shanghai).day;
        assert_eq!(days("2026-11-22T04:00:00Z"), [Some(day), Some(day - 1), None]);
        assert_eq!(days("2026-11-22T15:54:59Z"), [Some(day), Some(day - 1), None], "5 min 1 s before local midnight");
        assert_eq!(days("2026-11-22T15:55:00Z"), [Some(day), Some(day - 1), Some(day + 1)], "5 min before");
        assert_eq!(days("2026-11-22T15:59:59Z"), [Some(day), Some(day - 1), Some(day + 1)]);
        assert_eq!(days("2026-11-22T16:00:00Z"), [Some(day + 1), Some(day), None], "the next day");
    }

    #[test]
    fn marker_slots_are_stable_and_spread() {
        assert_eq!(MarkerSlot::of("e-1"), MarkerSlot::of("e-1"));
        assert_ne!(MarkerSlot::of("e-1").field, MarkerSlot::of("e-2").field);
        let shards: std::collections::HashSet<u16> = (0..10_000).map(|i| MarkerSlot::of(&format!("e-{i}")).shard).collect();
        assert_eq!(shards.len(), usize::from(MARKER_SHARDS), "10,000 ids reach every shard");
    }

    #[test]
    fn a_short_fingerprint_is_the_first_four_bytes() {
        assert_eq!(short_fingerprint("0aff10ee99"), vec![0x0a, 0xff, 0x10, 0xee]);
    }
}
