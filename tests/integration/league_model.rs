//! Model-based test of leagues: generated weeks — concurrent first writes, writes at equal and
//! later seconds (ties), bans, idle users, players of the next week who write before the close
//! (they wait, then the close places them in order), several weeks in a row — go through the real
//! `ingest` router and Lua scripts, the real close run of the `archive` function and the real
//! Redis (standalone, and the cluster in the suite's second pass). Cohorts, ranks, zones,
//! results and every user's next tier must equal the plain-Rust model (tests/src/league.rs),
//! and so must each cohort as the league route shows it before the close.
//!
//! `STANDINGS_LEAGUE_CASES` sets the number of runs (default 24). Shrunk failures are kept in
//! tests/model/league-regressions.txt and replayed first.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, FileFailurePersistence, TestCaseError, TestRunner};
use serde_json::json;
use standings::domain::config::Config;
use standings::domain::league::Outcome;
use standings::domain::period::{Period, PeriodKind};
use standings_tests::league::LeagueModel;
use standings_tests::{ADMIN, TestApp, at, spawn_ingest_with};

const REGRESSIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/model/league-regressions.txt");
const USERS: u8 = 12;
const SIZE: usize = 4;

pub fn league_config() -> Config {
    Config::parse(
        r#"
        [[boards]]
        name = "lg"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["week"]
        top = 10
        rules = [{ action = "play", points = 1, max_points = 100, scope = "none" }]
        league = { period = "week", cohort_size = 4, tiers = ["bronze", "silver", "gold"], promote = 2, demote = 1 }
        "#,
    )
    .expect("a valid league configuration")
}

#[derive(Debug, Clone)]
enum Step {
    /// A write of `points` after the clock moved `advance` seconds (0: a tie is possible).
    Write {
        user: u8,
        points: u8,
        advance: u8,
    },
    Ban {
        user: u8,
    },
}

#[derive(Debug, Clone)]
struct Week {
    /// Users whose first writes of the week go out at once, at the week's first second.
    concurrent: Vec<(u8, u8)>,
    steps: Vec<Step>,
    /// Users who write in the next week before this one is closed, in this order.
    early: Vec<(u8, u8)>,
}

fn week() -> impl Strategy<Value = Week> {
    let concurrent = prop::collection::btree_map(0..USERS, 1u8..4, 0..8).prop_map(|m| m.into_iter().collect());
    let step = prop_oneof![
        12 => (0..USERS, 1u8..6, 0u8..3).prop_map(|(user, points, advance)| Step::Write { user, points, advance }),
        1 => (0..USERS).prop_map(|user| Step::Ban { user }),
    ];
    let early = prop::collection::btree_map(0..USERS, 1u8..4, 0..4).prop_map(|m| m.into_iter().collect());
    (concurrent, prop::collection::vec(step, 0..30), early).prop_map(|(concurrent, steps, early)| Week { concurrent, steps, early })
}

fn week_of(at: DateTime<Utc>) -> Period {
    Period::containing(PeriodKind::Week(chrono::Weekday::Mon), at, chrono_tz::UTC)
}

async fn write(app: &TestApp, id: &str, user: &str, points: u8) -> u16 {
    let event = json!({"event_id": id, "user_id": user, "action": "play", "points": points});
    app.event(event).await.0.as_u16()
}

/// Every cohort of `period` as stored: (tier, n) → members, sorted.
async fn stored_cohorts(app: &TestApp, period: &Period) -> BTreeMap<(usize, u32), Vec<String>> {
    let key = app.keys.board("lg").league_cohorts(&period.id);
    let entries: Vec<String> = redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).query_async(&mut app.redis.clone()).await.unwrap();
    let mut cohorts: BTreeMap<(usize, u32), Vec<String>> = BTreeMap::new();
    for entry in entries {
        let (cohort, user) = entry.split_once('|').unwrap();
        let (tier, n) = cohort.split_once(':').unwrap();
        cohorts.entry((tier.parse().unwrap(), n.parse().unwrap())).or_default().push(user.to_owned());
    }
    for members in cohorts.values_mut() {
        members.sort();
    }
    cohorts
}

