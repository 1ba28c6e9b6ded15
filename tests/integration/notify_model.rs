//! Model-based test of rank-change crossings: generated gives, take-backs (to zero, too), ties
//! and bans go through the real `ingest` router and Lua scripts on the real Redis (standalone,
//! and the cluster in the suite's second pass). After each write, the crossings the drain names
//! from what the script recorded must equal those of a model that knows nothing of windows or
//! records: it ranks the whole board before and after the write and compares every user's
//! place, a tie (equal points reached in the same second) in the order its users reached it, so
//! a tie alone passes nobody. `STANDINGS_NOTIFY_CASES` sets the number of runs (default 24).

use std::collections::BTreeMap;

use chrono::Duration;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::json;
use standings::domain::config::Config;
use standings::domain::notify::{self, CrossingKind};
use standings::redis::notices;
use standings_tests::notify::{Seen, spawn_notified};
use standings_tests::{ADMIN, TestApp};

const USERS: u8 = 7;
const TOP: usize = 3;

fn config() -> Config {
    Config::parse(&format!(
        r#"
        [[boards]]
        name = "m"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all"]
        top = 10
        rules = [
          {{ action = "lap", points = 1, max_points = 9, scope = "none" }},
          {{ action = "like", points = 4, scope = "user_target_day", reversible = true }},
        ]
        notify = {{ top = {TOP} }}
        "#
    ))
    .expect("a valid configuration")
}

#[derive(Debug, Clone)]
enum Step {
    /// `points` after the clock moved `advance` seconds (0: the same second as the write before).
    Lap {
        user: u8,
        points: u8,
        advance: u8,
    },
    /// A like (4 points) or its take-back.
    Like {
        user: u8,
        active: bool,
    },
    Ban {
        user: u8,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..USERS, 1..=9u8, 0..2u8).prop_map(|(user, points, advance)| Step::Lap { user, points, advance }),
        3 => (0..USERS, any::<bool>()).prop_map(|(user, active)| Step::Like { user, active }),
        1 => (0..USERS).prop_map(|user| Step::Ban { user }),
    ]
}

/// The model: points, when each user reached them (an earlier time ranks higher) and the
/// order in which users reached their standings (among equal points and times, who got there
/// first: docs/notifications.md).
#[derive(Default)]
struct Board {
    standing: BTreeMap<String, (u32, i64, u64)>,
    liked: BTreeMap<String, bool>,
    banned: Vec<String>,
    arrivals: u64,
}

impl Board {
    fn ranking(&self) -> Vec<String> {
        let mut users: Vec<(&String, &(u32, i64, u64))> = self.standing.iter().collect();
        users.sort_by(|(_, (pa, ta, na)), (_, (pb, tb, nb))| pb.cmp(pa).then(ta.cmp(tb)).then(na.cmp(nb)));
        users.into_iter().map(|(u, _)| u.clone()).collect()
    }

    /// `user` now holds `points` reached at `at` (none left at 0).
    fn set(&mut self, user: &str, points: u32, at: i64) {
        if points == 0 {
            self.standing.remove(user);
        } else if self.standing.get(user).is_none_or(|&(p, t, _)| (p, t) != (points, at)) {
            self.arrivals += 1;
            self.standing.insert(user.to_owned(), (points, at, self.arrivals));
        }
    }

    fn points(&self, user: &str) -> Option<(u32, i64)> {
        self.standing.get(user).map(|&(p, t, _)| (p, t))
    }
}

/// Every crossing between two rankings, straight from the definitions (docs/notifications.md).
fn model_crossings(before: &[String], after: &[String], mover: &str, banned: bool) -> Vec<Seen> {
    let place = |list: &[String], user: &str| list.iter().position(|u| u == user);
    let (mover_before, mover_after) = (place(before, mover), place(after, mover));
    let mut users: Vec<&String> = before.iter().chain(after).collect();
    users.sort();
    users.dedup();
    let mut out = Vec::new();
    for user in users {
        if banned && user == mover {
            continue;
        }
        let (b, a) = (place(before, user), place(after, user));
        let top = |r: Option<usize>| r.is_some_and(|r| r < TOP);
        let passed = user != mover
            && b.is_some_and(|b| mover_before.is_none_or(|mb| mb > b))
            && a.is_some_and(|a| mover_after.is_some_and(|ma| ma < a));
        let by = passed.then(|| mover.to_owned());
        let rank = |r: Option<usize>| r.map(|r| r as u32 + 1);
        let mut push = |kind, by: Option<String>| out.push((user.clone(), kind, rank(b), rank(a), by));
        if !top(b) && top(a) {
            push(CrossingKind::EnteredTop, None);
        }
        if top(b) && !top(a) {
            push(CrossingKind::LeftTop, by.clone());
        }
        if a == Some(0) && b != Some(0) {
            push(CrossingKind::TookFirst, None);
        }
        if b == Some(0) && a != Some(0) {
            push(CrossingKind::LostFirst, by.clone());
        }
        if passed && top(b) && top(a) && b != Some(0) {
            push(CrossingKind::Overtaken, by.clone());
        }
    }
    out.sort();
    out
}

