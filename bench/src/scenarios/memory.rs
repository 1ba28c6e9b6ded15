//! Bytes per active member per day (scenario 7): Redis memory after a realistic day of events
//! for 5,000 users through the real write path (boards, ledgers, dedupe markers), against a
//! bare sorted set of the same members — and, for the activity board alone (loaded first, on
//! its own), against what seed 001's design (the port) keeps for the same activity.
//!
//! Measured twice: the growth of `INFO memory` `used_memory` across each load (everything,
//! including the main and expires dictionaries) and `MEMORY USAGE` of every key, by kind.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::Utc;
use futures::future::try_join_all;
use standings::domain::config::Config;
use standings::domain::scoring::Event;
use standings::redis::scripts::MARKER_SHARDS;
use standings::redis::store::Connection;
use standings::services::ingestion::{Ingestor, MAX_BATCH};

use crate::harness::{Bench, BenchError, Report, Table, Target, grouped, scan, zadd_all};
use crate::seed001::{Activity, SeedKeys, add_activity_score};

const USERS: u64 = 5_000;
/// Fields per bucket in the marker measurement at scale, as a multiple of the server's
/// `hash-max-listpack-entries` (512 by default: 524,288 events a board-day): past it, so every
/// bucket has left the listpack encoding.
const SCALE_OVER_LISTPACK: f64 = 1.5;
/// Concurrent clients replaying the activity through the seed port.
const SEED_CLIENTS: u64 = 25;

/// One user's day: 6 page views, 2 praises, a collect, a comment and a follow on the `activity`
/// board (plus a publish for every tenth user); 2 learning sessions, a Q&A and a note on the
/// `points` board.
fn day_of(user: u64) -> Vec<Event> {
    let article = |k: u64| format!("article-{}", (user * 31 + k) % 2_000);
    let mut actions: Vec<(&str, Option<String>)> = (0..6).map(|k| ("page_view", Some(format!("/articles/{}", article(k))))).collect();
    actions.extend([
        ("praise", Some(article(0))),
        ("praise", Some(article(1))),
        ("collect", Some(article(2))),
        ("comment", Some(article(3))),
        ("follow", Some(format!("u{}", (user + 1) % USERS))),
    ]);
    if user.is_multiple_of(10) {
        actions.push(("publish", Some(format!("article-u{user}"))));
    }
    actions.extend([("learning", None), ("learning", None), ("qa", None), ("note", None)]);
    actions
        .into_iter()
        .enumerate()
        .map(|(n, (action, target))| Event {
            event_id: format!("m-{user}-{n}"),
            user_id: format!("u{user}"),
            action: action.into(),
            target,
            active: true,
            occurred_at: None,
            points: None,
        })
        .collect()
}

/// The same activity as seed 001 sees it (its design has no points board).
fn seed_activity(event: &Event) -> Option<Activity<'_>> {
    let target = event.target.as_deref()?;
    Some(match event.action.as_str() {
        "page_view" => Activity::Path(target),
        "praise" => Activity::Praise(target),
        "collect" => Activity::Collect(target),
        "comment" => Activity::Rate(target),
        "follow" => Activity::Follow(target),
        "publish" => Activity::PublishArticle(target),
        _ => return None,
    })
}

async fn used_memory(conn: &mut Connection) -> Result<i64, BenchError> {
    let info: String = redis::cmd("INFO").arg("memory").query_async(conn).await?;
    info.lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| "INFO memory has no used_memory".into())
}

/// `MEMORY USAGE` of every key matching `pattern`, summed by `kind(key)`: (keys, bytes).
async fn usage_by_kind(
    conn: &mut Connection,
    pattern: &str,
    kind: fn(&str) -> &'static str,
) -> Result<BTreeMap<&'static str, (u64, u64)>, BenchError> {
    let keys = scan(conn, pattern).await?;
    let mut usage = BTreeMap::new();
    for chunk in keys.chunks(1_000) {
        let mut pipe = redis::pipe();
        for key in chunk {
            pipe.cmd("MEMORY").arg("USAGE").arg(key).arg("SAMPLES").arg(0);
        }
        let bytes: Vec<u64> = pipe.query_async(conn).await?;
        for (key, bytes) in chunk.iter().zip(bytes) {
            let entry = usage.entry(kind(key)).or_insert((0, 0));
            entry.0 += 1;
            entry.1 += bytes;
        }
    }
    Ok(usage)
}

