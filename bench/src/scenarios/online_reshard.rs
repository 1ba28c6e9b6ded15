//! A move between layouts while the board serves (issue 58, docs/scaling.md#changing-shards):
//! the journal-restore scenario's board (one slot, 100,000 members) holding LINES lines, drained
//! to S3; then its `shards` set to 12 and the board moved by the `journal` function's
//! `Resharder` (invocations of 15 minutes) while one client writes to it without pause (the new
//! configuration's `Ingestor`: writes go where the data is) and another reads its top through
//! the `query` router. Measured: the move's time and lines a second (the lines written during
//! it included), every write and read of the move by its answer, the span from the first write
//! refused (503 `board_resharding`, the last step's fence; or `board_restoring`, once, a write
//! at the switch whose layout probe is older than it) to the last, and the growth of this
//! process's resident memory during the move (sampled every 50 ms).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use journal::{Drainer, Resharder, Restorer, S3Objects, Status};
use standings::domain::config::Config;
use standings::domain::scoring::Event;
use standings::redis::keys::Keys;
use standings::runtime::metrics::Metrics;
use standings::services::ingestion::Ingestor;

use super::restore::{drain_all, write};
use crate::harness::{Bench, BenchError, Report, Table, Target, grouped, scan};

/// Lines before the move (`STANDINGS_BENCH_RESHARD_LINES` for another size).
const LINES: u64 = 200_000;
const SHARDS: u32 = 12;
/// The issue's bound on the time writes are refused, in all.
const REFUSED_TARGET: Duration = Duration::from_secs(5);

fn board(shards: u32) -> Config {
    board_named("forum", shards)
}

fn board_named(name: &str, shards: u32) -> Config {
    Config::parse(&format!(
        r#"
        [[boards]]
        name = "{name}"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all", "week"]
        top = 10
        statements = true
        shards = {shards}
        rules = [{{ action = "comment", points = 3, scope = "user_target_day", reversible = true, daily_cap = 300 }}]
        "#
    ))
    .expect("the bench's board parses")
}

/// This process's resident memory in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kb| kb.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// What the writer and the reader saw during the move.
#[derive(Default)]
struct Seen {
    taken: AtomicU64,
    refused: AtomicU64,
    /// Ms since the move's start of the first and last refusal (u64::MAX: none).
    first_refused: AtomicU64,
    last_refused: AtomicU64,
    reads_ok: AtomicU64,
    reads_other: AtomicU64,
    peak_rss: AtomicU64,
}

