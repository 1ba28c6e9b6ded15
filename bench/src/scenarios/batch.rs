//! Batch ingest (scenario 2): `Ingestor::record_batch` of 500 events (what
//! `POST /v1/events:batch` does: every event's script call at once on the shared connection,
//! pipelined) against one pipeline of 500 raw `ZINCRBY`, batch after batch from one client.

use chrono::Utc;
use standings::domain::config::Config;
use standings::domain::scoring::Event;
use standings::redis::scripts::CHUNK;
use standings::services::ingestion::{Ingestor, MAX_BATCH};

use crate::harness::{Bench, BenchError, Cpu, Measurement, Report, Table, Target, grouped, ratio, time};

/// Batches of each method per repetition.
const BATCHES: usize = 10;
const USERS: usize = 1_000;

fn events(tag: &str) -> Vec<Event> {
    (0..MAX_BATCH)
        .map(|i| Event {
            event_id: format!("{tag}-{i}"),
            user_id: format!("u{}", i % USERS),
            action: "comment".into(),
            target: Some(format!("{tag}-{i}")),
            active: true,
            occurred_at: None,
            points: None,
        })
        .collect()
}

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let ingestor = Ingestor::new(std::sync::Arc::new(Config::default_boards()), bench.keys.clone(), bench.store.clone());
    let raw_key = format!("{}:raw:zincrby", bench.keys.prefix());
    let conn = bench.connection().await?;
    let mut script = Measurement::new("`Ingestor::record_batch` (`apply_event.lua`, one call per board per 100 events)");
    let mut raw = Measurement::new("raw pipeline of 500 `ZINCRBY`");
    let (mut script_cpu, mut raw_cpu) = (Cpu::ZERO, Cpu::ZERO);
    let mut script_requests = 0;

    let script_batch = |tag: String| {
        let ingestor = ingestor.clone();
        async move {
            let batch = events(&tag);
            let outcomes = ingestor.record_batch(&batch, Utc::now()).await?;
            match outcomes.iter().filter(|o| !matches!(o, Ok(receipt) if !receipt.duplicate)).count() {
                0 => Ok::<_, BenchError>(()),
                failed => Err(format!("{failed} events of the batch were not applied").into()),
            }
        }
    };
    let raw_batch = |users: Vec<String>| {
        let mut pipe = redis::pipe();
        for user in &users {
            pipe.zincr(&raw_key, user, 3).ignore();
        }
        let mut conn = conn.clone();
        async move {
            let () = pipe.query_async(&mut conn).await?;
            Ok::<_, BenchError>(())
        }
    };
    let users: Vec<String> = (0..MAX_BATCH).map(|i| format!("u{}", i % USERS)).collect();

    script_batch("warm".into()).await?;
    raw_batch(users.clone()).await?;
    for repetition in 0..bench.repetitions {
        for batch in 0..BATCHES {
            let tag = format!("r{repetition}-b{batch}");
            let (requests_before, cpu_before) = (bench.store.round_trips(), bench.cpu());
            let (elapsed, ()) = time(script_batch(tag)).await?;
            script_cpu += bench.cpu() - cpu_before;
            script_requests += bench.store.round_trips() - requests_before;
            script.samples.push(elapsed);

            let cpu_before = bench.cpu();
            let (elapsed, ()) = time(raw_batch(users.clone())).await?;
            raw_cpu += bench.cpu() - cpu_before;
            raw.samples.push(elapsed);
        }
    }

    let per_second = |m: &Measurement| MAX_BATCH as f64 / m.median().as_secs_f64();
    let batches = script.samples.len() as u64;
    let mut table = Table::new(&["method", "batches", "median batch", "events/s", "client CPU / event", "Redis CPU / event"]);
    for (m, cpu) in [(&script, script_cpu), (&raw, raw_cpu)] {
        let (client, redis) = cpu.per(batches * MAX_BATCH as u64);
        table.row(vec![
            m.method.clone(),
            m.samples.len().to_string(),
            format!("{:.1} ms", m.median().as_secs_f64() * 1e3),
            format!("{:.0}", per_second(m)),
            format!("{client:.1} µs"),
            format!("{redis:.1} µs"),
        ]);
    }
    let speed = ratio(raw.median(), script.median());
    Ok(Report {
        title: "batch: 500 events per request (scenario 2)".into(),
        setup: format!(
            "One client; each batch 500 new comments by {} users. {} × {BATCHES} batches of each method, alternating, after \
             one untimed batch each.",
            grouped(USERS as u64),
            bench.repetitions
        ),
        tables: vec![table],
        notes: vec![format!(
            "record_batch / raw pipeline (events/s): **{speed:.3}**. The batch sent {:.0} requests per batch on the one multiplexed \
             connection (one script call per board per chunk of {CHUNK} events, all in flight at once).",
            script_requests as f64 / batches as f64
        )],
        targets: vec![Target::at_least("batch of 500", "raw pipelined ZINCRBY", speed, 0.15)],
    })
}
