//! Rank-change notifications (docs/notifications.md), end to end: writes through the app, the
//! `journal` function's drain sending to a bus on moto_server, a rule delivering to an SQS queue
//! read back through the real SDK. Scripted sequences give exactly the expected events.

use std::sync::atomic::AtomicUsize;

use axum::http::Method;
use journal::Notifier;
use serde_json::json;
use standings::domain::config::Config;
use standings::domain::notify::CrossingKind::*;
use standings_tests::notify::{FailingAfter, HangingAfter, Seen, s, seen, spawn_notified, subscribed};
use standings_tests::{ADMIN, ArchiveHarness, TestApp, at};

fn config() -> Config {
    Config::parse(
        r#"
        [[boards]]
        name = "race"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all"]
        top = 10
        rules = [
          { action = "lap", points = 1, max_points = 100, scope = "none" },
          { action = "like", points = 5, scope = "user_target_day", reversible = true },
        ]
        notify = { top = 3 }

        [[boards]]
        name = "calm"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all"]
        top = 10
        rules = [{ action = "step", points = 1, max_points = 100, scope = "none" }]
        notify = { top = 10, quiet_secs = 60 }

        [[boards]]
        name = "lg"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["week"]
        top = 10
        rules = [{ action = "drill", points = 1, max_points = 100, scope = "none" }]
        league = { period = "week", cohort_size = 4, tiers = ["bronze", "silver"], promote = 1, demote = 1 }
        notify = { top = 10 }

        [[boards]]
        name = "brief"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all"]
        top = 10
        rules = [{ action = "jog", points = 1, max_points = 100, scope = "none" }]
        notify = { top = 10, quiet_secs = 5 }

        [[boards]]
        name = "ladder"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["week"]
        top = 10
        rules = [{ action = "climb", points = 1, max_points = 100, scope = "none" }]
        league = { period = "week", cohort_size = 2, tiers = ["bronze", "silver"], promote = 1, demote = 1 }
        notify = { top = 10 }

        [[boards]]
        name = "laps"
        kind = "scores"
        keep = "best"
        timezone = "UTC"
        periods = ["all"]
        top = 10
        notify = { top = 2 }

        [[boards]]
        name = "quiet"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all"]
        top = 10
        rules = [{ action = "hum", points = 1, max_points = 100, scope = "none" }]
        "#,
    )
    .expect("a valid configuration")
}

/// An event a second after the one before: ties go to whoever reached the score first.
async fn write(app: &TestApp, body: serde_json::Value) -> u16 {
    app.set_now(app.now() + chrono::Duration::seconds(1));
    app.event(body).await.0.as_u16()
}

async fn lap(app: &TestApp, id: &str, user: &str, points: u32) {
    assert_eq!(write(app, json!({"event_id": id, "user_id": user, "action": "lap", "points": points})).await, 200);
}

/// The race's script: gives, a duplicate, a conflict, a tie, a take-back, a ban, a banned write.
async fn race(app: &TestApp) {
    lap(app, "e1", "a", 10).await;
    lap(app, "e2", "b", 5).await;
    lap(app, "e3", "c", 7).await;
    lap(app, "e4", "d", 20).await;
    lap(app, "e4", "d", 20).await;
    assert_eq!(write(app, json!({"event_id": "e4", "user_id": "d", "action": "lap", "points": 30})).await, 409);
    assert_eq!(write(app, json!({"event_id": "e5", "user_id": "e", "action": "like", "target": "t1"})).await, 200);
    lap(app, "e6", "e", 5).await;
    let take_back = json!({"event_id": "e7", "user_id": "e", "action": "like", "target": "t1", "active": false});
    assert_eq!(write(app, take_back).await, 200);
    let (status, _) = app.call(Method::POST, "/v1/admin/users/d/ban", "{}".to_owned(), ADMIN).await;
    assert_eq!(status, 200);
    assert_eq!(write(app, json!({"event_id": "e8", "user_id": "d", "action": "lap", "points": 50})).await, 422);
}