async fn run(app: &TestApp, weeks: &[Week]) -> Result<(), TestCaseError> {
    let mut model = LeagueModel::new(SIZE, 3, 2, 1);
    let mut ids = 0u32;
    let mut next_id = || {
        ids += 1;
        format!("e{ids}")
    };
    let mut start = at("2026-11-23T01:00:00Z");
    for (w, week) in weeks.iter().enumerate() {
        app.set_now(start);
        let period = week_of(start);
        // Concurrent first writes: any order may win, so the model checks the sizes each tier's
        // cohorts must have, then takes the cohorts as they came.
        let writers: Vec<(String, u8)> =
            week.concurrent.iter().map(|&(u, p)| (format!("u{u}"), p)).filter(|(u, _)| !model.banned.contains(u)).collect();
        // Players placed by the last close write again: points only.
        let (placed, joiners): (Vec<_>, Vec<_>) = writers.into_iter().partition(|(u, _)| model.placed(u));
        let expected: HashMap<usize, Vec<usize>> =
            (0..3).map(|tier| (tier, model.sizes_after(tier, joiners.iter().filter(|(u, _)| model.tier_of(u) == tier).count()))).collect();
        let sends = joiners.iter().chain(&placed).map(|(user, points)| {
            let id = format!("w{w}-{user}");
            async move { write(app, &id, user, *points).await }
        });
        for status in futures::future::join_all(sends).await {
            prop_assert_eq!(status, 200);
        }
        for (user, points) in joiners.iter().chain(&placed) {
            let (held, _) = model.points.get(user).copied().unwrap_or_default();
            model.points.insert(user.clone(), (held + i64::from(*points), start.timestamp()));
        }
        let stored = stored_cohorts(app, &period).await;
        for tier in 0..3 {
            let cohorts: Vec<Vec<String>> = stored.iter().filter(|((t, _), _)| *t == tier).map(|(_, m)| m.clone()).collect();
            let sizes: Vec<usize> = cohorts.iter().map(Vec::len).collect();
            prop_assert_eq!(&sizes, &expected[&tier], "week {} tier {}", w, tier);
            for cohort in &cohorts {
                prop_assert!(cohort.iter().all(|u| model.tier_of(u) == tier), "placed in their tier");
            }
            model.adopt(tier, cohorts);
        }

        let mut now = start;
        for step in &week.steps {
            match step {
                Step::Write { user, points, advance } => {
                    now += Duration::seconds(i64::from(*advance));
                    app.set_now(now);
                    let user = format!("u{user}");
                    let status = write(app, &next_id(), &user, *points).await;
                    let applied = model.write(&user, i64::from(*points), now.timestamp());
                    prop_assert_eq!(status, if applied { 200 } else { 422 }, "{:?}", step);
                }
                Step::Ban { user } => {
                    let user = format!("u{user}");
                    let (status, _) = app.call(axum::http::Method::POST, &format!("/v1/admin/users/{user}/ban"), "{}", ADMIN).await;
                    prop_assert_eq!(status.as_u16(), 200);
                    model.ban(&user);
                }
            }
        }

        // The cohorts as stored and as the league route shows them.
        let stored = stored_cohorts(app, &period).await;
        let mut want = BTreeMap::new();
        for (&tier, cohorts) in &model.cohorts {
            for (n, cohort) in cohorts.iter().enumerate() {
                let mut sorted = cohort.clone();
                sorted.sort();
                if !sorted.is_empty() {
                    want.insert((tier, n as u32 + 1), sorted);
                }
            }
        }
        prop_assert_eq!(&stored, &want, "week {}", w);
        for ((tier, _), members) in &want {
            let user = &members[0];
            let (status, body) = app.get(&format!("/v1/boards/lg/users/{user}/league")).await;
            prop_assert_eq!(status.as_u16(), 200);
            let cohort = model.cohorts[tier].iter().find(|c| c.contains(user)).unwrap();
            let ranking = model.ranking(cohort);
            let shown: Vec<(String, i64, String)> = body["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| (e["user_id"].as_str().unwrap().to_owned(), e["score"].as_i64().unwrap(), e["zone"].as_str().unwrap().to_owned()))
                .collect();
            let expected: Vec<(String, i64, String)> =
                ranking.iter().enumerate().map(|(i, (u, p))| (u.clone(), *p, model.zone(*tier, i + 1, ranking.len()).to_owned())).collect();
            prop_assert_eq!(shown, expected, "week {} tier {}", w, tier);
        }

        // Some players of the next week write before this one closes: they wait, if this week
        // had players (otherwise there is nothing to close, and they are placed at once).
        let next = week_of(start).end.unwrap().with_timezone(&Utc);
        let waits = model.cohorts.values().flatten().any(|cohort| !cohort.is_empty());
        let mut early = Vec::new();
        for (i, (user, points)) in week.early.iter().enumerate() {
            let (user, at) = (format!("u{user}"), next + Duration::seconds(60 + i as i64));
            app.set_now(at);
            let status = write(app, &next_id(), &user, *points).await;
            prop_assert_eq!(status, if model.banned.contains(&user) { 422 } else { 200 });
            if !model.banned.contains(&user) {
                let (_, body) = app.get(&format!("/v1/boards/lg/users/{user}/league")).await;
                prop_assert_eq!((body["cohort"].is_null(), &body["waiting"]), (waits, &json!(waits)), "{}", body);
                early.push((user, i64::from(*points), at.timestamp()));
            }
        }

        // The week closes; some users sit the next one out and keep their tier.
        app.set_now(next + Duration::hours(1));
        let reports = app.closer().close_due(Utc::now() + Duration::minutes(5)).await.unwrap();
        let results = model.close();
        if !results.is_empty() {
            prop_assert_eq!(reports.len(), 1);
            prop_assert_eq!(reports[0].status, "complete");
        }
        let results_key = app.keys.board("lg").league_results(&period.id);
        for user in (0..USERS).map(|u| format!("u{u}")) {
            let stored: Option<String> = redis::cmd("HGET").arg(&results_key).arg(&user).query_async(&mut app.redis.clone()).await.unwrap();
            match (results.get(&user), stored.as_deref().and_then(Outcome::decode)) {
                (None, None) => {}
                (Some(want), Some(got)) => {
                    let cohort = &stored_cohorts(app, &period).await[&(got.tier, got.cohort)];
                    prop_assert_eq!(
                        (want.tier, &want.cohort, want.rank, want.zone, want.next_tier, Some(want.points)),
                        (got.tier, cohort, got.rank, got.zone.as_str(), got.next_tier, got.points),
                        "{} in week {}",
                        user,
                        w
                    );
                }
                (want, got) => prop_assert!(false, "{user} in week {w}: model {want:?}, stored {got:?}"),
            }
            let tier: Option<usize> =
                redis::cmd("HGET").arg(app.keys.board("lg").league_tiers()).arg(&user).query_async(&mut app.redis.clone()).await.unwrap();
            prop_assert_eq!(tier.unwrap_or(0), model.tier_of(&user), "{}'s tier after week {}", user, w);
            prop_assert_ne!(tier, Some(0), "the bottom tier is not stored: {}'s after week {}", user, w);
        }
        // A second run changes nothing.
        prop_assert!(app.closer().close_due(Utc::now() + Duration::minutes(5)).await.unwrap().is_empty());
        // The close placed the waiting players, in the order they wrote, in their new tiers (or
        // they were placed as they wrote, in the same order, on tiers no close moved).
        for (user, points, at) in early {
            model.write(&user, points, at);
        }
        let placed = stored_cohorts(app, &week_of(next)).await;
        let mut want = BTreeMap::new();
        for (&tier, cohorts) in &model.cohorts {
            for (n, cohort) in cohorts.iter().enumerate() {
                let mut sorted = cohort.clone();
                sorted.sort();
                want.insert((tier, n as u32 + 1), sorted);
            }
        }
        prop_assert_eq!(placed, want, "the waiting players of week {}", w + 1);
        start = next + Duration::hours(1);
    }
    Ok(())
}

#[test]
fn generated_weeks_close_as_the_model_says() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let cases = std::env::var("STANDINGS_LEAGUE_CASES").map_or(24, |v| v.parse().expect("STANDINGS_LEAGUE_CASES is a number"));
    let config =
        RunnerConfig { cases, failure_persistence: Some(Box::new(FileFailurePersistence::Direct(REGRESSIONS))), ..RunnerConfig::default() };
    let result = TestRunner::new(config).run(&prop::collection::vec(week(), 1..4), |weeks| {
        runtime.block_on(async {
            let app = spawn_ingest_with(league_config()).await;
            run(&app, &weeks).await
        })
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
