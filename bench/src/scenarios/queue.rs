//! Queue ingest (scenario 9): messages per second through the `queue` function's batch path
//! (`queue::App::handle` on an SQS event of 100 messages, the template's default batch size:
//! JSON bodies parsed, every event of the batch with one script call per board per chunk)
//! against `POST /v1/events:batch` of the same 100 events through the `ingest` router, both in
//! process, batch after batch from one client, alternating.

use std::sync::Arc;

use aws_lambda_events::sqs::SqsEvent;
use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::http::AuthMode;
use standings::runtime::metrics::Metrics;

use crate::harness::{Bench, BenchError, Cpu, Measurement, Report, Table, call, grouped, ratio, time};

const BATCH: usize = 100;
/// Batches of each method per repetition.
const BATCHES: usize = 10;
const USERS: usize = 1_000;

fn bodies(tag: &str) -> Vec<Value> {
    (0..BATCH)
        .map(|i| json!({"event_id": format!("{tag}-{i}"), "user_id": format!("u{}", i % USERS), "action": "comment", "target": format!("{tag}-{i}")}))
        .collect()
}

fn sqs_event(bodies: &[Value]) -> Result<SqsEvent, BenchError> {
    let records: Vec<Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| {
            json!({"messageId": format!("m{i}"), "receiptHandle": "h", "body": body.to_string(),
                   "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {}, "eventSource": "aws:sqs"})
        })
        .collect();
    Ok(serde_json::from_value(json!({ "Records": records }))?)
}

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let config = Arc::new(Config::default_boards());
    let client = queue::sqs_client().await;
    let dead_letters = client.create_queue().queue_name(format!("{}-dlq", bench.keys.prefix())).send().await?;
    let dead_letters = queue::DeadLetters::new(client, dead_letters.queue_url().unwrap_or_default());
    let metrics = || Metrics::with_sink("bench", Arc::new(|_| ()));
    let consumer =
        queue::App::new(config.clone(), bench.keys.clone(), bench.store.clone(), dead_letters, standings::system_clock(), metrics());
    let router = ingest::router(Arc::new(ingest::App::new(
        config,
        bench.keys.clone(),
        bench.store.clone(),
        standings::system_clock(),
        AuthMode::Off,
        metrics(),
    )));
    let through_queue = |tag: String| {
        let consumer = &consumer;
        async move {
            let response = consumer.handle(sqs_event(&bodies(&tag))?).await;
            match response.batch_item_failures.len() {
                0 => Ok::<_, BenchError>(()),
                failed => Err(format!("{failed} messages were handed back").into()),
            }
        }
    };
    let through_http = |tag: String| {
        let router = &router;
        async move {
            let body = json!({ "events": bodies(&tag) }).to_string();
            let request = Request::post("/v1/events:batch").header("content-type", "application/json").body(Body::from(body))?;
            call(router, request).await.map(|_| ())
        }
    };
    let mut queued = Measurement::new("`queue::App::handle`, SQS event of 100 messages");
    let mut posted = Measurement::new("`POST /v1/events:batch` of 100 events (ingest router)");
    let (mut queued_cpu, mut posted_cpu) = (Cpu::ZERO, Cpu::ZERO);
    through_queue("warm-q".into()).await?;
    through_http("warm-h".into()).await?;
    for repetition in 0..bench.repetitions {
        for batch in 0..BATCHES {
            let before = bench.cpu();
            let (elapsed, ()) = time(through_queue(format!("q{repetition}-{batch}"))).await?;
            queued_cpu += bench.cpu() - before;
            queued.samples.push(elapsed);
            let before = bench.cpu();
            let (elapsed, ()) = time(through_http(format!("h{repetition}-{batch}"))).await?;
            posted_cpu += bench.cpu() - before;
            posted.samples.push(elapsed);
        }
    }
    let per_second = |m: &Measurement| BATCH as f64 / m.median().as_secs_f64();
    let mut table = Table::new(&["method", "batches", "median batch", "messages/s", "client CPU / message", "Redis CPU / message"]);
    for (m, cpu) in [(&queued, queued_cpu), (&posted, posted_cpu)] {
        let (client, redis) = cpu.per((m.samples.len() * BATCH) as u64);
        table.row(vec![
            m.method.clone(),
            m.samples.len().to_string(),
            format!("{:.1} ms", m.median().as_secs_f64() * 1e3),
            format!("{:.0}", per_second(m)),
            format!("{client:.1} µs"),
            format!("{redis:.1} µs"),
        ]);
    }
    Ok(Report {
        title: "queue: SQS batches through the queue function (scenario 9)".into(),
        setup: format!(
            "One client; each batch {BATCH} new comments by {} users, as an SQS event (JSON bodies) to `queue::App::handle` and as \
             one `POST /v1/events:batch` body to the ingest router. {} × {BATCHES} batches of each, alternating, after one untimed \
             batch each. SQS itself (receive, delete) is not in the figures: Lambda's event source mapping does it.",
            grouped(USERS as u64),
            bench.repetitions
        ),
        tables: vec![table],
        notes: vec![format!("queue / events:batch (messages/s): **{:.2}**", ratio(posted.median(), queued.median()))],
        targets: Vec::new(),
    })
}
