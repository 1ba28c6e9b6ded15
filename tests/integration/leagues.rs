//! Leagues over HTTP (docs/leagues.md): placement on the first write, full cohorts, the
//! reads, the close through the `archive` function's scheduled run, players who write before
//! the close, bans, score boards, and bad requests.

use axum::http::Method;
use chrono::Duration;
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::{ADMIN, TestApp, at, scheduled_event, spawn_ingest_with};

fn config() -> Config {
    Config::parse(
        r#"
        [[boards]]
        name = "lg"
        kind = "cumulative"
        timezone = "Asia/Shanghai"
        periods = ["week", "day"]
        week_start = "sunday"
        top = 10
        rules = [{ action = "play", points = 1, max_points = 100, scope = "none" }]
        league = { period = "week", cohort_size = 3, tiers = ["bronze", "silver", "gold"], promote = 1, demote = 1, per_tier = { silver = { promote = 0.34 } } }

        [[boards]]
        name = "laps"
        kind = "scores"
        keep = "best"
        order = "asc"
        timezone = "UTC"
        periods = ["week"]
        top = 10
        league = { period = "week", cohort_size = 2, tiers = ["slow", "fast"], promote = 1, demote = 1 }

        [[boards]]
        name = "drops"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["week"]
        top = 10
        rules = [{ action = "drill", points = 1, max_points = 100, scope = "none" }]
        league = { period = "week", cohort_size = 3, tiers = ["bronze", "silver", "gold"], promote = 1, demote = 1, idle = "drop" }

        [[boards]]
        name = "plain"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["week"]
        top = 10
        rules = [{ action = "play", points = 1, max_points = 100, scope = "none" }]
        "#,
    )
    .expect("a valid configuration")
}

async fn play(app: &TestApp, id: &str, user: &str, points: u32) {
    let (status, body) = app.event(json!({"event_id": id, "user_id": user, "action": "play", "points": points})).await;
    assert_eq!(status, 200, "{body}");
}

async fn league(app: &TestApp, board: &str, user: &str) -> Value {
    let (status, body) = app.get(&format!("/v1/boards/{board}/users/{user}/league")).await;
    assert_eq!(status, 200, "{body}");
    body
}

fn entries(body: &Value) -> Vec<(String, i64, String)> {
    body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["user_id"].as_str().unwrap().to_owned(), e["score"].as_i64().unwrap(), e["zone"].as_str().unwrap().to_owned()))
        .collect()
}

fn row(user: &str, score: i64, zone: &str) -> (String, i64, String) {
    (user.to_owned(), score, zone.to_owned())
}

async fn close(app: &TestApp) -> Value {
    let scheduled: Value = serde_json::to_value(scheduled_event(app.now())).unwrap();
    let archiver = standings_tests::ArchiveHarness::with_config(config()).await;
    let response =
        archive::run(&archiver.archiver(archiver.table.clone()), &app.closer(), scheduled, chrono::Utc::now() + Duration::minutes(5))
            .await
            .unwrap();
    serde_json::to_value(response.leagues).unwrap()
}

