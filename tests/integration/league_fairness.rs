//! No cohort of one (docs/leagues.md#fair-ends): a tier's last cohort, when it holds fewer than
//! half a cohort, is ranked with the cohort before it at the close, so a late starter can win
//! their way up like anyone else.

use chrono::Duration;
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::{TestApp, at, scheduled_event, spawn_ingest_with};

const XP30: &str = r#"
        [[boards]]
        name = "xp30"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["week"]
        top = 10
        rules = [{ action = "play", points = 1, max_points = 1000, scope = "none" }]
        league = { period = "week", cohort_size = 30, tiers = ["bronze", "silver", "gold"], promote = 10, demote = 5 }
        "#;

fn config() -> Config {
    Config::parse(XP30).expect("a valid configuration")
}

async fn play(app: &TestApp, id: &str, user: &str, points: u32) {
    let (status, body) = app.event(json!({"event_id": id, "user_id": user, "action": "play", "points": points})).await;
    assert_eq!(status, 200, "{body}");
}

/// The `archive` function's scheduled run at the app's time, which closes ended league weeks.
async fn close(app: &TestApp, config: Config) -> Value {
    let scheduled: Value = serde_json::to_value(scheduled_event(app.now())).unwrap();
    let archiver = standings_tests::ArchiveHarness::with_config(config).await;
    let response =
        archive::run(&archiver.archiver(archiver.table.clone()), &app.closer(), scheduled, chrono::Utc::now() + Duration::minutes(5))
            .await
            .unwrap();
    serde_json::to_value(response.leagues).unwrap()
}

async fn result(app: &TestApp, user: &str) -> Value {
    let (status, history) = app.get(&format!("/v1/boards/xp30/users/{user}/league/history")).await;
    assert_eq!(status, 200, "{history}");
    history["results"][0].clone()
}

/// 31 players of one tier: 30 fill the first cohort, the 31st starts last, alone in a second
/// cohort, and scores the most. At the close the two are ranked as one group of 31: the 31st
/// is first and promoted, with the ten best of the first cohort's promotions shared fairly.
#[tokio::test]
async fn a_tier_of_31_whose_31st_starts_last_and_wins_promotes_them() {
    let app = spawn_ingest_with(config()).await;
    // Thursday of the Monday week of 2026-11-23.
    for i in 1..=30u32 {
        app.set_now(at("2026-11-26T10:00:00Z") + Duration::seconds(i64::from(i)));
        play(&app, &format!("e{i}"), &format!("p{i:02}"), i).await;
    }
    app.set_now(at("2026-11-28T10:00:00Z"));
    play(&app, "late", "p31", 100).await;
    let (_, view) = app.get("/v1/boards/xp30/users/p31/league").await;
    assert_eq!(view["cohort"], "0:2", "{view}");

    app.set_now(at("2026-11-30T00:30:01Z"));
    let reports = close(&app, config()).await;
    assert_eq!(reports[0]["status"], "complete", "{reports}");
    let late = result(&app, "p31").await;
    assert_eq!(
        (late["rank"].as_u64(), late["zone"].as_str(), late["next_tier"].as_str()),
        (Some(1), Some("promote"), Some("silver")),
        "{late}"
    );
    assert_eq!(late["cohort_size"], 31, "{late}");
    // Ten of 31 promote (10 × 31 / 30): the 31st and the nine best of the rest; bronze demotes nobody.
    let mut zones = std::collections::BTreeMap::new();
    for user in (1..=31u32).map(|i| format!("p{i:02}")) {
        let zone = result(&app, &user).await["zone"].as_str().unwrap().to_owned();
        zones.insert(user, zone);
    }
    let up: Vec<&String> = zones.iter().filter(|(_, zone)| *zone == "promote").map(|(user, _)| user).collect();
    assert_eq!(up, ["p22", "p23", "p24", "p25", "p26", "p27", "p28", "p29", "p30", "p31"], "{zones:?}");
    assert!(zones.values().all(|zone| zone != "demote"));
}

/// A last cohort of half a cohort or more stands on its own: 30 + 15 players close as two
/// cohorts, each with its own zones.
#[tokio::test]
async fn a_last_cohort_of_half_a_cohort_or_more_closes_on_its_own() {
    let app = spawn_ingest_with(config()).await;
    for i in 1..=45u32 {
        app.set_now(at("2026-11-26T10:00:00Z") + Duration::seconds(i64::from(i)));
        play(&app, &format!("e{i}"), &format!("p{i:02}"), i).await;
    }
    app.set_now(at("2026-11-30T00:30:01Z"));
    close(&app, config()).await;
    let last = result(&app, "p45").await;
    assert_eq!((last["cohort"].as_str(), last["rank"].as_u64(), last["cohort_size"].as_u64()), (Some("0:2"), Some(1), Some(15)), "{last}");
    let first = result(&app, "p30").await;
    assert_eq!(
        (first["cohort"].as_str(), first["rank"].as_u64(), first["cohort_size"].as_u64()),
        (Some("0:1"), Some(1), Some(30)),
        "{first}"
    );
}

fn silver_config() -> Config {
    Config::parse(
        r#"
        [[boards]]
        name = "keep"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["week"]
        top = 10
        rules = [{ action = "play", points = 1, max_points = 1000, scope = "none" }]
        league = { period = "week", cohort_size = 3, tiers = ["bronze", "silver", "gold"], promote = 1, demote = 1 }

        [[boards]]
        name = "drop"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["week"]
        top = 10
        rules = [{ action = "play", points = 1, max_points = 1000, scope = "none" }]
        league = { period = "week", cohort_size = 3, tiers = ["bronze", "silver", "gold"], promote = 1, demote = 1, idle = "drop" }
        "#,
    )
    .expect("a valid configuration")
}

