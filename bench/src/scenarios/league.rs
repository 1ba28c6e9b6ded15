//! A league's close (scenario 11, docs/leagues.md): 100,000 players of the shipped `xp` board
//! join a week's league through the real batch path (`Ingestor::record_batch`, placements in
//! the write script), then the real close run (`Leagues::close`: every cohort read, ranked and
//! closed in one script call each, the next week opened) is timed, against the least a close
//! must do with raw Redis: read the week's whole board once (`ZREVRANGE … WITHSCORES` in pages
//! of 1,000), in the same run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use standings::domain::config::Config;
use standings::domain::period::Period;
use standings::domain::scoring::Event;
use standings::services::ingestion::{Ingestor, MAX_BATCH};
use standings::services::leagues::Leagues;

use crate::harness::{Bench, BenchError, Measurement, Report, Table, Target, grouped, member, ms, ratio};

const BOARD: &str = "xp";
const PLAYERS: u64 = 100_000;
/// Each repetition places and closes 100,000 players (some seconds).
const MAX_REPETITIONS: usize = 3;

fn at(text: &str) -> Result<DateTime<Utc>, BenchError> {
    Ok(DateTime::parse_from_rfc3339(text)?.with_timezone(&Utc))
}

/// Every player's first lessons of the week: 1-5 lessons each, so cohorts have ties to break.
async fn join(ingestor: &Ingestor, now: DateTime<Utc>, run: usize) -> Result<(), BenchError> {
    let events: Vec<Event> = (0..PLAYERS)
        .map(|i| Event {
            event_id: format!("r{run}-{i}"),
            user_id: member(i),
            action: "lesson".into(),
            target: None,
            active: true,
            occurred_at: None,
            points: None,
        })
        .collect();
    for chunk in events.chunks(MAX_BATCH) {
        for result in ingestor.record_batch(chunk, now).await.map_err(|e| format!("batch refused: {e:?}"))? {
            result.map_err(|e| format!("event refused: {e}"))?;
        }
    }
    Ok(())
}