#[tokio::test]
async fn first_writes_fill_one_cohort_at_a_time_and_the_week_closes_once_with_zones() {
    let app = spawn_ingest_with(config()).await;
    // Thursday 2026-11-26 in Shanghai: the Sunday week of 2026-11-22.
    app.set_now(at("2026-11-26T10:00:00+08:00"));
    let fresh = league(&app, "lg", "nobody").await;
    assert_eq!((fresh["tier"].as_str(), fresh["cohort"].is_null(), fresh["period_id"].as_str()), (Some("bronze"), true, Some("2026-W48")));
    assert_eq!(fresh["period_start"], "2026-11-22T00:00:00+08:00");
    assert_eq!(fresh["next_reset"], "2026-11-29T00:00:00+08:00");
    assert_eq!(fresh["entries"], json!([]));

    for (i, (user, points)) in [("a", 5), ("b", 9), ("c", 5), ("d", 1)].into_iter().enumerate() {
        app.set_now(at("2026-11-26T10:00:00+08:00") + Duration::seconds(i as i64));
        play(&app, &format!("e{i}"), user, points).await;
    }
    // a, b, c fill cohort 0:1; d opens 0:2. a reached 5 a second before c: a ranks above c.
    let first = league(&app, "lg", "c").await;
    assert_eq!(first["cohort"], "0:1");
    assert_eq!(entries(&first), [row("b", 9, "promote"), row("a", 5, "stay"), row("c", 5, "stay")], "bronze demotes nobody");
    assert_eq!(league(&app, "lg", "d").await["cohort"], "0:2");
    let (status, listing) = app.get("/v1/boards/lg/leagues?tier=bronze").await;
    assert_eq!(status, 200, "{listing}");
    assert_eq!(
        listing["tiers"],
        json!([{"tier": "bronze", "cohorts_total": 2, "cohorts": [{"cohort": "0:1", "size": 3}, {"cohort": "0:2", "size": 1}]}])
    );
    let (_, page) = app.get("/v1/boards/lg/leagues?tier=bronze&offset=1&limit=1").await;
    assert_eq!(page["tiers"][0]["cohorts"], json!([{"cohort": "0:2", "size": 1}]), "{page}");
    let (status, _) = app.get("/v1/boards/lg/leagues?limit=1001").await;
    assert_eq!(status, 400);
    // A second write is no second placement; points on the day board count nowhere else.
    play(&app, "e9", "a", 10).await;
    assert_eq!(entries(&league(&app, "lg", "a").await)[0], row("a", 15, "promote"));

    // Sunday 00:30 is past the week and its 30-minute grace.
    app.set_now(at("2026-11-29T00:30:01+08:00"));
    let reports = close(&app).await;
    assert_eq!(
        reports,
        json!([{"board": "lg", "period_id": "2026-W48", "status": "complete", "cohorts_closed": 2, "players_placed_after": 0}])
    );
    assert_eq!(close(&app).await, json!([]), "closed once");
    let (status, history) = app.get("/v1/boards/lg/users/a/league/history").await;
    assert_eq!(status, 200, "{history}");
    assert_eq!(
        history["results"],
        json!([{"period_id": "2026-W48", "tier": "bronze", "cohort": "0:1", "rank": 1, "cohort_size": 4, "score": 15, "zone": "promote", "next_tier": "silver"}])
    );
    // d, alone in 0:2 (less than half a cohort), was ranked with 0:1: a group of 4, last.
    assert_eq!(app.get("/v1/boards/lg/users/d/league/history").await.1["results"][0]["zone"], "stay");
    // a starts the next week in silver; the others stay in bronze.
    assert_eq!(league(&app, "lg", "a").await["tier"], "silver");
    play(&app, "n1", "a", 1).await;
    play(&app, "n2", "b", 1).await;
    assert_eq!(league(&app, "lg", "a").await["cohort"], "1:1");
    assert_eq!(league(&app, "lg", "b").await["cohort"], "0:1");
}

#[tokio::test]
async fn players_who_write_before_last_week_closes_wait_and_are_placed_in_order_by_the_close() {
    let app = spawn_ingest_with(config()).await;
    app.set_now(at("2026-11-26T10:00:00+08:00"));
    for (i, user) in ["a", "b", "c"].into_iter().enumerate() {
        play(&app, &format!("w1-{i}"), user, 10 - i as u32).await;
    }
    // The next week began; the close has not run: a's tier for it is not known yet.
    app.set_now(at("2026-11-29T00:05:00+08:00"));
    play(&app, "w2-c", "c", 1).await;
    play(&app, "w2-a", "a", 1).await;
    let waiting = league(&app, "lg", "a").await;
    assert_eq!((waiting["cohort"].is_null(), waiting["waiting"].as_bool()), (true, Some(true)));
    assert_eq!(app.get("/v1/boards/lg/users/a/league").await.1["period_id"], "2026-W49");

    app.set_now(at("2026-11-29T01:00:00+08:00"));
    let reports = close(&app).await;
    assert_eq!(reports[0]["players_placed_after"], 2);
    // a promoted to silver; c stayed in bronze (bronze demotes nobody).
    let a = league(&app, "lg", "a").await;
    assert_eq!((a["tier"].as_str(), a["cohort"].as_str(), a["waiting"].as_bool()), (Some("silver"), Some("1:1"), Some(false)));
    assert_eq!(league(&app, "lg", "c").await["cohort"], "0:1");
    // From now on a first write places at once.
    play(&app, "w2-b", "b", 1).await;
    assert_eq!(league(&app, "lg", "b").await["cohort"], "0:1");
}