/// A silver cohort of three; c's points are corrected back to 0 (a cheat's points taken away).
/// At the close c is as if they never played (zone `idle`): not ranked last and demoted in
/// the place of the others; they keep silver where idle players keep their tier, and go down
/// one where idle players drop. The two who played are ranked as a cohort of two.
#[tokio::test]
async fn a_member_corrected_to_nothing_closes_as_one_who_did_not_play() {
    let app = spawn_ingest_with(silver_config()).await;
    app.set_now(at("2026-11-26T10:00:00Z"));
    for board in ["keep", "drop"] {
        for user in ["a", "b", "c"] {
            let tiers = app.keys.board(board).league_tiers();
            let _: () = redis::cmd("HSET").arg(tiers).arg(user).arg(1).query_async(&mut app.redis.clone()).await.unwrap();
        }
    }
    for (i, (user, points)) in [("a", 9), ("b", 5), ("c", 7)].into_iter().enumerate() {
        app.set_now(at("2026-11-26T10:00:00Z") + Duration::seconds(i as i64));
        let (status, body) = app.event(json!({"event_id": format!("e{i}"), "user_id": user, "action": "play", "points": points})).await;
        assert_eq!(status, 200, "{body}");
    }
    for board in ["keep", "drop"] {
        let correction = json!({"delta": -7, "reason": "cheated", "correction_id": format!("zero-{board}")});
        let path = format!("/v1/admin/boards/{board}/users/c/corrections");
        let (status, body) = app.call(axum::http::Method::POST, &path, correction.to_string(), standings_tests::ADMIN).await;
        assert_eq!(status, 200, "{body}");
    }
    app.set_now(at("2026-11-30T00:30:01Z"));
    close(&app, silver_config()).await;
    for (board, c_next) in [("keep", "silver"), ("drop", "bronze")] {
        let history = |user: &str| format!("/v1/boards/{board}/users/{user}/league/history");
        let c = app.get(&history("c")).await.1["results"][0].clone();
        assert_eq!(
            (c["zone"].as_str(), c["rank"].clone(), c["next_tier"].as_str()),
            (Some("idle"), Value::Null, Some(c_next)),
            "{board}: {c}"
        );
        for (user, rank) in [("a", 1), ("b", 2)] {
            let row = app.get(&history(user)).await.1["results"][0].clone();
            // A cohort of two in silver: 1 × 2 / 3 rounds to nobody moving.
            assert_eq!(
                (row["rank"].as_u64(), row["cohort_size"].as_u64(), row["zone"].as_str()),
                (Some(rank), Some(2), Some("stay")),
                "{board}: {row}"
            );
        }
    }
}

/// A player who never wrote this week is given points by a correction: they are placed in a
/// cohort as a first write would place them, ranked at the close, and not dropped as idle.
#[tokio::test]
async fn a_correction_that_puts_a_player_on_the_week_places_them_and_they_are_not_idle() {
    let app = spawn_ingest_with(silver_config()).await;
    app.set_now(at("2026-11-26T10:00:00Z"));
    for (i, user) in ["a", "b"].into_iter().enumerate() {
        app.set_now(at("2026-11-26T10:00:00Z") + Duration::seconds(i as i64));
        let (status, body) = app.event(json!({"event_id": format!("e{i}"), "user_id": user, "action": "play", "points": 3})).await;
        assert_eq!(status, 200, "{body}");
    }
    let correction = json!({"delta": 50, "reason": "missed lessons", "correction_id": "fix-z"});
    let (status, body) = app
        .call(axum::http::Method::POST, "/v1/admin/boards/drop/users/z/corrections", correction.to_string(), standings_tests::ADMIN)
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, view) = app.get("/v1/boards/drop/users/z/league").await;
    assert_eq!(view["cohort"], "0:1", "placed like a first write: {view}");

    app.set_now(at("2026-11-30T00:30:01Z"));
    close(&app, silver_config()).await;
    let z = app.get("/v1/boards/drop/users/z/league/history").await.1["results"][0].clone();
    assert_eq!((z["rank"].as_u64(), z["zone"].as_str(), z["next_tier"].as_str()), (Some(1), Some("promote"), Some("silver")), "{z}");
}

/// A league board waiting for its restore (its layout record lost while its one slot's guard says
/// it is a move's target: where its data is, only the restore can tell) is left out of
/// `LeaguesOverdue`, counted by `BoardsLost` instead: the other boards' overdue weeks are still
/// counted. Before, its refusal stopped the count, and the metric was put for none.
#[tokio::test]
async fn a_league_board_waiting_for_its_restore_leaves_the_others_overdue_weeks_counted() {
    let two = Config::parse(&format!("{XP30}\n{}", XP30.replace("\"xp30\"", "\"lost\""))).unwrap();
    let app = standings_tests::journal::spawn_journaled(two).await;
    app.set_now(at("2026-11-25T10:00:00Z"));
    // One event, both boards' rule: a player placed in each.
    play(&app, "p1", "a", 3).await;
    let lost = app.keys.board("lost");
    let mut conn = app.redis.clone();
    let _: () = redis::cmd("HSET").arg(lost.guard()).arg(standings::domain::guard::TARGET).arg("4").query_async(&mut conn).await.unwrap();
    let _: () = redis::cmd("DEL").arg(app.keys.board_layout("lost")).query_async(&mut conn).await.unwrap();
    app.set_now(at("2026-12-02T10:00:00Z"));
    // A container started since (its layout probes its own).
    let fresh = standings::redis::store::Store::connect(&standings_tests::redis_settings()).unwrap();
    assert_eq!(app.closer_on(&fresh).overdue().await.expect("the others counted"), 1, "xp30's week, not the lost board's");
}