fn race_expected() -> Vec<Seen> {
    vec![
        s("a", EnteredTop, None, Some(1), None),
        s("a", TookFirst, None, Some(1), None),
        s("b", EnteredTop, None, Some(2), None),
        s("c", EnteredTop, None, Some(2), None),
        s("b", Overtaken, Some(2), Some(3), Some("c")),
        s("d", EnteredTop, None, Some(1), None),
        s("d", TookFirst, None, Some(1), None),
        s("a", LostFirst, Some(1), Some(2), Some("d")),
        s("c", Overtaken, Some(2), Some(3), Some("d")),
        s("b", LeftTop, Some(3), Some(4), Some("d")),
        // e ties a at 10, but a got there first: e passes only c.
        s("e", EnteredTop, Some(5), Some(3), None),
        s("c", LeftTop, Some(3), Some(4), Some("e")),
        // The take-back drops e behind b, who reached 5 first.
        s("e", LeftTop, Some(3), Some(5), None),
        s("c", EnteredTop, Some(4), Some(3), None),
        // The ban: d is told nothing.
        s("a", TookFirst, Some(2), Some(1), None),
        s("b", EnteredTop, Some(4), Some(3), None),
    ]
}

#[tokio::test]
async fn a_scripted_race_sends_exactly_its_crossings_in_order() {
    let app = spawn_notified(config()).await;
    let bus = subscribed().await;
    race(&app).await;
    let report = app.notify(Notifier::new(bus.bus.clone())).await;
    assert_eq!(report.notifications, race_expected().len(), "{report:?}");
    let got = bus.received().await;
    assert_eq!(seen(&got), race_expected());
    let first = &got[0];
    assert!(first.id.starts_with("race:") && first.id.ends_with(":0"), "{}", first.id);
    assert_eq!((first.board.as_str(), first.period.as_str(), first.event_id.as_deref()), ("race", "all", Some("e1")));
    let ban = &got[got.len() - 1];
    assert_eq!(ban.event_id, None, "a ban has no event id");
    let ids: std::collections::HashSet<_> = got.iter().map(|d| d.id.clone()).collect();
    assert_eq!(ids.len(), got.len(), "every event has an id of its own");
    assert_eq!(app.notices_len("race").await, 0, "delivered moves are trimmed");
    // Nothing is sent twice, and a board without `notify` records nothing.
    assert_eq!(write(&app, json!({"event_id": "h1", "user_id": "a", "action": "hum", "points": 3})).await, 200);
    assert_eq!(app.notify(Notifier::new(bus.bus.clone())).await.notifications, 0);
    assert!(bus.received().await.is_empty());
    assert_eq!(app.notices_len("quiet").await, 0);
}

/// The bus takes the first four events of a step and refuses the rest (EventBridge answers each
/// entry on its own): the next run sends only the rest, in order, and nothing twice.
#[tokio::test]
async fn a_drain_stopped_mid_delivery_sends_the_rest_next_time_and_nothing_twice() {
    let app = spawn_notified(config()).await;
    let bus = subscribed().await;
    race(&app).await;
    let failing = FailingAfter { inner: bus.bus.clone(), left: AtomicUsize::new(4) };
    let report = app.notify(Notifier::new(failing)).await;
    assert!(report.boards.iter().any(|b| b.board == "race" && b.error.is_some()), "{report:?}");
    let early = bus.received().await;
    assert_eq!(seen(&early), race_expected()[..4].to_vec());
    assert_eq!(app.notices_len("race").await, 0, "the step is committed: what the bus refused is held, due at once");
    let nothing = FailingAfter { inner: bus.bus.clone(), left: AtomicUsize::new(0) };
    app.notify(Notifier::new(nothing)).await;
    assert!(bus.received().await.is_empty(), "a bus that takes nothing");
    app.notify(Notifier::new(bus.bus.clone())).await;
    let rest = bus.received().await;
    assert_eq!(seen(&rest), race_expected()[4..].to_vec(), "the next run sends the rest, in order");
    let mut ids: Vec<&str> = early.iter().chain(&rest).map(|d| d.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), race_expected().len(), "no event twice, each with an id of its own");
}