#[tokio::test]
async fn a_banned_player_leaves_their_cohort_and_a_newcomer_takes_the_place() {
    let app = spawn_ingest_with(config()).await;
    app.set_now(at("2026-11-26T10:00:00+08:00"));
    for (i, user) in ["a", "b", "c"].into_iter().enumerate() {
        play(&app, &format!("e{i}"), user, 3).await;
    }
    let (status, _) = app.call(Method::POST, "/v1/admin/users/b/ban", "{}", ADMIN).await;
    assert_eq!(status, 200);
    assert_eq!(entries(&league(&app, "lg", "a").await).len(), 2);
    assert!(league(&app, "lg", "b").await["cohort"].is_null());
    play(&app, "e9", "d", 1).await;
    assert_eq!(league(&app, "lg", "d").await["cohort"], "0:1", "the open cohort had room again");
}

#[tokio::test]
async fn a_score_board_league_ranks_by_the_boards_order() {
    let app = spawn_ingest_with(config()).await;
    app.set_now(at("2026-11-26T10:00:00Z"));
    for (i, (user, score)) in [("slow", 90), ("quick", 40)].into_iter().enumerate() {
        let (status, body) =
            app.post("/v1/boards/laps/scores", &json!({"event_id": format!("s{i}"), "user_id": user, "score": score})).await;
        assert_eq!(status, 200, "{body}");
    }
    let body = league(&app, "laps", "slow").await;
    assert_eq!(entries(&body), [row("quick", 40, "promote"), row("slow", 90, "stay")], "lower is better; the bottom tier demotes nobody");
}

#[tokio::test]
async fn bad_league_requests_are_refused_with_their_own_codes() {
    let app = spawn_ingest_with(config()).await;
    for (path, status, code) in [
        ("/v1/boards/plain/users/a/league", 404, "no_league"),
        ("/v1/boards/nope/users/a/league", 404, "unknown_board"),
        ("/v1/boards/lg/users/a%7Bb%7D/league", 400, "invalid_id"),
        ("/v1/boards/lg/users/a/league?at=2026-13-01", 400, "malformed"),
        ("/v1/boards/lg/users/a/league?week=1", 400, "malformed"),
        ("/v1/boards/lg/leagues?tier=platinum", 400, "unknown_tier"),
        ("/v1/boards/lg/leagues?period=2026-48", 400, "malformed"),
        ("/v1/boards/plain/leagues", 404, "no_league"),
    ] {
        let (got, body) = app.get(path).await;
        assert_eq!((got.as_u16(), body["error"]["code"].as_str()), (status, Some(code)), "{path}: {body}");
    }
}