/// The same journal (board `calm`, `lines` events) restored after every key of it was lost,
/// then moved 1 → SHARDS, each with nothing beside it: the lines each applied and its time.
async fn alone(bench: &Bench, keys: &Keys, objects: &S3Objects, lines: u64) -> Result<[(usize, Duration); 2], BenchError> {
    let (one, twelve) = (Arc::new(board_named("calm", 1)), Arc::new(board_named("calm", SHARDS)));
    bench.born(&one).await?;
    write(bench, &one, keys, 0..lines).await?;
    let sink = Metrics::with_sink("bench", Arc::new(|_| ()));
    drain_all(&Drainer::new(one.clone(), keys.clone(), bench.store.clone(), objects.clone(), sink)).await?;
    let mut conn = bench.connection().await?;
    for chunk in scan(&mut conn, &keys.board("calm").pattern_all()).await?.chunks(1_000) {
        let () = redis::AsyncCommands::del(&mut conn, chunk).await?;
    }
    let restoring = Instant::now();
    let restorer = Restorer::new(one, keys.clone(), bench.store.clone(), objects.clone());
    let report = restorer.restore(Some("calm"), Utc::now() + chrono::Duration::minutes(30)).await?;
    if report.status != Status::Complete {
        return Err(format!("the restore did not complete: {report:?}").into());
    }
    let restored = (report.boards.iter().map(|b| b.replayed).sum::<usize>(), restoring.elapsed());
    let moving = Instant::now();
    let resharder = Resharder::new(twelve, keys.clone(), bench.store.clone(), objects.clone());
    let mut moved = 0;
    loop {
        let report = resharder.reshard("calm", Utc::now() + chrono::Duration::minutes(15)).await?;
        moved += report.moved;
        if report.status == Status::Complete {
            return Ok([restored, (moved, moving.elapsed())]);
        }
    }
}

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let lines = std::env::var("STANDINGS_BENCH_RESHARD_LINES").ok().and_then(|n| n.parse().ok()).unwrap_or(LINES);
    let (one, twelve) = (Arc::new(board(1)), Arc::new(board(SHARDS)));
    let keys = bench.keys.clone().with_journal(true);
    bench.born(&one).await?;
    let client = journal::s3_client().await;
    let bucket = format!("{}-reshard", bench.keys.prefix()).to_lowercase().replace(['_', ':'], "-");
    client.create_bucket().bucket(&bucket).send().await?;
    let objects = S3Objects::new(client, &bucket);
    let [(restored, restore_took), (moved_alone, alone_took)] = alone(bench, &keys, &objects, lines).await?;
    let (restore_rate, alone_rate) = (restored as f64 / restore_took.as_secs_f64(), moved_alone as f64 / alone_took.as_secs_f64());
    write(bench, &one, &keys, 0..lines).await?;
    let drainer =
        Drainer::new(one.clone(), keys.clone(), bench.store.clone(), objects.clone(), Metrics::with_sink("bench", Arc::new(|_| ())));
    drain_all(&drainer).await?;

    let seen = Arc::new(Seen { first_refused: AtomicU64::new(u64::MAX), ..Seen::default() });
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let base_rss = rss();
    let writer = {
        let (seen, stop, ingestor) = (seen.clone(), stop.clone(), Ingestor::new(twelve.clone(), keys.clone(), bench.client()?));
        tokio::spawn(async move {
            let mut i = lines;
            while !stop.load(Ordering::Relaxed) {
                let event: Event = serde_json::from_value(serde_json::json!({
                    "event_id": format!("m-{i}"), "user_id": format!("u{}", i % super::restore::USERS), "action": "comment", "target": "during"}))
                .map_err(|e| e.to_string())?;
                i += 1;
                match ingestor.record(&event, Utc::now()).await {
                    Ok(_) => seen.taken.fetch_add(1, Ordering::Relaxed),
                    // The last step's fence, or (once, at the switch) the old layout freed under a
                    // probe older than the switch: refused, nothing written.
                    Err(error) if ["BOARD_RESHARDING", "BOARD_RESTORING"].iter().any(|code| format!("{error:?}").contains(code)) => {
                        let at = start.elapsed().as_millis() as u64;
                        seen.first_refused.fetch_min(at, Ordering::Relaxed);
                        seen.last_refused.fetch_max(at, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        seen.refused.fetch_add(1, Ordering::Relaxed)
                    }
                    Err(error) => return Err(format!("a write during the move: {error:?}")),
                };
            }
            Ok::<u64, String>(i - lines)
        })
    };
    let reader = {
        let (seen, stop) = (seen.clone(), stop.clone());
        let router = query::router(Arc::new(query::App::new(twelve.clone(), keys.clone(), bench.client()?, standings::system_clock())));
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let request = axum::http::Request::get("/v1/boards/forum/top?period=all&limit=10").body(axum::body::Body::empty());
                let response =
                    tower::ServiceExt::oneshot(router.clone(), request.map_err(|e| e.to_string())?).await.map_err(|e| e.to_string())?;
                let (status, at) = (response.status(), start.elapsed().as_millis() as u64);
                if !status.is_success() {
                    let body = axum::body::to_bytes(response.into_body(), 4096).await.map_err(|e| e.to_string())?;
                    if seen.reads_other.fetch_add(1, Ordering::Relaxed) % 20 == 0 {
                        eprintln!("a read during the move at {at} ms: {status} {}", String::from_utf8_lossy(&body));
                    }
                } else {
                    seen.reads_ok.fetch_add(1, Ordering::Relaxed);
                }
                seen.peak_rss.fetch_max(rss(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok::<(), String>(())
        })
    };

    let resharder = Resharder::new(twelve.clone(), keys.clone(), bench.store.clone(), objects);
    let moving = Instant::now();
    eprintln!("the move starts at {} ms", start.elapsed().as_millis());
    let (mut invocations, mut moved) = (0, 0);
    loop {
        invocations += 1;
        let report = resharder.reshard("forum", Utc::now() + chrono::Duration::minutes(15)).await?;
        moved += report.moved;
        if report.status == Status::Complete {
            break;
        }
    }
    let took = moving.elapsed();
    eprintln!(
        "the move ends at {} ms; writes refused from {} to {} ms",
        start.elapsed().as_millis(),
        seen.first_refused.load(Ordering::Relaxed),
        seen.last_refused.load(Ordering::Relaxed)
    );
    stop.store(true, Ordering::Relaxed);
    let during = writer.await.map_err(|e| e.to_string())??;
    reader.await.map_err(|e| e.to_string())??;

    let (taken, refused) = (seen.taken.load(Ordering::Relaxed), seen.refused.load(Ordering::Relaxed));
    let (first, last) = (seen.first_refused.load(Ordering::Relaxed), seen.last_refused.load(Ordering::Relaxed));
    let refused_span = if refused == 0 { Duration::ZERO } else { Duration::from_millis(last - first) };
    let (reads_ok, reads_other) = (seen.reads_ok.load(Ordering::Relaxed), seen.reads_other.load(Ordering::Relaxed));
    let growth = seen.peak_rss.load(Ordering::Relaxed).saturating_sub(base_rss);
    let rate = moved as f64 / took.as_secs_f64();

    let mut table = Table::new(&["what", "measured"]);
    table.row(vec!["lines before the move (drained to S3)".into(), grouped(lines)]);
    table.row(vec!["lines moved (those written during the move included)".into(), grouped(moved as u64)]);
    table.row(vec!["the move, invocations".into(), format!("{:.1} s, {invocations}", took.as_secs_f64())]);
    table.row(vec!["lines moved a second".into(), grouped(rate as u64)]);
    table.row(vec![
        "writes during the move: taken / refused (board_resharding, or once at the switch)".into(),
        format!("{} / {}", grouped(taken), grouped(refused)),
    ]);
    table.row(vec!["first to last refused write".into(), format!("{} ms", refused_span.as_millis())]);
    table.row(vec!["reads of the top during the move: 200 / other".into(), format!("{} / {}", grouped(reads_ok), grouped(reads_other))]);
    table.row(vec!["this process's resident memory, growth at its peak".into(), format!("{:.1} MB", growth as f64 / 1e6)]);
    let mut alone_table = Table::new(&["the same journal, nothing beside it", "lines", "took", "lines/s"]);
    for (what, n, took) in [
        ("restored, every key of it lost", restored, restore_took),
        (&*format!("moved 1 → {SHARDS}, after that restore"), moved_alone, alone_took),
    ] {
        alone_table.row(vec![
            what.to_owned(),
            grouped(n as u64),
            format!("{:.1} s", took.as_secs_f64()),
            grouped((n as f64 / took.as_secs_f64()) as u64),
        ]);
    }
    let targets = vec![
        Target {
            row: format!("lines a second, a move 1 → {SHARDS} alone against a restore of the same journal alone"),
            goal: "≥ 1×".into(),
            measured: format!("{:.2}×", alone_rate / restore_rate),
            met: alone_rate >= restore_rate,
        },
        Target {
            row: format!("writes refused during a move 1 → {SHARDS} of {} lines, in all", grouped(lines)),
            goal: format!("≤ {} s", REFUSED_TARGET.as_secs()),
            measured: format!("{} ms ({} refused of {})", refused_span.as_millis(), grouped(refused), grouped(taken + refused)),
            met: refused_span <= REFUSED_TARGET,
        },
        Target {
            row: "reads during the move".into(),
            goal: "200 throughout".into(),
            measured: format!("{} of {}", grouped(reads_ok), grouped(reads_ok + reads_other)),
            met: reads_other == 0,
        },
    ];
    Ok(Report {
        title: format!("online reshard: a board of {} lines moved 1 → {SHARDS} while it serves (scenario 17)", grouped(lines)),
        setup: format!(
            "The journal-restore scenario's board (100,000 members) with {} events written through `Ingestor::record` (journal \
             on) and drained to moto_server's S3; then configured with `shards = {SHARDS}` and moved by the `Resharder` \
             (invocations of 15 minutes) while one client writes comments to it without pause through the new configuration's \
             `Ingestor` ({during} writes) and another reads its top through the `query` router every 50 ms. Before it, \
             the same number of events on a board of its own, drained, every key of it deleted, restored by the `Restorer` \
             and then moved 1 → {SHARDS}, with no client beside either: the restore's lines a second and the move's, the \
             issue's comparison, in the same run.",
            grouped(lines)
        ),
        tables: vec![table, alone_table],
        notes: vec![format!(
            "Moved in **{:.1} s** ({} lines/s); writes refused for **{} ms** in all (the last step: the lines written during the \
             last round, the closed seasons, the compare of every period set of both layouts, the switch); reads answered 200 \
             {} times of {}.",
            took.as_secs_f64(),
            grouped(rate as u64),
            refused_span.as_millis(),
            grouped(reads_ok),
            grouped(reads_ok + reads_other)
        )],
        targets,
    })
}