#[tokio::test]
async fn a_quiet_time_merges_a_users_crossings_into_one_event_with_the_last_state() {
    let app = spawn_notified(config()).await;
    let bus = subscribed().await;
    let step = |id: &'static str, user: &'static str, points: u32| {
        let app = &app;
        async move { assert_eq!(write(app, json!({"event_id": id, "user_id": user, "action": "step", "points": points})).await, 200) }
    };
    step("s0", "x", 50).await;
    step("s1", "u", 40).await;
    // Five players pass u, one after another, within the quiet time.
    for (i, user) in ["o1", "o2", "o3", "o4", "o5"].into_iter().enumerate() {
        let id: &'static str = Box::leak(format!("p{i}").into_boxed_str());
        step(id, user, 41 + i as u32).await;
    }
    let held = app.notify(Notifier::new(bus.bus.clone())).await;
    assert_eq!(held.notifications, 0, "the quiet time holds every crossing back");
    assert!(bus.received().await.is_empty());
    assert_eq!(app.notices_len("calm").await, 0, "held crossings leave the stream for the board's held windows");
    app.notify(Notifier::new(bus.bus.clone()).releasing_held()).await;
    let got = bus.received().await;
    let of = |user: &str| seen(&got).into_iter().filter(|c| c.0 == user).collect::<Vec<_>>();
    assert_eq!(
        of("u"),
        vec![s("u", EnteredTop, None, Some(2), None), s("u", Overtaken, Some(2), Some(7), Some("o5"))],
        "overtaken five times: one event, the last state"
    );
    assert_eq!(of("x"), vec![s("x", EnteredTop, None, Some(1), None), s("x", TookFirst, None, Some(1), None)]);
    assert_eq!(of("o5"), vec![s("o5", EnteredTop, None, Some(2), None)]);
    assert_eq!(of("o1"), vec![s("o1", EnteredTop, None, Some(2), None), s("o1", Overtaken, Some(2), Some(6), Some("o5"))]);
    assert_eq!(got.len(), 2 + 2 + 4 * 2 + 1);
}

#[tokio::test]
async fn league_zones_are_entered_and_left_as_the_cohort_fills_and_players_pass() {
    let app = spawn_notified(config()).await;
    let bus = subscribed().await;
    for (id, user, points) in [("d1", "p1", 5), ("d2", "p2", 3), ("d3", "p3", 2), ("d4", "p4", 1), ("d5", "p2", 5)] {
        assert_eq!(write(&app, json!({"event_id": id, "user_id": user, "action": "drill", "points": points})).await, 200);
    }
    app.notify(Notifier::new(bus.bus.clone())).await;
    let league: Vec<Seen> = seen(&bus.received().await)
        .into_iter()
        .filter(|c| matches!(c.1, EnteredPromotion | LeftPromotion | EnteredDemotion | LeftDemotion))
        .collect();
    // Bronze is the lowest tier: nobody demotes. A cohort of four promotes one, of three none.
    assert_eq!(
        league,
        vec![
            s("p1", EnteredPromotion, Some(1), Some(1), None),
            s("p2", EnteredPromotion, Some(2), Some(1), None),
            s("p1", LeftPromotion, Some(1), Some(2), Some("p2")),
        ]
    );
}

/// A ban is a departure from the banned user's cohort: it shrinks, and its zones with it (a
/// cohort of four promotes one, of three none), so the first leaves the promotion zone though
/// nobody passed them. The banned user is told nothing.
#[tokio::test]
async fn a_ban_shrinks_the_banned_users_cohort_and_its_zones() {
    let app = spawn_notified(config()).await;
    let bus = subscribed().await;
    for (id, user, points) in [("d1", "p1", 5), ("d2", "p2", 4), ("d3", "p3", 3), ("d4", "p4", 1)] {
        assert_eq!(write(&app, json!({"event_id": id, "user_id": user, "action": "drill", "points": points})).await, 200);
    }
    app.notify(Notifier::new(bus.bus.clone())).await;
    let zones = |got: Vec<Seen>| -> Vec<Seen> {
        got.into_iter().filter(|c| matches!(c.1, EnteredPromotion | LeftPromotion | EnteredDemotion | LeftDemotion)).collect()
    };
    let first = zones(seen(&bus.received().await));
    assert!(first.contains(&s("p1", EnteredPromotion, Some(1), Some(1), None)), "{first:?}");

    let (status, body) = app.call(Method::POST, "/v1/admin/users/p2/ban", "{}".to_owned(), ADMIN).await;
    assert_eq!(status, 200, "{body}");
    app.notify(Notifier::new(bus.bus.clone())).await;
    let after = bus.received().await;
    assert_eq!(zones(seen(&after)), vec![s("p1", LeftPromotion, Some(1), Some(1), None)]);
    assert!(after.iter().all(|d| d.user_id != "p2"), "the banned user is told nothing");
    let (_, league) = app.get("/v1/boards/lg/users/p3/league").await;
    assert_eq!(league["entries"].as_array().map(Vec::len), Some(3), "{league}");
}

