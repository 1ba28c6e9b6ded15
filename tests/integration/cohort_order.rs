//! A league period's cohorts in order (prelude_league.lua `order_entry`, docs/leagues.md#cohort-order)
//! are derived data every write that moves a placed member keeps: gives, take-backs, capped
//! and repeated events, corrections (up, down, to nothing), voids (across a week's end too),
//! bans and unbans, at equal and later seconds, each sent through a function that notifies or
//! through one of the same board that does not (the two code paths that keep the order).
//! Generated runs of those go through the real routes and scripts; after every step each kept
//! cohort's entries must be exactly its placed members' composites on the period's board (read
//! from the placements and the board, not from the order), no entry may be left for a member
//! who left, and the league route must list each cohort in the order the entries give.

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

fn config(notify: bool) -> Config {
    let notify = if notify { "notify = { top = 10 }" } else { "" };
    Config::parse(&format!(
        r#"
        [[boards]]
        name = "lg"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["week"]
        top = 10
        rules = [
          {{ action = "play", points = 2, max_points = 100, scope = "none", daily_cap = 9 }},
          {{ action = "like", points = 3, max_points = 100, scope = "user_target" }},
        ]
        league = {{ period = "week", cohort_size = 3, tiers = ["bronze", "silver"], promote = 1, demote = 1 }}
        {notify}
        "#,
    ))
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
    /// A correction by `delta` points (to nothing when it takes all they have).
    Correct {
        user: u8,
        delta: i8,
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

/// A step, the seconds before it, and whether it goes through the function that does not notify.
fn step() -> impl Strategy<Value = (Step, u8, bool)> {
    let user = 0..USERS;
    let step = prop_oneof![
        8 => user.clone().prop_map(|user| Step::Play { user }),
        6 => (user.clone(), 0u8..3, any::<bool>()).prop_map(|(user, target, active)| Step::Like { user, target, active }),
        2 => (user.clone(), prop_oneof![-12i8..0, 1i8..6]).prop_map(|(user, delta)| Step::Correct { user, delta }),
        2 => (user.clone(), 1u8..20).prop_map(|(user, back)| Step::Void { user, back }),
        1 => user.clone().prop_map(|user| Step::Ban { user }),
        1 => user.prop_map(|user| Step::Unban { user }),
    ];
    (step, 0u8..4, prop::bool::weighted(0.3))
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

/// What the runs did, summed: steps applied (2xx) by kind, members seen without a score in a
/// kept cohort, and runs that ended with some cohort's order kept.
#[derive(Debug, Default)]
struct Seen {
    applied: BTreeMap<&'static str, u32>,
    unscored: u32,
    kept: u32,
}

impl Seen {
    /// Whether `cases` runs kept an order in half of them, met a member without a score and
    /// applied every kind of step.
    fn covers(&self, cases: u32) -> bool {
        let kinds = ["play", "like", "correct", "void", "ban", "unban"];
        self.kept * 2 >= cases && self.unscored > 0 && kinds.iter().all(|kind| self.applied.get(kind).copied().unwrap_or(0) > 0)
    }

    fn add(&mut self, other: Seen) {
        for (kind, n) in other.applied {
            *self.applied.entry(kind).or_default() += n;
        }
        self.unscored += other.unscored;
        self.kept += other.kept;
    }
}

fn kind(step: &Step) -> &'static str {
    match step {
        Step::Play { .. } => "play",
        Step::Like { .. } => "like",
        Step::Correct { .. } => "correct",
        Step::Void { .. } => "void",
        Step::Ban { .. } => "ban",
        Step::Unban { .. } => "unban",
    }
}

/// Runs the steps through `apps` (notifying, then not), from a minute before a week's end.
async fn run(apps: [&TestApp; 2], routers: [&axum::Router; 2], steps: &[(Step, u8, bool)], seen: &mut Seen) -> Result<(), TestCaseError> {
    let start = at("2026-11-29T23:59:00Z");
    let week = |at: DateTime<Utc>| Period::containing(PeriodKind::Week(chrono::Weekday::Mon), at, chrono_tz::UTC);
    let mut now: DateTime<Utc> = start;
    for (i, (step, advance, quiet)) in steps.iter().enumerate() {
        now += Duration::seconds(i64::from(*advance));
        let (app, router) = (apps[usize::from(*quiet)], routers[usize::from(*quiet)]);
        apps.iter().for_each(|app| app.set_now(now));
        let id = format!("e{i}");
        let status = match step {
            Step::Play { user } => app.event(json!({"event_id": id, "user_id": format!("u{user}"), "action": "play"})).await.0,
            Step::Like { user, target, active } => {
                let body = json!({"event_id": id, "user_id": format!("u{user}"), "action": "like", "target": format!("t{target}"), "active": active});
                app.event(body).await.0
            }
            Step::Correct { user, delta } => {
                let body = json!({"reason": "r", "correction_id": id, "delta": delta});
                app.call(Method::POST, &format!("/v1/admin/boards/lg/users/u{user}/corrections"), body.to_string(), ADMIN).await.0
            }
            Step::Void { user, back } => {
                let body = json!({"void_id": id, "from": now - Duration::seconds(i64::from(*back)), "to": now + Duration::seconds(1), "reason": "r"});
                call(router, Method::POST, &format!("/v1/admin/boards/lg/users/u{user}/void"), &body, ADMIN).await.0
            }
            Step::Ban { user } => app.call(Method::POST, &format!("/v1/admin/users/u{user}/ban"), "{}", ADMIN).await.0,
            Step::Unban { user } => app.call(Method::DELETE, &format!("/v1/admin/users/u{user}/ban"), "{}", ADMIN).await.0,
        };
        // Refusals (a banned user, a take-back of nothing, a correction out of range) are
        // answers too; a 5xx is not.
        prop_assert!(status.as_u16() < 500, "step {} {:?}: {}", i, step, status);
        if status.is_success() {
            *seen.applied.entry(kind(step)).or_default() += 1;
        }
        for period in [week(start), week(now)] {
            check(app, &period, i, step, seen).await?;
        }
    }
    seen.kept += u32::from(!order_of(apps[0], &week(start)).await.0.is_empty());
    Ok(())
}

/// The invariant after step `i`: every kept cohort of `period` as the placements and the board
/// say, and as the league route lists it.
async fn check(app: &TestApp, period: &Period, i: usize, step: &Step, seen: &mut Seen) -> Result<(), TestCaseError> {
    let (cohorts, orphans) = order_of(app, period).await;
    prop_assert!(orphans.is_empty(), "step {} {:?}: entries of cohorts not kept: {:?}", i, step, orphans);
    for (cohort, entries) in &cohorts {
        prop_assert_eq!(entries, &expected(app, period, cohort).await, "step {} {:?}: cohort {} of {}", i, step, cohort, period.id);
        seen.unscored += entries.iter().filter(|e| e.contains("|!")).count() as u32;
    }
    // A cohort of the week now whose order is kept is listed by the league route in that order
    // (those without a score last, by name).
    if *period != Period::containing(PeriodKind::Week(chrono::Weekday::Mon), app.now(), chrono_tz::UTC) {
        return Ok(());
    }
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
    Ok(())
}

#[test]
fn every_write_keeps_the_cohorts_order_equal_to_the_board() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let cases = std::env::var("STANDINGS_COHORT_CASES").map_or(16, |v| v.parse().expect("STANDINGS_COHORT_CASES is a number"));
    let client = runtime.block_on(s3());
    let bucket = runtime.block_on(new_bucket(&client));
    let seen = std::cell::RefCell::new(Seen::default());
    // The runs are random: rounds of `cases` until they covered what the checks below ask (a
    // round of 16 sometimes meets no member without a score), at most four.
    let mut rounds = 0;
    while rounds < 4 {
        rounds += 1;
        let result = TestRunner::new(RunnerConfig { cases, failure_persistence: None, ..RunnerConfig::default() }).run(
            &prop::collection::vec(step(), 1..60),
            |steps| {
                runtime.block_on(async {
                    let prefix = unique_prefix();
                    let notifying = spawn_journaled_on(config(true), Keys::new(&prefix).unwrap().with_notices(true)).await;
                    let quiet = spawn_journaled_on(config(false), Keys::new(&prefix).unwrap()).await;
                    let routers = [notifying.void_router(&client, Some(&bucket), 30), quiet.void_router(&client, Some(&bucket), 30)];
                    let mut case = Seen::default();
                    let result = run([&notifying, &quiet], [&routers[0], &routers[1]], &steps, &mut case).await;
                    seen.borrow_mut().add(case);
                    result
                })
            },
        );
        if let Err(failure) = result {
            panic!("{failure}");
        }
        if seen.borrow().covers(cases * rounds) {
            break;
        }
    }
    // The generated runs kept orders and applied every kind of step, members without a score
    // among them: not only refusals over unbuilt orders.
    let seen = seen.into_inner();
    assert!(seen.covers(cases * rounds), "{rounds} rounds of {cases} runs: {seen:?}");
}

/// On a score board 0 is a score: a correction that sets a player's first score to 0 places
/// them with an entry, and a removal of a score leaves them placed without one.
#[tokio::test]
async fn corrections_to_a_score_of_zero_and_removals_keep_a_score_boards_cohort_order() {
    let config = Config::parse(
        r#"
        [[boards]]
        name = "lg"
        kind = "scores"
        keep = "best"
        timezone = "UTC"
        periods = ["week"]
        top = 10
        league = { period = "week", cohort_size = 3, tiers = ["bronze", "silver"], promote = 1, demote = 1 }
        notify = { top = 10 }
        "#,
    )
    .unwrap();
    let app = spawn_journaled_on(config, Keys::new(&unique_prefix()).unwrap().with_notices(true)).await;
    let now = at("2026-11-24T10:00:00Z");
    app.set_now(now);
    let period = Period::containing(PeriodKind::Week(chrono::Weekday::Mon), now, chrono_tz::UTC);
    let correct = async |user: &str, body: serde_json::Value| {
        let (status, reply) =
            app.call(Method::POST, &format!("/v1/admin/boards/lg/users/{user}/corrections"), body.to_string(), ADMIN).await;
        assert_eq!(status, 200, "{reply}");
    };
    for (i, (user, score)) in [("a", 5), ("b", 7)].into_iter().enumerate() {
        let (status, reply) =
            app.post("/v1/boards/lg/scores", &json!({"event_id": format!("s{i}"), "user_id": user, "score": score})).await;
        assert_eq!(status, 200, "{reply}");
    }
    correct("c", json!({"reason": "r", "correction_id": "c1", "set": 0})).await;
    correct("a", json!({"reason": "r", "correction_id": "c2", "remove": true})).await;
    let (cohorts, orphans) = order_of(&app, &period).await;
    assert!(orphans.is_empty(), "{orphans:?}");
    let entries = cohorts.get("0:1").expect("the cohort's order is kept");
    assert_eq!(entries, &expected(&app, &period, "0:1").await);
    assert_eq!(entries.len(), 3, "b and c with a score, a without: {entries:?}");
    assert!(entries.last().is_some_and(|e| e.ends_with("|!a")), "{entries:?}");
    check(&app, &period, 0, &Step::Play { user: 0 }, &mut Seen::default()).await.unwrap();
}
