//! Exactly-once under concurrency: duplicates, conflicts, and a mixed concurrent load checked
//! against a sequential model.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};
use standings_tests::{day, month, spawn_ingest};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_concurrent_deliveries_of_one_event_apply_once_with_identical_results() {
    let app = Arc::new(spawn_ingest().await);
    let event = json!({"event_id": "same", "user_id": "u1", "action": "comment", "target": "a1"});
    let tasks: Vec<_> = (0..1000)
        .map(|_| {
            let (app, event) = (app.clone(), event.clone());
            tokio::spawn(async move { app.event(event).await })
        })
        .collect();
    let mut replies = Vec::new();
    for task in tasks {
        let (status, body) = task.await.unwrap();
        assert_eq!(status, 200, "{body}");
        replies.push(body);
    }
    let firsts = replies.iter().filter(|r| r["duplicate"] == false).count();
    assert_eq!(firsts, 1, "exactly one delivery applies the event");
    let results: HashSet<String> = replies.iter().map(|r| r["results"].to_string()).collect();
    assert_eq!(results.len(), 1, "every delivery gets the same results: {results:?}");
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(3));
    assert_eq!(app.points("activity", month("2026-11-22"), "u1").await, Some(3));
}

#[tokio::test]
async fn the_same_id_with_another_payload_is_a_conflict_and_writes_nothing() {
    let app = spawn_ingest().await;
    app.event(json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"})).await;
    let keys_before = app.keyspace().await;
    for other in [
        json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a2"}),
        json!({"event_id": "e1", "user_id": "u2", "action": "comment", "target": "a1"}),
        json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1", "active": false}),
    ] {
        let (status, body) = app.event(other).await;
        assert_eq!(status, 409, "{body}");
        assert_eq!(body["error"]["code"], "idempotency_conflict");
    }
    assert_eq!(app.keyspace().await, keys_before);
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(3));
    assert_eq!(app.points("activity", day("2026-11-22"), "u2").await, None);
    // The retry of the original still gets its first answer.
    let (status, retry) = app.event(json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"})).await;
    assert_eq!((status.as_u16(), &retry["duplicate"]), (200, &json!(true)));
}

/// xorshift64*: deterministic, dependency-free workload generation.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

const USERS: u64 = 50;
const TASKS: u64 = 32;
const EVENTS_PER_TASK: u64 = 2000;
const ACTIONS: [(&str, i64); 5] = [("praise", 2), ("collect", 2), ("comment", 3), ("follow", 2), ("page_view", 1)];

/// One task's events; each (user, action, target) is only ever touched by one task, so the
/// per-ledger-field order is fixed while the users' scores are updated by every task at once.
fn workload(task: u64) -> Vec<Value> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (task + 1));
    (0..EVENTS_PER_TASK)
        .map(|i| {
            let (action, _) = ACTIONS[(rng.next() % 5) as usize];
            let active = action == "page_view" || !rng.next().is_multiple_of(3);
            json!({
                "event_id": format!("t{task}-e{i}"),
                "user_id": format!("u{}", rng.next() % USERS),
                "action": action,
                "target": format!("t{task}-x{}", rng.next() % 8),
                "active": active,
            })
        })
        .collect()
}

/// The rules applied one event at a time.
fn sequential_model(events: impl Iterator<Item = Value>) -> HashMap<String, i64> {
    let mut given: HashSet<(String, String, String)> = HashSet::new();
    let mut scores: HashMap<String, i64> = HashMap::new();
    for e in events {
        let field =
            (e["user_id"].as_str().unwrap().to_owned(), e["action"].as_str().unwrap().to_owned(), e["target"].as_str().unwrap().to_owned());
        let points = ACTIONS.iter().find(|(a, _)| *a == field.1).unwrap().1;
        let user = field.0.clone();
        if e["active"] == true {
            if given.insert(field) {
                *scores.entry(user).or_default() += points;
            }
        } else if given.remove(&field) {
            *scores.entry(user).or_default() -= points;
        }
    }
    scores
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_mixed_events_equal_the_sequential_model() {
    let app = Arc::new(spawn_ingest().await);
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let app = app.clone();
            tokio::spawn(async move {
                for event in workload(task) {
                    let (status, body) = app.event(event).await;
                    assert_eq!(status, 200, "{body}");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let expected = sequential_model((0..TASKS).flat_map(workload));
    let mut nonzero = 0;
    for u in 0..USERS {
        let user = format!("u{u}");
        let want = expected.get(&user).copied().filter(|&p| p > 0);
        nonzero += usize::from(want.is_some());
        assert_eq!(app.points("activity", day("2026-11-22"), &user).await, want, "day score of {user}");
        assert_eq!(app.points("activity", month("2026-11-22"), &user).await, want, "month score of {user}");
    }
    assert!(nonzero > 40, "the workload scores most users ({nonzero})");
}