/// How many markers the buckets under `pattern` hold (their fields).
async fn marker_count(conn: &mut Connection, pattern: &str) -> Result<u64, BenchError> {
    let buckets = scan(conn, pattern).await?;
    let mut pipe = redis::pipe();
    for bucket in &buckets {
        pipe.hlen(bucket);
    }
    let lengths: Vec<u64> = pipe.query_async(conn).await?;
    Ok(lengths.iter().sum())
}

fn standings_kind(key: &str) -> &'static str {
    if key.contains(":z:") {
        "boards (sorted sets)"
    } else if key.contains(":evt:") || key.contains(":mark:") {
        "dedupe markers"
    } else if key.contains(":ledger:") || key.contains(":once:") || key.ends_with(":targets") {
        "ledgers"
    } else if key.contains(":stmt:") {
        "statements (opt-in; on `points`)"
    } else {
        "other"
    }
}

/// Seed 001's boards are `activity_rank_<date>`; its ledgers `activity_rank_<user><date>`.
fn seed_kind(key: &str) -> &'static str {
    match key.rsplit_once("activity_rank_") {
        Some((_, date)) if date.bytes().all(|b| b.is_ascii_digit()) => "seed 001 boards",
        _ => "seed 001 ledgers",
    }
}

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let mut conn = bench.connection().await?;
    let events: Vec<Event> = (0..USERS).flat_map(day_of).collect();
    let ingestor = Ingestor::new(Arc::new(Config::default_boards()), bench.keys.clone(), bench.store.clone());

    // The activity board's events first, on their own: its used_memory growth compares with
    // the seed's, which only has that board.
    let (activity_events, other_events): (Vec<Event>, Vec<Event>) = events.iter().cloned().partition(|e| seed_activity(e).is_some());
    let before = used_memory(&mut conn).await?;
    record_all(&ingestor, &activity_events).await?;
    let activity_bytes = used_memory(&mut conn).await? - before;
    record_all(&ingestor, &other_events).await?;
    let standings_bytes = used_memory(&mut conn).await? - before;
    let standings_usage = usage_by_kind(&mut conn, &bench.keys.all_pattern(), standings_kind).await?;
    let activity_usage = usage_by_kind(&mut conn, &format!("{}:v1:{{activity}}:*", bench.keys.prefix()), standings_kind).await?;
    let markers = marker_count(&mut conn, &format!("{}:v1:*:evt:*", bench.keys.prefix())).await?;

    let seed_keys = Arc::new(SeedKeys::new(bench.keys.prefix()));
    let before = used_memory(&mut conn).await?;
    let events = Arc::new(events);
    try_join_all((0..SEED_CLIENTS).map(|client| {
        let (events, seed_keys, store) = (events.clone(), seed_keys.clone(), bench.client());
        async move {
            let mut conn = store?.connection().await?;
            for event in events.iter().skip(client as usize).step_by(SEED_CLIENTS as usize) {
                if let Some(activity) = seed_activity(event) {
                    add_activity_score(&mut conn, &seed_keys, &event.user_id, &activity, Utc::now()).await?;
                }
            }
            Ok::<_, BenchError>(())
        }
    }))
    .await?;
    let seed_bytes = used_memory(&mut conn).await? - before;
    let seed_usage = usage_by_kind(&mut conn, &format!("{}:seed001:*", bench.keys.prefix()), seed_kind).await?;

    let bare_key = format!("{}:bare", bench.keys.prefix());
    let before = used_memory(&mut conn).await?;
    zadd_all(&mut conn, &bare_key, (0..USERS).map(|user| ((user % 1_000) as f64, format!("u{user}")))).await?;
    let bare_bytes = used_memory(&mut conn).await? - before;
    let bare_usage: u64 = redis::cmd("MEMORY").arg("USAGE").arg(&bare_key).arg("SAMPLES").arg(0).query_async(&mut conn).await?;

    let per_member = |bytes: u64| bytes as f64 / USERS as f64;
    let mut table = Table::new(&["what", "keys", "MEMORY USAGE", "bytes / member"]);
    let mut add = |label: String, (keys, bytes): (u64, u64)| {
        table.row(vec![label, keys.to_string(), bytes.to_string(), format!("{:.0}", per_member(bytes))])
    };
    for (kind, usage) in &standings_usage {
        add(format!("Standings: {kind}"), *usage);
    }
    let sum = |usage: &BTreeMap<&'static str, (u64, u64)>| usage.values().fold((0, 0), |(k, b), (keys, bytes)| (k + keys, b + bytes));
    add("**Standings, total**".into(), sum(&standings_usage));
    add("Standings, `activity` board only".into(), sum(&activity_usage));
    for (kind, usage) in &seed_usage {
        add((*kind).to_owned(), *usage);
    }
    add("**seed 001, activity**".into(), sum(&seed_usage));
    add("**bare ZSET of the members**".into(), (1, bare_usage));

    let mut growth = Table::new(&["load", "used_memory growth", "bytes / member"]);
    for (label, bytes) in [
        ("Standings, total", standings_bytes),
        ("Standings, `activity` board only", activity_bytes),
        ("seed 001, activity", seed_bytes),
        ("bare ZSET", bare_bytes),
    ] {
        growth.row(vec![label.into(), bytes.to_string(), format!("{:.0}", per_member(bytes.max(0) as u64))]);
    }
    let over_bare = standings_bytes as f64 / bare_bytes as f64;
    let activity_over_seed = sum(&activity_usage).1 as f64 / sum(&seed_usage).1 as f64;
    let activity_growth_over_seed = activity_bytes as f64 / seed_bytes as f64;
    let marker_bytes = standings_usage.get("dedupe markers").map_or(0, |(_, bytes)| *bytes);
    let scale = markers_at_scale(bench, &mut conn).await?;
    Ok(Report {
        title: format!("memory: bytes per active member per day, {} users (scenario 7)", grouped(USERS)),
        setup: format!(
            "One day of {} events: per user 6 page views, 2 praises, a collect, a comment, a follow (+ a publish for every tenth \
             user) on `activity` (day + month boards), 2 learning, a Q&A and a note on `points` (season board, which keeps statements), through \
             `Ingestor::record_batch`. The activity events are replayed through the seed 001 port; the bare ZSET holds the same \
             {} members with small integer scores.",
            grouped(events.len() as u64),
            grouped(USERS)
        ),
        tables: vec![table, growth],
        notes: vec![
            format!(
                "Standings / bare ZSET (used_memory growth): **{over_bare:.2}**; Standings `activity` / seed 001 (MEMORY USAGE): \
                 **{activity_over_seed:.2}**"
            ),
            format!("Standings `activity` / seed 001 (used_memory growth): **{activity_growth_over_seed:.2}**"),
            format!(
                "Statements (kept because `points` sets `statements = true`; the `activity` board keeps none): {:.0} bytes per \
                 member with a statement, by MEMORY USAGE.",
                standings_usage.get("statements (opt-in; on `points`)").map_or(0.0, |(keys, bytes)| *bytes as f64 / (*keys).max(1) as f64)
            ),
            format!(
                "Dedupe markers: {markers} (one per event and board) in {} hashes ({MARKER_SHARDS} shards per local day and board), \
                 {:.1} bytes a marker by MEMORY USAGE, kept to the end of the next local day.",
                standings_usage.get("dedupe markers").map_or(0, |(keys, _)| *keys),
                marker_bytes as f64 / markers.max(1) as f64
            ),
            format!(
                "Dedupe markers at scale: {} page views on one board in one local day ({:.0} per bucket, past the {} of \
                 `hash-max-listpack-entries`): buckets `{}`, **{:.1} bytes a marker** by MEMORY USAGE ({:.1} by used_memory growth).",
                grouped(scale.events),
                scale.events as f64 / f64::from(MARKER_SHARDS),
                scale.listpack_entries,
                scale.encoding,
                scale.usage_per_marker,
                scale.growth_per_marker
            ),
        ],
        targets: vec![
            Target::at_most("memory per active member", "bare ZSET", over_bare, 2.0),
            Target::at_most("memory per active member, `activity`", "seed 001", activity_over_seed, 1.0),
        ],
    })
}

