//! Model-based test of the scoring semantics: random sequences of events (fresh, retried
//! inside and past the window, backdated, out of order, sent twice at once), clock moves,
//! bans and corrections go through the real `ingest` router, the real Lua scripts and the real
//! Redis (standalone, and the cluster in the suite's second pass). After every sequence each
//! board's periods, in rank order with points and reached-at, must equal the plain-Rust model
//! (tests/src/model.rs), and so must every answer along the way.
//!
//! `STANDINGS_MODEL_CASES` sets the number of sequences (default 128). Shrunk failures are kept
//! in tests/model/regressions.txt and replayed first.

use std::collections::BTreeMap;

use axum::http::Method;
use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, FileFailurePersistence, TestCaseError, TestRunner};
use serde_json::{Value, json};
use standings::domain::tiebreak;
use standings_tests::model::{self, Answer, BoardAnswer, Model, SentEvent};
use standings_tests::{ADMIN, TestApp, at, spawn_ingest_with};

const REGRESSIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/model/regressions.txt");
const ACTIONS: [&str; 4] = ["win", "solo", "once", "lock"];

#[derive(Debug, Clone)]
struct EventSpec {
    id: u8,
    user: u8,
    action: u8,
    target: u8,
    active: bool,
    /// Seconds from the clock at sending; `None`: no `occurred_at`.
    offset: Option<i16>,
}

#[derive(Debug, Clone)]
enum Op {
    Event(EventSpec),
    /// The `back`-th most recent event sent, sent again byte for byte.
    Retry {
        back: u8,
    },
    /// An event sent twice at the same time.
    Twice(EventSpec),
    Advance {
        secs: u16,
    },
    Ban {
        user: u8,
    },
    Unban {
        user: u8,
    },
    Correct {
        beta: bool,
        user: u8,
        delta: i8,
        id: u8,
    },
}

fn event_spec() -> impl Strategy<Value = EventSpec> {
    let offset = prop_oneof![3 => Just(None), 2 => (-1300i16..=120).prop_map(Some), 1 => Just(Some(-900)), 1 => Just(Some(60))];
    let action = prop_oneof![4 => Just(0u8), 3 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)];
    (0u8..24, 0u8..3, action, 0u8..2, prop::bool::weighted(0.7), offset).prop_map(|(id, user, action, target, active, offset)| EventSpec {
        id,
        user,
        action,
        target,
        active,
        offset,
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => event_spec().prop_map(Op::Event),
        3 => (0u8..6).prop_map(|back| Op::Retry { back }),
        1 => event_spec().prop_map(Op::Twice),
        4 => prop_oneof![1u16..120, 0u16..3600, Just(900), Just(901)].prop_map(|secs| Op::Advance { secs }),
        1 => (0u8..3).prop_map(|user| Op::Ban { user }),
        1 => (0u8..3).prop_map(|user| Op::Unban { user }),
        2 => (any::<bool>(), 0u8..3, prop_oneof![-3i8..=-1, 1i8..=3], 0u8..4)
            .prop_map(|(beta, user, delta, id)| Op::Correct { beta, user, delta, id }),
    ]
}

fn sent(spec: &EventSpec, now: DateTime<Utc>) -> SentEvent {
    SentEvent {
        event_id: format!("e{}", spec.id),
        user: format!("u{}", spec.user),
        action: ACTIONS[spec.action as usize].to_owned(),
        target: format!("t{}", spec.target),
        active: spec.active,
        occurred_at: spec.offset.map(|secs| now + Duration::seconds(i64::from(secs))),
    }
}

fn body(event: &SentEvent) -> Value {
    let mut body =
        json!({"event_id": event.event_id, "user_id": event.user, "action": event.action, "target": event.target, "active": event.active});
    if let Some(at) = event.occurred_at {
        body["occurred_at"] = json!(at.to_rfc3339());
    }
    body
}

/// What the model compares of a real answer.
fn answer(status: u16, body: &Value) -> Answer {
    if status != 200 {
        return Answer::Refused { status, code: body["error"]["code"].as_str().unwrap_or_default().to_owned() };
    }
    let Some(results) = body["results"].as_array() else { return Answer::Ok };
    let boards = results
        .iter()
        .map(|r| BoardAnswer {
            board: r["board"].as_str().unwrap().to_owned(),
            applied: r["applied"].as_bool().unwrap(),
            delta: r["delta"].as_i64().unwrap(),
            reason: r["reason"].as_str().map(str::to_owned),
        })
        .collect();
    Answer::Event { duplicate: body["duplicate"].as_bool().unwrap(), boards }
}

