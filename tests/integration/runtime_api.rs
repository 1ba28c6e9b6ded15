//! The real `ingest` binary under a minimal Lambda Runtime API: many invocations served by one
//! process at once (concurrent mode), exact results, and its JSON logs and EMF metrics.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use standings::domain::period::{Period, PeriodKind};
use standings::redis::keys::Keys;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{Notify, watch};

/// Workers the runtime must have polling at the same time before any invocation is handed
/// out: a sequential runtime never gets there, so the test fails instead of passing slowly.
const WORKERS: usize = 8;

struct Emulator {
    queue: Mutex<VecDeque<(String, Value)>>,
    /// `next` polls received. None is answered before the gate opens, so until then this is
    /// the number of workers polling at the same time.
    polls: Mutex<usize>,
    gate: watch::Sender<bool>,
    responses: Mutex<HashMap<String, Value>>,
    answered: Notify,
}

async fn next(State(emulator): State<Arc<Emulator>>) -> (HeaderMap, Json<Value>) {
    {
        let mut polls = emulator.polls.lock().unwrap();
        *polls += 1;
        if *polls >= WORKERS {
            emulator.gate.send_replace(true);
        }
    }
    emulator.gate.subscribe().wait_for(|open| *open).await.unwrap();
    let Some((id, event)) = emulator.queue.lock().unwrap().pop_front() else {
        return std::future::pending().await;
    };
    let deadline = chrono::Utc::now().timestamp_millis() + 60_000;
    let mut headers = HeaderMap::new();
    headers.insert("lambda-runtime-aws-request-id", id.parse().unwrap());
    headers.insert("lambda-runtime-deadline-ms", deadline.to_string().parse().unwrap());
    headers.insert("lambda-runtime-invoked-function-arn", "arn:aws:lambda:us-east-1:123456789012:function:ingest".parse().unwrap());
    headers.insert("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000".parse().unwrap());
    (headers, Json(event))
}

async fn respond(State(emulator): State<Arc<Emulator>>, Path(id): Path<String>, body: String) {
    let response = serde_json::from_str(&body).unwrap_or_else(|e| json!({"unparsable_response": body, "error": e.to_string()}));
    emulator.responses.lock().unwrap().insert(id, response);
    emulator.answered.notify_one();
}

async fn failed(State(emulator): State<Arc<Emulator>>, Path(id): Path<String>, body: String) {
    emulator.responses.lock().unwrap().insert(id, json!({"invocation_error": body}));
    emulator.answered.notify_one();
}

async fn init_failed(body: String) {
    panic!("the function failed to initialise: {body}");
}