#[tokio::test]
async fn a_close_stopped_by_its_deadline_is_finished_by_the_next_run_and_a_manual_close_waits_for_older_periods() {
    let app = spawn_ingest_with(config()).await;
    app.set_now(at("2026-11-19T10:00:00+08:00"));
    play(&app, "w47", "a", 1).await;
    app.set_now(at("2026-11-26T10:00:00+08:00"));
    for (i, user) in ["a", "b", "c", "d"].into_iter().enumerate() {
        play(&app, &format!("w48-{i}"), user, 4 - i as u32).await;
    }
    app.set_now(at("2026-11-29T01:00:00+08:00"));
    // W48's players wait for W47 (a played it): W47 must close first.
    let request = archive::LeagueRequest { board: "lg".into(), period_id: "2026-W48".into() };
    let refused = app.closer().close(&request, chrono::Utc::now() + Duration::minutes(5)).await.unwrap_err();
    assert!(refused.to_string().contains("2026-W47 is not closed yet"), "{refused}");

    let stopped = app.closer().close_due(chrono::Utc::now() - Duration::seconds(1)).await.unwrap();
    assert_eq!(serde_json::to_value(&stopped).unwrap()[0]["status"], "in_progress");
    let reports = app.closer().close_due(chrono::Utc::now() + Duration::minutes(5)).await.unwrap();
    let summary: Vec<_> = reports.iter().map(|r| (r.period_id.as_str(), r.status, r.cohorts_closed, r.players_placed_after)).collect();
    assert_eq!(summary, [("2026-W47", "complete", 1, 4), ("2026-W48", "complete", 2, 0)], "W48's four waited for W47");
    let history = app.get("/v1/boards/lg/users/a/league/history").await.1;
    let weeks: Vec<_> = history["results"].as_array().unwrap().iter().map(|r| r["period_id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(weeks, ["2026-W48", "2026-W47"], "newest first");
}

#[tokio::test]
async fn on_a_league_that_drops_idle_players_one_who_sits_a_week_out_goes_down_a_tier_once() {
    let app = spawn_ingest_with(config()).await;
    let drill = |id: &str, user: &str, points: u32| json!({"event_id": id, "user_id": user, "action": "drill", "points": points});
    app.set_now(at("2026-11-18T10:00:00Z"));
    for (i, (user, points)) in [("a", 9), ("b", 5), ("c", 1)].into_iter().enumerate() {
        assert_eq!(app.event(drill(&format!("w47-{i}"), user, points)).await.0, 200);
    }
    app.set_now(at("2026-11-24T10:00:00Z"));
    assert_eq!(app.closer().close_due(chrono::Utc::now() + Duration::minutes(5)).await.unwrap().len(), 1);
    assert_eq!(league(&app, "drops", "a").await["tier"], "silver", "a won week 47");
    // Closing by hand a week nobody played (or whose results are gone) drops nobody.
    let unplayed = archive::LeagueRequest { board: "drops".into(), period_id: "2026-W30".into() };
    app.closer().close(&unplayed, chrono::Utc::now() + Duration::minutes(5)).await.unwrap();
    assert_eq!(league(&app, "drops", "a").await["tier"], "silver", "nobody sat out a week nobody played");
    // Week 48: only b plays; a sits it out and drops back to bronze, c is in bronze already.
    assert_eq!(app.event(drill("w48-b", "b", 1)).await.0, 200);
    app.set_now(at("2026-12-01T10:00:00Z"));
    let reports = app.closer().close_due(chrono::Utc::now() + Duration::minutes(5)).await.unwrap();
    assert_eq!(reports.iter().map(|r| r.status).collect::<Vec<_>>(), ["complete"]);
    assert_eq!(league(&app, "drops", "a").await["tier"], "bronze");
    let history = app.get("/v1/boards/drops/users/a/league/history").await.1;
    assert_eq!(
        history["results"][0],
        json!({"period_id": "2026-W48", "tier": "silver", "cohort": null, "rank": null, "cohort_size": null, "score": null, "zone": "idle", "next_tier": "bronze"})
    );
    assert_eq!(
        app.get("/v1/boards/drops/users/c/league/history").await.1["results"].as_array().unwrap().len(),
        1,
        "c was in bronze: nothing to drop"
    );
    assert!(app.closer().close_due(chrono::Utc::now() + Duration::minutes(5)).await.unwrap().is_empty(), "closed once");
    assert_eq!(league(&app, "drops", "a").await["tier"], "bronze", "dropped once");
}

/// A week board is read like any period: every read names the week, when it started and when
/// it resets, in the board's timezone, and its key expires on its own.
#[tokio::test]
async fn a_week_is_read_like_any_period_with_its_start_and_reset() {
    let app = standings_tests::spawn_ingest().await;
    app.set_now(at("2026-11-22T10:00:00+08:00"));
    let (status, reply) = app.event(json!({"event_id": "l1", "user_id": "u1", "action": "lesson"})).await;
    assert_eq!(status, 200, "{reply}");
    for path in [
        "/v1/boards/xp/top?period=week",
        "/v1/boards/xp/users/u1?period=week",
        "/v1/boards/xp/distribution?period=week",
        "/v1/boards/xp/users/u1/statement?period=week",
        "/v1/boards/xp/users/u1/league",
    ] {
        let (status, body) = app.get(path).await;
        assert_eq!(status, 200, "{path}: {body}");
        let week = (&body["period_id"], &body["period_start"], &body["next_reset"]);
        assert_eq!(week, (&json!("2026-W47"), &json!("2026-11-16T00:00:00+08:00"), &json!("2026-11-23T00:00:00+08:00")), "{path}: {body}");
    }
    let (_, next) = app.get("/v1/boards/xp/top?period=week&at=2026-11-23").await;
    assert_eq!((&next["period_id"], &next["entries"]), (&json!("2026-W48"), &json!([])), "{next}");
    let (_, top) = app.get("/v1/boards/xp/top?period=week").await;
    assert_eq!((&top["entries"][0]["user_id"], &top["entries"][0]["score"]), (&json!("u1"), &json!(10)), "{top}");
    let week = standings::domain::period::Period::containing(
        standings::domain::period::PeriodKind::Week(chrono::Weekday::Mon),
        app.now(),
        chrono_tz::Asia::Shanghai,
    );
    let key = app.keys.board("xp").period(&week);
    let ttl: i64 = redis::cmd("TTL").arg(&key).query_async(&mut app.redis.clone()).await.unwrap();
    assert!((7 * 86_400..=42 * 86_400).contains(&ttl), "the week's board expires on its own, 35 days after the week: TTL {ttl}");
}

/// Inside cohorts every guarantee of the board holds: a redelivered event counts (and places)
/// once, a conflicting one is refused, the daily cap and the rate limit hold, a refused
/// first write places nobody.
#[tokio::test]
async fn duplicates_caps_and_rate_limits_hold_inside_cohorts() {
    let app = spawn_ingest_with(
        Config::parse(
            r#"
            [[boards]]
            name = "guarded"
            kind = "cumulative"
            timezone = "UTC"
            periods = ["week"]
            top = 10
            rules = [
              { action = "drill", points = 5, scope = "none", daily_cap = 10 },
              { action = "sprint", points = 1, scope = "none", rate_limit = { max = 1, per_secs = 60 } },
            ]
            league = { period = "week", cohort_size = 3, tiers = ["bronze", "silver"], promote = 1, demote = 1 }
            "#,
        )
        .unwrap(),
    )
    .await;
    let drill = |id: &str, user: &str| json!({"event_id": id, "user_id": user, "action": "drill"});
    for _ in 0..2 {
        let (status, body) = app.event(drill("d1", "a")).await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(app.event(json!({"event_id": "d1", "user_id": "a", "action": "sprint"})).await.0, 409);
    for id in ["d2", "d3"] {
        assert_eq!(app.event(drill(id, "a")).await.0, 200);
    }
    assert_eq!(app.event(json!({"event_id": "r1", "user_id": "b", "action": "sprint"})).await.0, 200);
    let (status, limited) = app.event(json!({"event_id": "r2", "user_id": "b", "action": "sprint"})).await;
    assert_eq!((status.as_u16(), limited["error"]["code"].as_str()), (429, Some("rate_limited")), "{limited}");
    app.set_now(app.now() + Duration::seconds(1));
    let (status, refused) = app.event(json!({"event_id": "r3", "user_id": "c", "action": "sprint"})).await;
    assert_eq!(status, 200, "{refused}");
    let (status, limited) = app.event(json!({"event_id": "r4", "user_id": "c", "action": "sprint"})).await;
    assert_eq!(status, 429, "{limited}");

    let cohort = league(&app, "guarded", "a").await;
    // Bronze is the lowest tier: its last place stays.
    assert_eq!(entries(&cohort), [row("a", 10, "promote"), row("b", 1, "stay"), row("c", 1, "stay")], "{cohort}");
    let (_, listing) = app.get("/v1/boards/guarded/leagues?tier=bronze").await;
    assert_eq!(listing["tiers"][0]["cohorts"], json!([{"cohort": "0:1", "size": 3}]), "each placed once: {listing}");
}

/// A league week not closed a day after its end counts in `LeaguesOverdue`, which every
/// scheduled run puts (the `LeaguesOverdueAlarm`'s metric), until a run closes it.
#[tokio::test]
async fn a_week_left_unclosed_a_day_past_its_end_is_overdue_until_a_run_closes_it() {
    let app = spawn_ingest_with(config()).await;
    play(&app, "p1", "a", 3).await;
    app.set_now(at("2026-12-01T10:00:00+08:00"));
    assert_eq!(app.closer().overdue().await.unwrap(), 1);
    let harness = standings_tests::ArchiveHarness::with_config(config()).await;
    let lines: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = std::sync::Arc::default();
    let sink = lines.clone();
    let metrics = standings::runtime::metrics::Metrics::with_sink(
        "archive",
        std::sync::Arc::new(move |line: String| sink.lock().unwrap().push(serde_json::from_str(&line).unwrap())),
    );
    let archiver = harness.archiver(harness.table.clone()).with_metrics(metrics);
    let overdue = || -> Vec<f64> { lines.lock().unwrap().iter().filter_map(|l| l[archive::LEAGUES_OVERDUE].as_f64()).collect() };
    let scheduled = || serde_json::to_value(scheduled_event(app.now())).unwrap();
    // A run out of time closes nothing: still overdue.
    let _ = archive::run(&archiver, &app.closer(), scheduled(), chrono::Utc::now() - Duration::seconds(1)).await;
    assert_eq!(overdue(), [1.0]);
    archive::run(&archiver, &app.closer(), scheduled(), chrono::Utc::now() + Duration::minutes(5)).await.unwrap();
    assert_eq!(overdue(), [1.0, 0.0]);
    assert_eq!(app.closer().overdue().await.unwrap(), 0);
    // The closed week's results outlive it by their retention, and no longer.
    let results = app.keys.board("lg").league_results("2026-W48");
    let ttl: i64 = redis::cmd("TTL").arg(&results).query_async(&mut app.redis.clone()).await.unwrap();
    let kept = standings::services::leagues::RESULTS_RETENTION_SECS;
    assert!((kept - 86_400..=kept).contains(&ttl), "results kept {kept} s: TTL {ttl}");
}

#[tokio::test]
async fn a_new_players_history_is_empty_before_any_week_has_closed() {
    let app = spawn_ingest_with(config()).await;
    app.set_now(at("2026-11-26T10:00:00+08:00"));
    // Nobody has played, and a player placed this week: no week has closed for either.
    for user in ["never", "w"] {
        if user == "w" {
            play(&app, "h1", "w", 3).await;
        }
        let (status, history) = app.get(&format!("/v1/boards/lg/users/{user}/league/history")).await;
        assert_eq!(status, 200, "{history}");
        assert_eq!(history["results"], json!([]), "{history}");
    }
}

/// On a score board (lower is better here) 0 is a score: a cohort member whose entry was removed
/// has no score, shown as `null` and ranked last, never as 0 (the best time), in the cohort and
/// in the results the close stores.
#[tokio::test]
async fn a_cohort_member_with_no_score_on_a_score_board_is_null_not_zero() {
    let app = spawn_ingest_with(config()).await;
    app.set_now(at("2026-11-26T10:00:00Z"));
    for (id, user, score) in [("q1", "ann", 70_000), ("q2", "bob", 65_000)] {
        let (status, body) = app.post("/v1/boards/laps/scores", &json!({"event_id": id, "user_id": user, "score": score})).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = app
        .call(Method::POST, "/v1/admin/boards/laps/users/bob/corrections", json!({"remove": true, "reason": "void lap"}).to_string(), ADMIN)
        .await;
    assert_eq!(status, 200, "{body}");
    let cohort = league(&app, "laps", "ann").await;
    let scores: Vec<(&str, &Value)> =
        cohort["entries"].as_array().unwrap().iter().map(|e| (e["user_id"].as_str().unwrap(), &e["score"])).collect();
    assert_eq!(scores, [("ann", &json!(70_000)), ("bob", &Value::Null)], "{cohort}");

    app.set_now(at("2026-11-30T00:30:01Z"));
    close(&app).await;
    let (status, history) = app.get("/v1/boards/laps/users/bob/league/history").await;
    assert_eq!(status, 200, "{history}");
    assert_eq!(history["results"][0]["score"], Value::Null, "{history}");
    assert_eq!(app.get("/v1/boards/laps/users/ann/league/history").await.1["results"][0]["score"], 70_000);
}