/// Demotion needs a tier above the lowest: week 47 promotes p1 and p3 to silver, where week
/// 48 puts them in one cohort of two, whose last place demotes.
#[tokio::test]
async fn a_higher_tiers_cohort_enters_and_leaves_its_demotion_zone() {
    let app = spawn_notified(config()).await;
    let bus = subscribed().await;
    let climb = |id: &str, user: &str, points: u32| json!({"event_id": id, "user_id": user, "action": "climb", "points": points});
    app.set_now(at("2026-11-17T10:00:00Z"));
    for (id, user, points) in [("w47-1", "p1", 5), ("w47-2", "p2", 3), ("w47-3", "p3", 5), ("w47-4", "p4", 3)] {
        assert_eq!(write(&app, climb(id, user, points)).await, 200);
    }
    app.set_now(at("2026-11-24T10:00:00Z"));
    let closes = app.closer().close_due(chrono::Utc::now() + chrono::Duration::minutes(5)).await.unwrap();
    assert!(closes.iter().any(|c| c.period_id == "2026-W47" && c.status == "complete"), "{closes:?}");
    for (id, user, points) in [("w48-1", "p1", 5), ("w48-2", "p3", 3), ("w48-3", "p3", 5)] {
        assert_eq!(write(&app, climb(id, user, points)).await, 200);
    }
    let (_, league) = app.get("/v1/boards/ladder/users/p1/league").await;
    assert_eq!(league["tier"], "silver", "{league}");
    app.notify(Notifier::new(bus.bus.clone())).await;
    let demotions: Vec<Seen> = seen(&bus.received().await).into_iter().filter(|c| matches!(c.1, EnteredDemotion | LeftDemotion)).collect();
    assert_eq!(
        demotions,
        vec![
            // p3 joins p1's cohort behind them: a cohort of two demotes one.
            s("p3", EnteredDemotion, None, Some(2), None),
            s("p3", LeftDemotion, Some(2), Some(1), None),
            s("p1", EnteredDemotion, Some(1), Some(2), Some("p3")),
        ]
    );
}

#[tokio::test]
async fn score_boards_notify_only_for_scores_that_move_someone() {
    let app = spawn_notified(config()).await;
    let bus = subscribed().await;
    for (id, user, score) in [("g1", "a", 100), ("g2", "b", 90), ("g3", "a", 50), ("g4", "c", 120), ("g4", "c", 120)] {
        app.set_now(app.now() + chrono::Duration::seconds(1));
        let (status, _) = app.post("/v1/boards/laps/scores", &json!({"event_id": id, "user_id": user, "score": score})).await;
        assert_eq!(status, 200);
    }
    app.notify(Notifier::new(bus.bus.clone())).await;
    assert_eq!(
        seen(&bus.received().await),
        vec![
            s("a", EnteredTop, None, Some(1), None),
            s("a", TookFirst, None, Some(1), None),
            s("b", EnteredTop, None, Some(2), None),
            s("c", EnteredTop, None, Some(1), None),
            s("c", TookFirst, None, Some(1), None),
            s("a", LostFirst, Some(1), Some(2), Some("c")),
            s("b", LeftTop, Some(2), Some(3), Some("c")),
        ],
        "a worse best score (g3) and a duplicate (g4 again) move nobody"
    );
}