/// Every non-empty period sorted set of the app, best first: (board, "kind:id") -> members.
async fn stored_boards(app: &TestApp) -> BTreeMap<(String, String), Vec<(String, i64, i64)>> {
    let mut boards = BTreeMap::new();
    for key in app.written_keys().await {
        let Some((head, period)) = key.split_once(":z:") else { continue };
        let board = head.rsplit_once('{').and_then(|(_, b)| b.strip_suffix('}')).unwrap().to_owned();
        let members: Vec<(String, f64)> =
            redis::cmd("ZREVRANGE").arg(&key).arg(0).arg(-1).arg("WITHSCORES").query_async(&mut app.redis.clone()).await.unwrap();
        let members = members
            .into_iter()
            .map(|(member, composite)| {
                let (points, reached) = tiebreak::decode(composite).unwrap();
                (member, points, reached.timestamp())
            })
            .collect();
        boards.insert((board, period.to_owned()), members);
    }
    boards
}

async fn run(app: &TestApp, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut model = Model::new();
    let mut history: Vec<SentEvent> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        let now = app.now();
        let (expected, got) = match op {
            Op::Event(spec) => {
                let event = sent(spec, now);
                let (status, reply) = app.event(body(&event)).await;
                let expected = model.event(&event, now);
                history.push(event);
                (expected, answer(status.as_u16(), &reply))
            }
            Op::Retry { back } => {
                let Some(event) = history.iter().rev().nth(usize::from(*back) % history.len().max(1)).cloned() else { continue };
                let (status, reply) = app.event(body(&event)).await;
                (model.event(&event, now), answer(status.as_u16(), &reply))
            }
            Op::Twice(spec) => {
                let event = sent(spec, now);
                let (a, b) = tokio::join!(app.event(body(&event)), app.event(body(&event)));
                let first = model.event(&event, now);
                let second = model.event(&event, now);
                history.push(event);
                // Each board counts the event once; which delivery each board saw first is a
                // race, so only the statuses and per-board outcomes are compared.
                let strip = |answer: Answer| match answer {
                    Answer::Event { boards, .. } => Answer::Event { duplicate: false, boards },
                    other => other,
                };
                let mut got = [strip(answer(a.0.as_u16(), &a.1)), strip(answer(b.0.as_u16(), &b.1))];
                let mut want = [strip(first), strip(second)];
                got.sort_by_key(|a| format!("{a:?}"));
                want.sort_by_key(|a| format!("{a:?}"));
                prop_assert_eq!(got, want, "step {}: {:?}", step, op);
                continue;
            }
            Op::Advance { secs } => {
                app.set_now(now + Duration::seconds(i64::from(*secs)));
                continue;
            }
            Op::Ban { user } => {
                let (status, reply) = app.call(Method::POST, &format!("/v1/admin/users/u{user}/ban"), "", ADMIN).await;
                (model.ban(&format!("u{user}"), now), answer(status.as_u16(), &reply))
            }
            Op::Unban { user } => {
                let (status, reply) = app.call(Method::DELETE, &format!("/v1/admin/users/u{user}/ban"), "", ADMIN).await;
                (model.unban(&format!("u{user}")), answer(status.as_u16(), &reply))
            }
            Op::Correct { beta, user, delta, id } => {
                let board = if *beta { "beta" } else { "alpha" };
                let request = json!({"correction_id": format!("c{id}"), "delta": delta, "reason": "model"});
                let path = format!("/v1/admin/boards/{board}/users/u{user}/corrections");
                let (status, reply) = app.call(Method::POST, &path, request.to_string(), ADMIN).await;
                let got = match answer(status.as_u16(), &reply) {
                    Answer::Event { .. } => Answer::Ok,
                    other => other,
                };
                (model.correct(board, &format!("u{user}"), i64::from(*delta), &format!("c{id}"), now), got)
            }
        };
        prop_assert_eq!(got, expected, "step {}: {:?}", step, op);
    }
    let want: BTreeMap<_, _> = model.boards().into_iter().filter(|(_, members)| !members.is_empty()).collect();
    prop_assert_eq!(stored_boards(app).await, want);
    Ok(())
}

#[test]
fn random_sequences_leave_every_board_as_the_model_says() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let cases = std::env::var("STANDINGS_MODEL_CASES").map_or(128, |v| v.parse().expect("STANDINGS_MODEL_CASES is a number"));
    let config =
        RunnerConfig { cases, failure_persistence: Some(Box::new(FileFailurePersistence::Direct(REGRESSIONS))), ..RunnerConfig::default() };
    let result = TestRunner::new(config).run(&prop::collection::vec(op(), 1..60), |ops| {
        runtime.block_on(async {
            let app = spawn_ingest_with(model::config()).await;
            // Forty minutes before midnight UTC: sequences cross a day boundary.
            app.set_now(at("2026-11-22T23:20:00Z"));
            run(&app, &ops).await
        })
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
