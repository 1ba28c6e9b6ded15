//! The journal's recovery point under load (scenario 10): how long an acknowledged write can
//! exist only in Redis. Writers send events through `Ingestor::record` (journal on) at a steady
//! rate while the `journal` function's drain runs on a fixed schedule into S3 (moto_server).
//! Before each pass the oldest entry not yet in S3 is read: its stream id is Redis's clock when
//! it was appended, in the call that applied the write, so before the write was acknowledged.
//! The pass's end is when that entry, and every later one it took, is durably in S3. The
//! oldest entry's wait until then is the longest any write of that pass existed only in Redis;
//! the largest over the passes is the recovery point measured.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use journal::{Drainer, S3Objects};
use standings::domain::config::Config;
use standings::domain::scoring::Event;
use standings::runtime::metrics::Metrics;
use standings::services::ingestion::Ingestor;

use crate::harness::{Bench, BenchError, Report, Table, grouped, ms};

/// The drain's schedule here: the template runs it every minute; a shorter interval measures
/// the same thing in a sixth of the time (the interval adds to the recovery point one for one;
/// the pass scales with the entries it moves, reported per entry below).
const INTERVAL: Duration = Duration::from_secs(10);
const PASSES: usize = 6;
const WRITERS: usize = 8;
/// Events per second, all writers together: a steady load, well under what this machine
/// applies, so the drain is measured beside the writes rather than starved by them.
const RATE: f64 = 1_000.0;
const USERS: u64 = 10_000;

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let config = Arc::new(Config::default_boards());
    let keys = bench.keys.clone().with_journal(true);
    bench.born(&config).await?;
    let client = journal::s3_client().await;
    let bucket = format!("{}-rpo", bench.keys.prefix()).to_lowercase().replace(['_', ':'], "-");
    client.create_bucket().bucket(&bucket).send().await?;
    let drainer = Drainer::new(
        config.clone(),
        keys.clone(),
        bench.store.clone(),
        S3Objects::new(client, &bucket),
        Metrics::with_sink("bench", Arc::new(|_| ())),
    );
    let ingestor = Arc::new(Ingestor::new(config.clone(), keys.clone(), bench.store.clone()));
    let (stop, written) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let writers: Vec<_> = (0..WRITERS as u64)
        .map(|writer| {
            let (ingestor, stop, written) = (ingestor.clone(), stop.clone(), written.clone());
            tokio::spawn(async move {
                let mut i = 0u64;
                let mut pace = tokio::time::interval(Duration::from_secs_f64(WRITERS as f64 / RATE));
                while !stop.load(Ordering::Relaxed) {
                    pace.tick().await;
                    let event: Event = serde_json::from_value(serde_json::json!({
                        "event_id": format!("rpo-{writer}-{i}"), "user_id": format!("u{}", (i * 7 + writer) % USERS),
                        "action": "comment", "target": format!("t-{writer}-{i}")}))?;
                    ingestor.record(&event, Utc::now()).await?;
                    written.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
                Ok::<(), BenchError>(())
            })
        })
        .collect();

    let started = Instant::now();
    let mut schedule = tokio::time::interval_at(tokio::time::Instant::now() + INTERVAL, INTERVAL);
    let mut table = Table::new(&["pass", "entries stored", "pass took", "per 1,000 entries", "oldest entry's wait (the pass's longest)"]);
    let (mut worst, mut longest_pass, mut entries_total, mut pass_total) = (0i64, Duration::ZERO, 0usize, Duration::ZERO);
    let mut conn = bench.connection().await?;
    for pass in 1..=PASSES {
        schedule.tick().await;
        // The oldest entry of every board the pass will store.
        let mut oldest: Option<i64> = None;
        for board in config.boards() {
            if let Some(ms) = standings::redis::journal::oldest_ms(&mut conn, &keys.board(&board.name)).await? {
                oldest = Some(oldest.map_or(ms, |o: i64| o.min(ms)));
            }
        }
        let begun = Instant::now();
        let report = drainer.drain(Utc::now() + chrono::Duration::seconds(50)).await;
        let took = begun.elapsed();
        if let Some(failed) = report.boards.iter().find_map(|b| b.error.clone()) {
            return Err(format!("the drain failed: {failed}").into());
        }
        let wait = oldest.map_or(0, |ms| Utc::now().timestamp_millis() - ms);
        worst = worst.max(wait);
        longest_pass = longest_pass.max(took);
        entries_total += report.entries;
        pass_total += took;
        let per_thousand = took.mul_f64(1000.0 / report.entries.max(1) as f64);
        table.row(vec![
            pass.to_string(),
            grouped(report.entries as u64),
            ms(took),
            ms(per_thousand),
            format!("{:.1} s", wait as f64 / 1000.0),
        ]);
    }
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.map_err(|e| e.to_string())??;
    }
    let rate = written.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    let per_entry = pass_total.as_secs_f64() / entries_total.max(1) as f64;
    // Every minute at this rate: the interval, then a pass over a minute's entries.
    let minute_pass = per_entry * rate * 60.0;
    // A run stops after 50 s (the next minute's takes over): the rate it keeps up with.
    let ceiling = 50.0 / per_entry / 60.0;
    Ok(Report {
        title: "Scenario 10: the journal's recovery point under load".into(),
        setup: format!(
            "{WRITERS} writers send `comment` events through `Ingestor::record` with the journal on, {RATE:.0} a second together, for {PASSES} \
             drain passes {}s apart (the `journal` function's `Drainer` into moto_server's S3 on loopback). Before each pass the \
             oldest entry not yet in S3 is read (its stream id: Redis's clock when the write was applied, before it was \
             acknowledged); its wait until the pass has stored it is the longest any write of the pass existed only in Redis.",
            INTERVAL.as_secs()
        ),
        tables: vec![table],
        notes: vec![format!(
            "Recovery point measured: **{:.1} s** at a drain every {} s under {:.0} events/s (the longest pass: {}). With the \
             template's schedule (every minute) at this rate a pass moves a minute's entries, about {:.1} s at the measured {:.2} ms \
             per 1,000: the recovery point is about {:.0} s — the interval plus one pass. A Redis lost at the worst moment loses \
             at most the writes of that window (docs/journal.md#the-drain). The drain's ceiling here: a run's 50 s move \
             about {:.0} events/s of a minute's writes (to moto_server on the same 2 cores); past it the lag grows and \
             `JournalLagAlarm` fires.",
            worst as f64 / 1000.0,
            INTERVAL.as_secs(),
            rate,
            ms(longest_pass),
            minute_pass,
            per_entry * 1e6,
            60.0 + minute_pass,
            ceiling
        )],
        targets: Vec::new(),
    })
}