#[tokio::test]
async fn an_archived_season_notifies_nobody() {
    let mut harness = ArchiveHarness::with_config(
        Config::parse(
            r#"[[boards]]
name = "points"
kind = "cumulative"
timezone = "Asia/Shanghai"
periods = ["season"]
top = 10
archive = true
rules = [{ action = "learning", points = 10, scope = "none" }]
notify = { top = 3 }
"#,
        )
        .unwrap(),
    )
    .await;
    harness.keys = harness.keys.clone().with_notices(true);
    let app = harness.app().await;
    let bus = subscribed().await;
    app.set_now(at("2026-10-20T12:00:00+08:00"));
    assert_eq!(write(&app, json!({"event_id": "l1", "user_id": "ann", "action": "learning"})).await, 200);
    app.notify(Notifier::new(bus.bus.clone())).await;
    assert_eq!(seen(&bus.received().await).len(), 2, "ann entered the top and took first");
    let far = chrono::Utc::now() + chrono::Duration::minutes(5);
    harness
        .archiver(harness.table.clone())
        .archive_season("points", "2026-10", standings::archive::table::Shard::WHOLE, far)
        .await
        .unwrap();
    app.set_now(at("2026-10-31T12:00:00+08:00"));
    let late =
        write(&app, json!({"event_id": "l2", "user_id": "bob", "action": "learning", "occurred_at": "2026-10-31T11:00:00+08:00"})).await;
    assert_ne!(late, 200, "the archived season takes no more writes");
    app.notify(Notifier::new(bus.bus.clone())).await;
    assert!(bus.received().await.is_empty(), "neither the archive nor a refused write notifies");
}

#[tokio::test]
async fn a_drain_leaves_a_board_whose_notices_another_drain_holds() {
    let app = spawn_notified(config()).await;
    let bus = subscribed().await;
    lap(&app, "e1", "a", 10).await;
    let lock = app.keys.board("race").notices_lock();
    let mut conn = app.redis.clone();
    let _: () = redis::cmd("SET").arg(&lock).arg("another-drain").arg("PX").arg(60_000).query_async(&mut conn).await.unwrap();
    assert_eq!(app.notify(Notifier::new(bus.bus.clone())).await.notifications, 0);
    assert_eq!(app.notices_len("race").await, 1, "left to the drain that holds the board");
    let held: Option<String> = redis::cmd("GET").arg(&lock).query_async(&mut conn).await.unwrap();
    assert_eq!(held.as_deref(), Some("another-drain"), "another drain's lock is not released");
    let _: () = redis::cmd("DEL").arg(&lock).query_async(&mut conn).await.unwrap();
    assert_eq!(app.notify(Notifier::new(bus.bus.clone())).await.notifications, 2);
    assert_eq!(seen(&bus.received().await).len(), 2);
    let left: Option<String> = redis::cmd("GET").arg(&lock).query_async(&mut conn).await.unwrap();
    assert_eq!(left, None, "a drain releases its own lock");
}

/// A drain killed while the bus holds its events (its future dropped, as a Lambda past its
/// deadline is) keeps the board's lock: runs within its lease leave the board alone, and the
/// first run after the lease sends every move again, in order, with the same ids.
#[tokio::test]
async fn a_drain_killed_mid_delivery_holds_the_board_for_its_lease_then_everything_is_resent() {
    let app = spawn_notified(config()).await;
    let bus = subscribed().await;
    race(&app).await;
    let waiting = app.notices_len("race").await;
    let reached = std::sync::Arc::new(tokio::sync::Notify::new());
    let hanging = HangingAfter { inner: bus.bus.clone(), left: 4, reached: reached.clone() };
    tokio::select! {
        _ = app.notify(Notifier::new(hanging)) => panic!("the bus never answers"),
        _ = reached.notified() => {}
    }
    let early = bus.received().await;
    assert_eq!(seen(&early), race_expected()[..4].to_vec());

    let lock = app.keys.board("race").notices_lock();
    let mut conn = app.redis.clone();
    let lease: i64 = redis::cmd("PTTL").arg(&lock).query_async(&mut conn).await.unwrap();
    assert!((1..=120_000).contains(&lease), "the dead drain's lock has a lease: {lease} ms");
    assert_eq!(app.notify(Notifier::new(bus.bus.clone())).await.notifications, 0, "within the lease the board is left alone");
    assert_eq!(app.notices_len("race").await, waiting, "nothing was trimmed");

    // The lease runs out (as 120 s would): the lock expires on Redis's clock.
    let _: () = redis::cmd("PEXPIRE").arg(&lock).arg(1).query_async(&mut conn).await.unwrap();
    while redis::cmd("EXISTS").arg(&lock).query_async::<bool>(&mut conn).await.unwrap() {
        tokio::task::yield_now().await;
    }
    app.notify(Notifier::new(bus.bus.clone())).await;
    let all = bus.received().await;
    assert_eq!(seen(&all), race_expected(), "the next run after the lease sends everything, in order");
    let again: Vec<&str> = all[..4].iter().map(|d| d.id.as_str()).collect();
    assert_eq!(again, early.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), "a redelivery carries the same ids");
    assert_eq!(app.notices_len("race").await, 0);
}

