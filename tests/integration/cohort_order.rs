//! A league period's cohorts in order (prelude.lua `order_entry`, docs/leagues.md#cohort-order)
//! are derived data every write that moves a placed member keeps: gives, take-backs, capped
//! and repeated events, corrections (set, add, to nothing), voids, bans and unbans, at equal
//! and later seconds. Generated runs of those go through the real routes and scripts; after
//! every step each kept cohort's entries must be exactly its placed members' composites on the
//! period's board (read from the placements and the board, not from the order), no entry may
//! be left for a member who left, and the league route must list each cohort in the order the
//! entries give.

use std::collections::{BTreeMap, BTreeSet};

use axum::http::Method;
use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::json;
use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings::redis::keys::Keys;
use standings_tests::journal::spawn_journaled_on;
use standings_tests::journal::{call, new_bucket, s3};
use standings_tests::{ADMIN, TestApp, at, unique_prefix};

const USERS: u8 = 7;

fn config() -> Config {
    Config::parse(
        r#"
        [[boards]]
        name = "lg"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["week"]
        top = 10
        rules = [
          { action = "play", points = 2, max_points = 100, scope = "none", daily_cap = 9 },
          { action = "like", points = 3, max_points = 100, scope = "user_target" },
        ]
        league = { period = "week", cohort_size = 3, tiers = ["bronze", "silver"], promote = 1, demote = 1 }
        notify = { top = 10 }
        "#,
    )
    .expect("a valid league configuration")
}

#[derive(Debug, Clone)]
enum Step {
    Play {
        user: u8,
    },
    Like {
        user: u8,
        target: u8,
        active: bool,
    },
    /// A correction: `Some(n)` sets n points, `None` adds `add`.
    Correct {
        user: u8,
        set: Option<u8>,
        add: i8,
    },
    /// Voids what the user's events earned in the last `back` seconds.
    Void {
        user: u8,
        back: u8,
    },
    Ban {
        user: u8,
    },
    Unban {
        user: u8,
    },
}

fn step() -> impl Strategy<Value = (Step, u8)> {
    let user = 0..USERS;
    let step = prop_oneof![
        8 => user.clone().prop_map(|user| Step::Play { user }),
        6 => (user.clone(), 0u8..3, any::<bool>()).prop_map(|(user, target, active)| Step::Like { user, target, active }),
        2 => (user.clone(), prop::option::of(0u8..8), -4i8..6).prop_map(|(user, set, add)| Step::Correct { user, set, add }),
        2 => (user.clone(), 1u8..20).prop_map(|(user, back)| Step::Void { user, back }),
        1 => user.clone().prop_map(|user| Step::Ban { user }),
        1 => user.prop_map(|user| Step::Unban { user }),
    ];
    (step, 0u8..3)
}

/// The period's kept cohorts as the order holds them (cohort -> entries best first), and any
/// entry of a cohort that is not kept.
async fn order_of(app: &TestApp, period: &Period) -> (BTreeMap<String, Vec<String>>, Vec<String>) {
    let key = app.keys.board("lg").league_order(&period.id);
    let all: Vec<String> = redis::cmd("ZRANGE").arg(&key).arg(0).arg(-1).query_async(&mut app.redis.clone()).await.unwrap();
    let kept: BTreeSet<String> = all.iter().filter_map(|e| e.strip_suffix('#')).map(str::to_owned).collect();
    let mut cohorts: BTreeMap<String, Vec<String>> = kept.iter().map(|c| (c.clone(), Vec::new())).collect();
    let mut orphans = Vec::new();
    for entry in all.iter().rev().filter(|e| !e.ends_with('#')) {
        let cohort = entry.split('|').next().unwrap();
        match cohorts.get_mut(cohort) {
            Some(entries) => entries.push(entry.clone()),
            None => orphans.push(entry.clone()),
        }
    }
    (cohorts, orphans)
}

/// What a kept cohort's entries must be, from the placements and the board alone: every placed
/// member with a composite, best first (the greater id first among equal composites), then
/// those without one (greater id first: the entries' own order).
async fn expected(app: &TestApp, period: &Period, cohort: &str) -> Vec<String> {
    let keys = app.keys.board("lg");
    let mut conn = app.redis.clone();
    let placements: BTreeMap<String, String> =
        redis::cmd("HGETALL").arg(keys.league_members(&period.id)).query_async(&mut conn).await.unwrap();
    let (mut scored, mut unscored): (Vec<(u64, String)>, Vec<String>) = (Vec::new(), Vec::new());
    for (user, placed) in placements {
        if placed != cohort {
            continue;
        }
        let composite: Option<f64> = redis::cmd("ZSCORE").arg(keys.period(period)).arg(&user).query_async(&mut conn).await.unwrap();
        match composite {
            Some(composite) => scored.push((composite as u64, user)),
            None => unscored.push(user),
        }
    }
    scored.sort_by(|a, b| b.cmp(a));
    unscored.sort_by(|a, b| b.cmp(a));
    let scored = scored.into_iter().map(|(composite, user)| format!("{cohort}|{composite:016}|{user}"));
    scored.chain(unscored.into_iter().map(|user| format!("{cohort}|!{user}"))).collect()
}