/// An API Gateway HTTP API (v2) event for `POST /v1/events`, with the write scope.
fn api_gateway_event(body: &Value) -> Value {
    let mut event: Value = serde_json::from_str(include_str!("../../functions/ingest/fixtures/post-event.json")).unwrap();
    event["body"] = Value::String(body.to_string());
    event
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_process_serves_concurrent_invocations_with_exact_results_logs_and_metrics() {
    let prefix = standings_tests::unique_prefix();
    let occurred_at = chrono::Utc::now();
    // 100 comments by 10 users, 20 of them delivered twice, and 5 unknown actions.
    let mut invocations: Vec<(String, Value)> = Vec::new();
    for i in 0..100 {
        let event = json!({"event_id": format!("e{i}"), "user_id": format!("u{}", i % 10), "action": "comment",
                           "target": format!("t{i}"), "occurred_at": occurred_at.to_rfc3339()});
        invocations.push((format!("req-{i}"), api_gateway_event(&event)));
        if i < 20 {
            invocations.push((format!("req-{i}-again"), api_gateway_event(&event)));
        }
    }
    for i in 0..5 {
        let event = json!({"event_id": format!("bad{i}"), "user_id": "u1", "action": "teleport"});
        invocations.push((format!("req-bad-{i}"), api_gateway_event(&event)));
    }
    let total = invocations.len();

    let emulator = Arc::new(Emulator {
        queue: Mutex::new(invocations.into()),
        polls: Mutex::new(0),
        gate: watch::channel(false).0,
        responses: Mutex::new(HashMap::new()),
        answered: Notify::new(),
    });
    let api = Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route("/2018-06-01/runtime/invocation/{id}/response", post(respond))
        .route("/2018-06-01/runtime/invocation/{id}/error", post(failed))
        .route("/2018-06-01/runtime/init/error", post(init_failed))
        .with_state(emulator.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, api).await.unwrap() });

    let binary = std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().join("ingest");
    let mut function = tokio::process::Command::new(&binary)
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "ingest")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("AWS_LAMBDA_MAX_CONCURRENCY", WORKERS.to_string())
        .envs(std::env::vars().filter(|(name, _)| name.starts_with("REDIS_")))
        .env("STANDINGS_KEY_PREFIX", &prefix)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{} must be built (scripts/test.sh builds all targets): {e}", binary.display()));
    let output = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut lines = BufReader::new(function.stdout.take().unwrap()).lines();
    let collected = output.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            collected.lock().unwrap().push(line);
        }
    });

    let all_answered = async {
        while emulator.responses.lock().unwrap().len() < total {
            emulator.answered.notified().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), all_answered).await.unwrap_or_else(|_| {
        panic!("{} of {total} answered after {} polls", emulator.responses.lock().unwrap().len(), emulator.polls.lock().unwrap())
    });
    function.kill().await.unwrap();

    // Exact results.
    let responses = emulator.responses.lock().unwrap().clone();
    let status = |id: &str| responses[id]["statusCode"].as_u64().unwrap_or_else(|| panic!("{id}: {}", responses[id]));
    assert!((0..100).all(|i| status(&format!("req-{i}")) == 200));
    assert!((0..20).all(|i| status(&format!("req-{i}-again")) == 200));
    assert!((0..5).all(|i| status(&format!("req-bad-{i}")) == 422));
    let duplicates = responses
        .values()
        .filter_map(|r| serde_json::from_str::<Value>(r["body"].as_str()?).ok())
        .filter(|body| body["duplicate"] == true)
        .count();
    assert_eq!(duplicates, 20, "each repeated delivery is answered as a duplicate exactly once");
    let day = Period::containing(PeriodKind::Day, occurred_at, chrono_tz::Asia::Shanghai);
    let key = Keys::new(&prefix).unwrap().board("activity").period(&day);
    let mut redis = standings::redis::store::Store::connect(&standings_tests::redis_settings()).unwrap().connection().await.unwrap();
    for u in 0..10 {
        let composite: f64 = redis::cmd("ZSCORE").arg(&key).arg(format!("u{u}")).query_async(&mut redis).await.unwrap();
        assert_eq!(standings::domain::tiebreak::points_of(composite), 30, "u{u}: ten comments, each once");
    }

    // Logs and metrics, parsed.
    let output = output.lock().unwrap().clone();
    let json_lines: Vec<Value> = output.iter().filter_map(|line| serde_json::from_str(line).ok()).collect();
    let event_log = |event_id: &str, outcome: &str| {
        json_lines
            .iter()
            .find(|l| l["target"] == "standings::events" && l["event_id"] == event_id && l["outcome"] == outcome)
            .unwrap_or_else(|| panic!("no {outcome} log line for {event_id}"))
            .clone()
    };
    let applied = event_log("e50", "applied");
    assert_eq!(applied["level"], "INFO");
    assert_eq!(applied["boards"], "[\"activity\"]");
    let spans = applied["spans"].as_array().unwrap();
    assert!(spans.iter().any(|s| s["requestId"] == "req-50"), "the Lambda request id is on the line: {applied}");
    assert!(spans.iter().any(|s| s["route"] == "/v1/events" && s["event_id"] == "e50"), "{applied}");
    let duplicate_lines = json_lines.iter().filter(|l| l["target"] == "standings::events" && l["outcome"] == "duplicate");
    assert_eq!(duplicate_lines.count(), 20);
    let refused = event_log("bad2", "refused");
    assert_eq!(refused["code"], "unknown_action");
    assert!(
        !output.iter().any(|line| line.contains("standings/write") || line.contains(&standings_tests::redis_url())),
        "no claims or store address in the output"
    );

    let metric_total = |outcome: &str, code: Option<&str>| -> f64 {
        json_lines
            .iter()
            .filter(|l| l["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"] == "Events" && l["Outcome"] == outcome)
            .filter(|l| code.is_none_or(|c| l["Code"] == c))
            .map(|l| l["Events"].as_f64().unwrap())
            .sum()
    };
    assert_eq!(metric_total("applied", None), 100.0);
    assert_eq!(metric_total("duplicate", None), 20.0);
    assert_eq!(metric_total("refused", Some("unknown_action")), 5.0);
    assert!(json_lines.iter().all(|l| l.get("UserId").is_none() && l.get("user_id").is_none()), "no user ids as dimensions or fields");
    let latency =
        json_lines.iter().find(|l| l["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"] == "RedisLatency").expect("a latency metric");
    assert_eq!((latency["Route"].as_str(), latency["Function"].as_str()), (Some("/v1/events"), Some("ingest")));
}
