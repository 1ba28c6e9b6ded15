//! The journal's recovery time (docs/journal.md#restore): a board's journal of LINES lines
//! (events through `Ingestor::record`, journal on, recording their effects) drained to S3
//! (moto_server), every key of the board lost, then the `journal` function's `Restorer` brings
//! it back. Measured: lines restored a second, and Redis's memory at its peak during the
//! restore (sampled every 50 ms) against the live data's before the loss.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use journal::{Drainer, Restorer, S3Objects, Status};
use standings::domain::config::Config;
use standings::domain::scoring::Event;
use standings::redis::keys::Keys;
use standings::runtime::metrics::Metrics;
use standings::services::ingestion::Ingestor;

use crate::harness::{Bench, BenchError, Report, Table, Target, grouped, scan};

/// The issue's journal: a million lines (`STANDINGS_BENCH_RESTORE_LINES` for a shorter try).
const LINES: u64 = 1_000_000;
pub(super) const WRITERS: u64 = 50;
pub(super) const USERS: u64 = 100_000;
/// The issue's target for a restore on this machine.
const TARGET_LINES_PER_SEC: f64 = 20_000.0;

pub(super) fn board() -> Config {
    Config::parse(
        r#"
        [[boards]]
        name = "forum"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all", "week"]
        top = 10
        statements = true
        rules = [{ action = "comment", points = 3, scope = "user_target_day", reversible = true, daily_cap = 300 }]
        "#,
    )
    .expect("the bench's board parses")
}

pub(super) async fn used_memory(conn: &mut standings::redis::store::Connection) -> Result<u64, BenchError> {
    let info: String = redis::cmd("INFO").arg("memory").query_async(conn).await?;
    Ok(info.lines().find_map(|line| line.strip_prefix("used_memory:")).and_then(|n| n.trim().parse().ok()).unwrap_or(0))
}

