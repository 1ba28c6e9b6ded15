//! A model-based check of restores (docs/journal.md#restore): random interleavings of writes
//! (comments, per-day gives and their take-backs), rule changes (`comment` worth 3 or 5: two
//! functions over the same keys), drains, losses of a random subset of the board's keys and
//! restores (some stopped part-way, under either rule). The model is the rules as documented,
//! applied with the rule in force at each write: after every restore the board holds what the
//! model says and every key equals what it was before the loss.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use journal::{Restorer, S3Objects, Status};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::json;
use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings_tests::journal::{new_bucket, s3, spawn_journaled_on};
use standings_tests::{TestApp, at};

const LEARN: i64 = 10;

fn forum(comment: i64) -> Config {
    Config::parse(&format!(
        r#"
        [[boards]]
        name = "forum"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all", "week"]
        top = 10
        statements = true
        rules = [
          {{ action = "comment", points = {comment}, scope = "none" }},
          {{ action = "learn", points = {LEARN}, scope = "user_target_day", reversible = true }},
        ]
        "#
    ))
    .unwrap()
}

#[derive(Debug, Clone)]
enum Op {
    /// A comment by `user` through the function whose rule gives `comment`: 3 or 5.
    Comment {
        user: u8,
        five: bool,
    },
    Learn {
        user: u8,
        target: u8,
        give: bool,
    },
    Drain,
    /// The keys whose bit is set in `mask` (of the board's keys but its stream, in name order)
    /// are lost; then a restore, stopped `stops` times by its deadline before it completes.
    Lose {
        mask: u64,
        stops: u8,
        five: bool,
    },
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (0u8..3, any::<bool>()).prop_map(|(user, five)| Op::Comment { user, five }),
        4 => (0u8..3, 0u8..3, prop::bool::weighted(0.7)).prop_map(|(user, target, give)| Op::Learn { user, target, give }),
        2 => Just(Op::Drain),
        2 => (1u64.., 0u8..4, any::<bool>()).prop_map(|(mask, stops, five)| Op::Lose { mask, stops, five }),
    ];
    prop::collection::vec(op, 1..24)
}

/// The rules as documented: a comment earns the rule's points of the moment; a give of a
/// per-day target earns 10 once a day; its take-back removes what it gave, once.
#[derive(Default)]
struct Model {
    points: BTreeMap<String, i64>,
    given: BTreeSet<(String, u8)>,
}

type State = Vec<(String, Vec<u8>, i64)>;

async fn state(app: &TestApp) -> State {
    app.keyspace().await.into_iter().filter(|(key, ..)| !key.ends_with(":journal")).collect()
}

async fn board(app: &TestApp) -> BTreeMap<String, i64> {
    let all = Period::containing(PeriodKind::All, at("2026-11-22T12:00:00Z"), chrono_tz::UTC);
    let mut points = BTreeMap::new();
    for user in ["u0", "u1", "u2"] {
        if let Some(held) = app.points("forum", all.clone(), user).await {
            points.insert(user.to_owned(), held);
        }
    }
    points
}

async fn run_case(ops: &[Op]) -> Result<(), TestCaseError> {
    let keys = standings::redis::keys::Keys::new(&standings_tests::unique_prefix()).unwrap();
    let apps = [spawn_journaled_on(forum(3), keys.clone()).await, spawn_journaled_on(forum(5), keys).await];
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let objects = || S3Objects::new(client.clone(), &bucket);
    let mut model = Model::default();
    for (n, op) in ops.iter().enumerate() {
        // One instant per write, on a fixed day: the day ledgers and the week never roll over.
        let now = at("2026-11-22T12:00:00Z") + Duration::seconds(n as i64);
        match op {
            Op::Comment { user, five } => {
                let app = &apps[usize::from(*five)];
                app.set_now(now);
                let user = format!("u{user}");
                let (status, reply) = app.event(json!({"event_id": format!("e{n}"), "user_id": user, "action": "comment"})).await;
                prop_assert_eq!(status, StatusCode::OK, "{}", reply);
                *model.points.entry(user).or_default() += if *five { 5 } else { 3 };
            }
            Op::Learn { user, target, give } => {
                apps[0].set_now(now);
                let user = format!("u{user}");
                let event = json!({"event_id": format!("e{n}"), "user_id": user, "action": "learn", "target": format!("t{target}"), "active": give});
                let (status, reply) = apps[0].event(event).await;
                prop_assert_eq!(status, StatusCode::OK, "{}", reply);
                let key = (user.clone(), *target);
                if *give && model.given.insert(key.clone()) {
                    *model.points.entry(user).or_default() += LEARN;
                } else if !*give && model.given.remove(&key) {
                    *model.points.entry(user).or_default() -= LEARN;
                }
            }
            Op::Drain => {
                let report = apps[0].drainer(objects(), Arc::default()).with_chunk(3).drain(Utc::now() + Duration::minutes(5)).await;
                prop_assert!(report.boards.iter().all(|b| b.error.is_none()), "{:?}", report);
            }
            Op::Lose { mask, stops, five } => {
                let before = state(&apps[0]).await;
                let mut conn = apps[0].redis.clone();
                for (i, (key, ..)) in before.iter().enumerate() {
                    if mask & (1 << (i % 64)) != 0 {
                        let _: () = redis::cmd("DEL").arg(key).query_async(&mut conn).await.unwrap();
                    }
                }
                let app = &apps[usize::from(*five)];
                let restorer = Restorer::new(app.config.clone(), app.keys.clone(), app.store.clone(), objects());
                for _ in 0..*stops {
                    restorer.restore(Some("forum"), Utc::now() - Duration::seconds(1)).await.unwrap();
                }
                let report = restorer.restore(Some("forum"), Utc::now() + Duration::minutes(5)).await.unwrap();
                prop_assert_eq!(report.status, Status::Complete, "{:?}", report);
                let after = state(&apps[0]).await;
                let names = |state: &State| state.iter().map(|(key, ..)| key.clone()).collect::<Vec<_>>();
                prop_assert_eq!(names(&before), names(&after));
                for ((key, dump, expiry), (_, dump_after, expiry_after)) in before.iter().zip(&after) {
                    prop_assert!(dump == dump_after, "{} differs after the restore", key);
                    prop_assert!((expiry - expiry_after).abs() <= 2_000, "{}: expiry {} then {}", key, expiry, expiry_after);
                }
            }
        }
        let expected: BTreeMap<String, i64> = model.points.iter().filter(|(_, p)| **p > 0).map(|(u, p)| (u.clone(), *p)).collect();
        prop_assert_eq!(board(&apps[0]).await, expected, "after {:?}", op);
    }
    Ok(())
}

#[test]
fn restores_after_random_losses_and_rule_changes_bring_back_what_the_model_says() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let cases = std::env::var("STANDINGS_MODEL_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(16);
    TestRunner::new(RunnerConfig { cases, ..RunnerConfig::default() })
        .run(&ops(), |ops| runtime.block_on(run_case(&ops)))
        .unwrap_or_else(|failure| panic!("{failure}"));
}