/// The least a close does: the week's whole board, read once.
async fn raw_read(bench: &Bench, key: &str) -> Result<Duration, BenchError> {
    let mut conn = bench.client()?.connection().await?;
    let started = Instant::now();
    let mut start = 0u64;
    loop {
        let page: Vec<(String, f64)> =
            redis::cmd("ZREVRANGE").arg(key).arg(start).arg(start + 999).arg("WITHSCORES").query_async(&mut conn).await?;
        if page.len() < 1000 {
            break;
        }
        start += 1000;
    }
    Ok(started.elapsed())
}

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let config = Arc::new(Config::default_boards());
    let board = config.board(BOARD).ok_or("no xp board")?;
    let league = board.league.as_ref().ok_or("the xp board has no league")?;
    let now = at("2026-11-25T10:00:00+08:00")?;
    let week = Period::containing(league.period, now, board.timezone);
    let after = week.end.ok_or("a week ends")?.with_timezone(&Utc) + chrono::Duration::hours(1);
    let mut close = Measurement::new("`Leagues::close` (every cohort read, ranked, closed; the next week opened)");
    let mut raw = Measurement::new("raw `ZREVRANGE … WITHSCORES` of the whole week, pages of 1,000");
    let mut cohorts = 0;
    // The close's lasting memory (issue 43 item 14): the week's results, kept 26 weeks, and
    // the tiers, kept for good (the lowest tier is not stored).
    let (mut results_bytes, mut tiers_bytes, mut tiers_stored, mut results_ttl_days) = (0u64, 0u64, 0u64, 0f64);
    for repetition in 0..bench.repetitions.min(MAX_REPETITIONS) {
        let ingestor = Ingestor::new(config.clone(), bench.keys.clone(), bench.store.clone());
        join(&ingestor, now, repetition).await?;
        let key = bench.keys.board(BOARD).period(&week);
        raw.samples.push(raw_read(bench, &key).await?);
        let leagues = Leagues::new(bench.keys.clone(), bench.store.clone());
        let started = Instant::now();
        let report = leagues.close(board, league, &week, after, Utc::now() + chrono::Duration::hours(1)).await?;
        close.samples.push(started.elapsed());
        if report.status != "complete" {
            return Err(format!("the close did not complete: {report:?}").into());
        }
        cohorts = report.cohorts_closed;
        let mut conn = bench.client()?.connection().await?;
        let keys = bench.keys.board(BOARD);
        for (bytes, key) in [(&mut results_bytes, keys.league_results(&week.id)), (&mut tiers_bytes, keys.league_tiers())] {
            *bytes =
                redis::cmd("MEMORY").arg("USAGE").arg(key).arg("SAMPLES").arg(0).query_async::<Option<u64>>(&mut conn).await?.unwrap_or(0);
        }
        tiers_stored = redis::cmd("HLEN").arg(keys.league_tiers()).query_async(&mut conn).await?;
        results_ttl_days = redis::cmd("TTL").arg(keys.league_results(&week.id)).query_async::<i64>(&mut conn).await? as f64 / 86_400.0;
        bench.clean().await?;
    }
    let mut table = Table::new(&["method", "median", "min", "max", "per player"]);
    for m in [&close, &raw] {
        let per = m.median().as_secs_f64() * 1e6 / PLAYERS as f64;
        table.row(vec![m.method.clone(), ms(m.median()), ms(m.min()), ms(m.max()), format!("{per:.1} µs")]);
    }
    Ok(Report {
        title: "league close: 100,000 players (scenario 11)".into(),
        setup: format!(
            "{} players of the shipped `xp` board (cohorts of {}, {} tiers) join one week through `Ingestor::record_batch` \
             ({MAX_BATCH} events a call), all in the lowest tier: {} cohorts. Then the week is closed by the real close run, \
             timed from the first read to the next week opened; the raw row reads the same week board once. {} repetitions, \
             each on fresh keys.",
            grouped(PLAYERS),
            league.cohort_size,
            league.tiers.len(),
            grouped(cohorts),
            close.samples.len(),
        ),
        tables: vec![table],
        notes: vec![
            format!(
                "close / raw read of the week: **{:.1}×**; one cohort (read, rank, close script) takes {:.0} µs",
                ratio(close.median(), raw.median()),
                close.median().as_secs_f64() * 1e6 / cohorts.max(1) as f64,
            ),
            format!(
                "Memory after the close (`MEMORY USAGE … SAMPLES 0`): one week's results of {} players **{:.1} MB** ({:.0} bytes a \
                 player), so the 26 weeks they are kept hold **{:.0} MB** per 100,000 weekly players; the tiers hash {:.1} MB for the \
                 {} players above the lowest tier (the lowest is not stored).",
                grouped(PLAYERS),
                results_bytes as f64 / 1e6,
                results_bytes as f64 / PLAYERS as f64,
                results_bytes as f64 * 26.0 / 1e6 * 100_000.0 / PLAYERS as f64,
                tiers_bytes as f64 / 1e6,
                grouped(tiers_stored),
            ),
        ],
        targets: vec![
            Target {
                row: "league close, 100,000 players".into(),
                goal: "within one scheduled run (Lambda's 15 minutes)".into(),
                measured: ms(close.median()),
                met: close.median() < Duration::from_secs(600),
            },
            Target {
                row: "league results, 26 weeks of 100,000 weekly players".into(),
                goal: "bounded: results expire after 26 weeks, the lowest tier is not stored".into(),
                measured: format!(
                    "{:.0} MB; a week's results expire in {results_ttl_days:.0} days; {} of {} players' tiers stored",
                    results_bytes as f64 * 26.0 / 1e6 * 100_000.0 / PLAYERS as f64,
                    grouped(tiers_stored),
                    grouped(PLAYERS)
                ),
                met: results_ttl_days > 0.0 && results_ttl_days <= 183.0 && tiers_stored < PLAYERS,
            },
        ],
    })
}