/// Events `ids` (`r-<i>`, user `u<i % USERS>`) through `Ingestor::record`, journal on, from
/// WRITERS clients at once.
pub(super) async fn write(bench: &Bench, config: &Arc<Config>, keys: &Keys, ids: Range<u64>) -> Result<(), BenchError> {
    let next = Arc::new(AtomicU64::new(ids.start));
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let (next, config, keys, store, end) = (next.clone(), config.clone(), keys.clone(), bench.client(), ids.end);
            tokio::spawn(async move {
                let ingestor = Ingestor::new(config, keys, store?);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= end {
                        return Ok::<(), BenchError>(());
                    }
                    let event: Event = serde_json::from_value(serde_json::json!({
                        "event_id": format!("r-{i}"), "user_id": format!("u{}", i % USERS),
                        "action": "comment", "target": format!("t{}", i / USERS)}))?;
                    ingestor.record(&event, Utc::now()).await?;
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

/// Drain runs until one moves nothing: the entries moved.
pub(super) async fn drain_all<O: journal::Objects>(drainer: &Drainer<O>) -> Result<usize, BenchError> {
    let mut drained = 0;
    loop {
        let report = drainer.drain(Utc::now() + chrono::Duration::seconds(50)).await;
        if let Some(failed) = report.boards.iter().find_map(|b| b.error.clone()) {
            return Err(format!("the drain failed: {failed}").into());
        }
        drained += report.entries;
        if report.entries == 0 {
            return Ok(drained);
        }
    }
}

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let lines = std::env::var("STANDINGS_BENCH_RESTORE_LINES").ok().and_then(|n| n.parse().ok()).unwrap_or(LINES);
    let config = Arc::new(board());
    let keys = bench.keys.clone().with_journal(true);
    bench.born(&config).await?;
    let client = journal::s3_client().await;
    let bucket = format!("{}-restore", bench.keys.prefix()).to_lowercase().replace(['_', ':'], "-");
    client.create_bucket().bucket(&bucket).send().await?;
    let objects = S3Objects::new(client, &bucket);

    let writing = Instant::now();
    write(bench, &config, &keys, 0..lines).await?;
    let wrote = writing.elapsed();

    let drainer =
        Drainer::new(config.clone(), keys.clone(), bench.store.clone(), objects.clone(), Metrics::with_sink("bench", Arc::new(|_| ())));
    let draining = Instant::now();
    let drained = drain_all(&drainer).await?;
    let drain_took = draining.elapsed();

    let mut conn = bench.connection().await?;
    let live = used_memory(&mut conn).await?;
    let board_keys = keys.board("forum");
    let pattern = format!("{}:*", bench.keys.prefix());
    let lost = scan(&mut conn, &pattern).await?;
    for chunk in lost.chunks(1_000) {
        let () = redis::AsyncCommands::del(&mut conn, chunk).await?;
    }
    let empty = used_memory(&mut conn).await?;

    let sampling = Arc::new(AtomicBool::new(true));
    let peak = Arc::new(AtomicU64::new(empty));
    let sampler = {
        let (sampling, peak, mut conn) = (sampling.clone(), peak.clone(), bench.connection().await?);
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                if let Ok(used) = used_memory(&mut conn).await {
                    peak.fetch_max(used, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let restorer = Restorer::new(config.clone(), keys.clone(), bench.store.clone(), objects);
    let restoring = Instant::now();
    let cpu = bench.cpu();
    let report = restorer.restore(Some("forum"), Utc::now() + chrono::Duration::minutes(30)).await?;
    let restore_took = restoring.elapsed();
    let (client_cpu, redis_cpu) = (bench.cpu() - cpu).per(lines);
    sampling.store(false, Ordering::Relaxed);
    sampler.await.map_err(|e| e.to_string())?;
    let after = used_memory(&mut conn).await?;
    if report.status != Status::Complete {
        return Err(format!("the restore did not complete: {report:?}").into());
    }
    let restored = report.boards.iter().map(|b| b.replayed).sum::<usize>();
    let guard: bool = redis::cmd("HEXISTS").arg(board_keys.guard()).arg(standings::domain::guard::BORN).query_async(&mut conn).await?;
    if !guard {
        return Err("the restored board does not take writes".into());
    }

    let rate = restored as f64 / restore_took.as_secs_f64();
    let mb = |bytes: u64| format!("{:.1} MB", bytes as f64 / 1e6);
    let mut table = Table::new(&["step", "lines", "took", "lines/s"]);
    let row = |step: &str, n: u64, took: Duration| {
        vec![step.to_owned(), grouped(n), format!("{:.1} s", took.as_secs_f64()), grouped((n as f64 / took.as_secs_f64()) as u64)]
    };
    table.row(row("written (50 clients, journal on)", lines, wrote));
    table.row(row("drained to S3", drained as u64, drain_took));
    table.row(row("restored (every key lost)", restored as u64, restore_took));
    let mut memory = Table::new(&["Redis memory", "bytes"]);
    memory.row(vec!["live data, journal drained".into(), mb(live)]);
    memory.row(vec!["every key lost".into(), mb(empty)]);
    memory.row(vec!["peak during the restore".into(), mb(peak.load(Ordering::Relaxed))]);
    memory.row(vec!["after the restore".into(), mb(after)]);
    let target = Target {
        row: format!("restore, a {}-line journal", grouped(lines)),
        goal: format!("≥ {} lines/s", grouped(TARGET_LINES_PER_SEC as u64)),
        measured: format!("{} lines/s", grouped(rate as u64)),
        met: rate >= TARGET_LINES_PER_SEC,
    };
    Ok(Report {
        title: "Scenario 12: the journal's recovery time".into(),
        setup: format!(
            "{WRITERS} clients write {} `comment` events (one board, all-time and week, statements, a daily cap, {USERS} users) \
             through `Ingestor::record` with the journal on; the `journal` function's `Drainer` stores them in moto_server's S3; \
             every key of the board is deleted; the `Restorer` brings the board back in one invocation. Redis's `used_memory` \
             is sampled every 50 ms during the restore.",
            grouped(lines)
        ),
        tables: vec![table, memory],
        notes: vec![format!(
            "Recovery time: **{:.1} s** for {} lines, **{} lines/s** (S3 reads from moto_server and the restore on the same 2 \
             cores as Redis), {client_cpu:.0} µs of the restore's own CPU and {redis_cpu:.0} µs of Redis CPU a line (moto_server's \
             is the rest). The restore's memory peak is {:.2}× the live data's: the live keys, the board's claims hash and \
             the run in flight (docs/journal.md#restore). Keys whose expiry had passed are never written, so a longer history \
             adds reading time, not memory.",
            restore_took.as_secs_f64(),
            grouped(restored as u64),
            grouped(rate as u64),
            peak.load(Ordering::Relaxed) as f64 / live.max(1) as f64
        )],
        targets: vec![target],
    })
}