/// Redis's clock, in ms.
async fn redis_ms(app: &TestApp) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut app.redis.clone()).await.unwrap();
    secs * 1000 + micros / 1000
}

/// Without a forced release, a quiet time ends on Redis's clock: before its end a drain holds
/// the crossings back (lag 0: nothing is late), after it a drain that cannot send reports the
/// lag, and the next one sends the merged crossings.
#[tokio::test]
async fn a_quiet_time_ends_on_redis_clock_then_its_merged_crossings_go_out() {
    let app = spawn_notified(config()).await;
    let bus = subscribed().await;
    for (id, user, points) in [("j1", "x", 50), ("j2", "u", 40), ("j3", "o1", 41), ("j4", "o2", 42)] {
        assert_eq!(write(&app, json!({"event_id": id, "user_id": user, "action": "jog", "points": points})).await, 200);
    }
    let written = redis_ms(&app).await;
    let held = app.notify(Notifier::new(bus.bus.clone())).await;
    assert_eq!((held.notifications, held.notification_lag_seconds), (0, 0.0), "held, not late: {held:?}");
    // Wait on Redis's clock (the one the windows are measured on) until the quiet time is over.
    while redis_ms(&app).await < written + 5_000 + 1_100 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let failing = FailingAfter { inner: bus.bus.clone(), left: AtomicUsize::new(0) };
    let late = app.notify(Notifier::new(failing)).await;
    let brief = late.boards.iter().find(|b| b.board == "brief").expect("the brief board is drained");
    assert!(brief.error.is_some() && brief.notification_lag_seconds > 0.0, "{late:?}");
    let sent = app.notify(Notifier::new(bus.bus.clone())).await;
    assert_eq!(sent.notification_lag_seconds, 0.0, "{sent:?}");
    let got = seen(&bus.received().await);
    let of = |user: &str| got.iter().filter(|c| c.0 == user).cloned().collect::<Vec<_>>();
    assert_eq!(of("u"), vec![s("u", EnteredTop, None, Some(2), None), s("u", Overtaken, Some(2), Some(4), Some("o2"))]);
    assert_eq!(of("x"), vec![s("x", EnteredTop, None, Some(1), None), s("x", TookFirst, None, Some(1), None)]);
    assert_eq!(of("o1"), vec![s("o1", EnteredTop, None, Some(2), None), s("o1", Overtaken, Some(2), Some(3), Some("o2"))]);
    assert_eq!(of("o2"), vec![s("o2", EnteredTop, None, Some(2), None)]);
    assert_eq!(got.len(), 7);
}

/// A drain reads the notices a few entries at a time: the steps' boundaries change nothing of
/// what is sent, nor its order, nor its ids (the same sequence as one big step).
#[tokio::test]
async fn a_drain_in_small_steps_sends_the_same_events_in_the_same_order() {
    let app = spawn_notified(config()).await;
    let bus = subscribed().await;
    race(&app).await;
    let report = app.notify(Notifier::new(bus.bus.clone()).with_chunk(2)).await;
    assert_eq!(report.notifications, race_expected().len(), "{report:?}");
    let got = bus.received().await;
    assert_eq!(seen(&got), race_expected());
    assert!(got[0].id.starts_with("race:") && got[0].id.ends_with(":0"), "{}", got[0].id);
    assert_eq!(app.notices_len("race").await, 0);
}