/// What one board-day's markers cost once their buckets outgrow the listpack encoding.
struct MarkersAtScale {
    events: u64,
    listpack_entries: u64,
    encoding: String,
    usage_per_marker: f64,
    growth_per_marker: f64,
}

/// Page views (distinct users and pages, so each applies) on the `activity` board, enough to
/// take every bucket past `hash-max-listpack-entries`, under a prefix of their own, through
/// the real write path.
async fn markers_at_scale(bench: &Bench, conn: &mut Connection) -> Result<MarkersAtScale, BenchError> {
    let (_, entries): (String, u64) = redis::cmd("CONFIG").arg("GET").arg("hash-max-listpack-entries").query_async(conn).await?;
    let scale_events = (entries as f64 * SCALE_OVER_LISTPACK) as u64 * u64::from(MARKER_SHARDS);
    let keys = standings::redis::keys::Keys::new(&format!("{}-scale", bench.keys.prefix())).map_err(|e| e.to_string())?;
    let ingestor = Ingestor::new(Arc::new(Config::default_boards()), keys.clone(), bench.store.clone());
    let events: Vec<Event> = (0..scale_events)
        .map(|n| Event {
            event_id: format!("s-{n}"),
            user_id: format!("v{}", n % 50_000),
            action: "page_view".into(),
            target: Some(format!("/articles/{n}")),
            active: true,
            occurred_at: None,
            points: None,
        })
        .collect();
    let before = used_memory(conn).await?;
    record_all(&ingestor, &events).await?;
    let growth = used_memory(conn).await? - before;
    let pattern = format!("{}:v1:{{activity}}:evt:*", keys.prefix());
    let markers = marker_count(conn, &pattern).await?;
    let usage = usage_by_kind(conn, &pattern, standings_kind).await?;
    let bytes = usage.get("dedupe markers").map_or(0, |(_, bytes)| *bytes);
    let buckets = scan(conn, &pattern).await?;
    let encoding: String = match buckets.first() {
        Some(bucket) => redis::cmd("OBJECT").arg("ENCODING").arg(bucket).query_async(conn).await?,
        None => "none".into(),
    };
    // The other keys this load wrote (boards, ledgers) are in the growth too: only the markers'
    // share of MEMORY USAGE is theirs; the growth is an upper bound.
    let all = usage_by_kind(conn, &format!("{}:v1:*", keys.prefix()), standings_kind).await?;
    let total: u64 = all.values().map(|(_, bytes)| bytes).sum();
    let markers_share = if total == 0 { 0.0 } else { bytes as f64 / total as f64 };
    Ok(MarkersAtScale {
        events: scale_events,
        listpack_entries: entries,
        encoding,
        usage_per_marker: bytes as f64 / markers.max(1) as f64,
        growth_per_marker: growth.max(0) as f64 * markers_share / markers.max(1) as f64,
    })
}

async fn record_all(ingestor: &Ingestor, events: &[Event]) -> Result<(), BenchError> {
    for batch in events.chunks(MAX_BATCH) {
        let outcomes = ingestor.record_batch(batch, Utc::now()).await?;
        if let Some(error) = outcomes.into_iter().find_map(Result::err) {
            return Err(error.into());
        }
    }
    Ok(())
}
