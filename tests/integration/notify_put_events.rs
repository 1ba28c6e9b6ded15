//! `PutEvents` partial failures through the real SDK: a stub EventBridge endpoint answers the
//! real JSON (`FailedEntryCount`, an entry's `ErrorCode`), the SDK parses it, and the drain
//! commits the step with the entries the bus refused held, due at once: the next run sends
//! those, with the same ids, and nothing the bus took.

use std::sync::{Arc, Mutex};

use axum::routing::post;
use journal::{EventBridgeBus, Notifier};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::notify::spawn_notified;

/// What the stub answers to each `PutEvents`: refuse the second entry of call number `fail_call`
/// (0-based) when set.
#[derive(Default)]
struct Stub {
    calls: usize,
    fail_call: Option<usize>,
    /// The detail ids every accepted entry carried, in order.
    accepted: Vec<String>,
}

async fn put_events(stub: Arc<Mutex<Stub>>, body: String) -> ([(&'static str, &'static str); 1], String) {
    let request: Value = serde_json::from_str(&body).expect("PutEvents sends JSON");
    let mut stub = stub.lock().unwrap();
    let call = stub.calls;
    stub.calls += 1;
    let mut failed = 0;
    let entries: Vec<Value> = request["Entries"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            if stub.fail_call == Some(call) && i == 1 {
                failed += 1;
                return json!({"ErrorCode": "InternalFailure", "ErrorMessage": "try again"});
            }
            let detail: Value = serde_json::from_str(entry["Detail"].as_str().unwrap()).unwrap();
            stub.accepted.push(detail["id"].as_str().unwrap().to_owned());
            json!({"EventId": format!("ev-{call}-{i}")})
        })
        .collect();
    ([("content-type", "application/x-amz-json-1.1")], json!({"FailedEntryCount": failed, "Entries": entries}).to_string())
}

async fn stub_bus(stub: Arc<Mutex<Stub>>) -> EventBridgeBus {
    let app = axum::Router::new().route("/", post(move |body: String| put_events(stub.clone(), body)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let config = standings::runtime::aws::sdk_config(1, std::time::Duration::from_secs(5)).await;
    let client = aws_sdk_eventbridge::Client::from_conf(
        aws_sdk_eventbridge::config::Builder::from(&config).endpoint_url(format!("http://{address}")).build(),
    );
    EventBridgeBus::new(client, "stub-bus")
}

#[tokio::test]
async fn a_put_events_answer_with_failed_entries_resends_only_the_refused_entries() {
    let config = Config::parse(
        r#"
        [[boards]]
        name = "race"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all"]
        top = 20
        rules = [{ action = "lap", points = 1, max_points = 100, scope = "none" }]
        notify = { top = 20 }
        "#,
    )
    .unwrap();
    let app = spawn_notified(config).await;
    for i in 0..15 {
        let (status, body) =
            app.event(json!({"event_id": format!("e{i}"), "user_id": format!("u{i:02}"), "action": "lap", "points": 20 - i})).await;
        assert_eq!(status, 200, "{body}");
    }
    let waiting = app.notices_len("race").await;

    let stub = Arc::new(Mutex::new(Stub { fail_call: Some(1), ..Stub::default() }));
    let report = app.notify(Notifier::new(stub_bus(stub.clone()).await)).await;
    let (calls, first_accepted) = {
        let stub = stub.lock().unwrap();
        (stub.calls, stub.accepted.clone())
    };
    assert_eq!(calls, 2, "the drain stops at the call with a refused entry");
    assert!(first_accepted.len() > 10, "the first call's entries and the second's others were accepted");
    assert!(report.boards.iter().any(|b| b.error.as_deref().is_some_and(|e| e.contains("InternalFailure"))), "{report:?}");
    assert!(waiting > 0);
    // Counted from the refused entry's write, not from the epoch.
    assert!(report.notification_lag_seconds < 600.0, "{report:?}");
    assert_eq!(app.notices_len("race").await, 0, "the step is committed: what was refused waits in the held windows");

    let stub = Arc::new(Mutex::new(Stub::default()));
    let report = app.notify(Notifier::new(stub_bus(stub.clone()).await)).await;
    assert!(report.boards.iter().all(|b| b.error.is_none()), "{report:?}");
    assert_eq!(app.notices_len("race").await, 0);
    let resent = stub.lock().unwrap().accepted.clone();
    assert!(!resent.is_empty() && resent.iter().all(|id| !first_accepted.contains(id)), "nothing the bus took is sent again: {resent:?}");
    assert_eq!(resent.len(), 1, "only the refused entry, the second of the second call: {resent:?}");
    let mut all: Vec<&String> = first_accepted.iter().chain(&resent).collect();
    let total = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), total, "every event once");
}