/// Runs the steps; whether some cohort's order was kept at the end.
async fn run(app: &TestApp, router: &axum::Router, steps: &[(Step, u8)]) -> Result<bool, TestCaseError> {
    let start = at("2026-11-23T01:00:00Z");
    let period = Period::containing(PeriodKind::Week(chrono::Weekday::Mon), start, chrono_tz::UTC);
    let mut now: DateTime<Utc> = start;
    for (i, (step, advance)) in steps.iter().enumerate() {
        now += Duration::seconds(i64::from(*advance));
        app.set_now(now);
        let id = format!("e{i}");
        let status = match step {
            Step::Play { user } => app.event(json!({"event_id": id, "user_id": format!("u{user}"), "action": "play"})).await.0,
            Step::Like { user, target, active } => {
                let body = json!({"event_id": id, "user_id": format!("u{user}"), "action": "like", "target": format!("t{target}"), "active": active});
                app.event(body).await.0
            }
            Step::Correct { user, set, add } => {
                let body = match set {
                    Some(set) => json!({"reason": "r", "correction_id": id, "set": set}),
                    None => json!({"reason": "r", "correction_id": id, "add": add}),
                };
                app.call(Method::POST, &format!("/v1/admin/boards/lg/users/u{user}/corrections"), body.to_string(), ADMIN).await.0
            }
            Step::Void { user, back } => {
                let body = json!({"void_id": id, "from": now - Duration::seconds(i64::from(*back)), "to": now + Duration::seconds(1), "reason": "r"});
                call(router, Method::POST, &format!("/v1/admin/boards/lg/users/u{user}/void"), &body, ADMIN).await.0
            }
            Step::Ban { user } => app.call(Method::POST, &format!("/v1/admin/users/u{user}/ban"), "{}", ADMIN).await.0,
            Step::Unban { user } => app.call(Method::POST, &format!("/v1/admin/users/u{user}/unban"), "{}", ADMIN).await.0,
        };
        // Refusals (a banned user, a take-back of nothing, a correction out of range) are
        // answers too; a 5xx is not.
        prop_assert!(status.as_u16() < 500, "step {} {:?}: {}", i, step, status);

        let (cohorts, orphans) = order_of(app, &period).await;
        prop_assert!(orphans.is_empty(), "step {} {:?}: entries of cohorts not kept: {:?}", i, step, orphans);
        for (cohort, entries) in &cohorts {
            prop_assert_eq!(entries, &expected(app, &period, cohort).await, "step {} {:?}: cohort {}", i, step, cohort);
        }
        // A cohort whose order is kept is listed by the league route in that order (those
        // without a score last, by name).
        for (cohort, entries) in &cohorts {
            let Some(first) = entries.first() else { continue };
            let user = first.rsplit('|').next().unwrap().trim_start_matches('!');
            let (_, body) = app.get(&format!("/v1/boards/lg/users/{user}/league")).await;
            let shown: Vec<&str> = body["entries"].as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap()).collect();
            let mut ordered: Vec<&str> = entries.iter().filter(|e| !e.contains("|!")).map(|e| e.rsplit('|').next().unwrap()).collect();
            let mut unscored: Vec<&str> = entries.iter().filter_map(|e| e.split_once("|!").map(|(_, user)| user)).collect();
            unscored.sort();
            ordered.extend(unscored);
            prop_assert_eq!(&shown[..], &ordered[..], "step {}: cohort {} on the league route", i, cohort);
        }
    }
    Ok(!order_of(app, &period).await.0.is_empty())
}

#[test]
fn every_write_keeps_the_cohorts_order_equal_to_the_board() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let cases = std::env::var("STANDINGS_COHORT_CASES").map_or(12, |v| v.parse().expect("STANDINGS_COHORT_CASES is a number"));
    let client = runtime.block_on(s3());
    let bucket = runtime.block_on(new_bucket(&client));
    let kept = std::cell::Cell::new(0u32);
    let result = TestRunner::new(RunnerConfig { cases, failure_persistence: None, ..RunnerConfig::default() }).run(
        &prop::collection::vec(step(), 1..45),
        |steps| {
            runtime.block_on(async {
                let app = spawn_journaled_on(config(), Keys::new(&unique_prefix()).unwrap().with_notices(true)).await;
                let router = app.void_router(&client, Some(&bucket), 30);
                kept.set(kept.get() + u32::from(run(&app, &router, &steps).await?));
                Ok(())
            })
        },
    );
    if let Err(failure) = result {
        panic!("{failure}");
    }
    // The generated runs keep orders, not only leave them unbuilt.
    assert!(kept.get() * 2 >= cases, "{} of {cases} runs kept a cohort's order", kept.get());
}