async fn run(app: &TestApp, steps: &[Step]) -> Result<(), TestCaseError> {
    let mut model = Board::default();
    let keys = app.keys.board("m");
    let mut conn = app.redis.clone();
    for (i, step) in steps.iter().enumerate() {
        let before = model.ranking();
        app.set_now(app.now() + Duration::seconds(i64::from(advance_of(step))));
        let (user, banned) = match *step {
            Step::Lap { user, .. } | Step::Like { user, .. } => (user, false),
            Step::Ban { user } => (user, true),
        };
        let name = format!("u{user}");
        let now = app.now().timestamp();
        let is_banned = model.banned.contains(&name);
        match *step {
            Step::Lap { points, .. } => {
                let (status, body) =
                    app.event(json!({"event_id": format!("e{i}"), "user_id": name, "action": "lap", "points": points})).await;
                if !is_banned {
                    prop_assert_eq!(status.as_u16(), 200, "{}", body);
                    let held = model.points(&name).map_or(0, |(p, _)| p);
                    model.set(&name, held + u32::from(points), now);
                }
            }
            Step::Like { active, .. } => {
                let body = json!({"event_id": format!("e{i}"), "user_id": name, "action": "like", "target": "t", "active": active});
                let (status, _) = app.event(body).await;
                if !is_banned {
                    prop_assert_eq!(status.as_u16(), 200);
                    let liked = model.liked.get(&name).copied().unwrap_or(false);
                    if active && !liked {
                        let held = model.points(&name).map_or(0, |(p, _)| p);
                        model.set(&name, held + 4, now);
                        model.liked.insert(name.clone(), true);
                    } else if !active && liked {
                        model.liked.insert(name.clone(), false);
                        // Fewer points keep the time they were reached.
                        if let Some((held, at)) = model.points(&name) {
                            model.set(&name, held.saturating_sub(4), at);
                        }
                    }
                }
            }
            Step::Ban { .. } => {
                let (status, _) = app.call(axum::http::Method::POST, &format!("/v1/admin/users/{name}/ban"), "{}".to_owned(), ADMIN).await;
                prop_assert_eq!(status.as_u16(), 200);
                model.standing.remove(&name);
                model.banned.push(name.clone());
            }
        }
        let after = model.ranking();
        let mut want = model_crossings(&before, &after, &name, banned);
        let entries = notices::oldest(&mut conn, &keys, 100).await.expect("XRANGE");
        let _: () = redis::cmd("DEL").arg(keys.notices()).query_async(&mut conn).await.expect("DEL");
        let mut got: Vec<Seen> = entries
            .iter()
            .flat_map(|e| notify::details("m", &e.id, None, &e.moves, None))
            .map(|d| (d.user_id, d.crossing, d.rank_before, d.rank_after, d.by))
            .collect();
        got.sort();
        want.sort();
        prop_assert_eq!(got, want, "step {}: {:?} on {:?}", i, step, before);
    }
    Ok(())
}

fn advance_of(step: &Step) -> u8 {
    match step {
        Step::Lap { advance, .. } => *advance,
        _ => 1,
    }
}

#[test]
fn generated_writes_notify_exactly_the_crossings_of_whole_rankings() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let cases = std::env::var("STANDINGS_NOTIFY_CASES").map_or(24, |v| v.parse().expect("STANDINGS_NOTIFY_CASES is a number"));
    let result = TestRunner::new(RunnerConfig { cases, failure_persistence: None, ..RunnerConfig::default() }).run(
        &prop::collection::vec(step(), 1..30),
        |steps| {
            runtime.block_on(async {
                let app = spawn_notified(config()).await;
                run(&app, &steps).await
            })
        },
    );
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
