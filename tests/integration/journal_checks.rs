//! Verify and rule dry-runs (docs/journal.md): the journal (objects in moto S3 through the real
//! SDK, and what is not drained yet) replayed into shadow keys, compared with Redis and thrown
//! away. Verify finds nothing on a board its journal explains and names the member whose score
//! was changed behind its back; a dry-run under candidate rules matches a model of the board
//! written here, and changes nothing live.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings_tests::journal::{new_bucket, s3};
use standings_tests::{TestApp, arena, spawn_journaled};

fn far() -> chrono::DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

/// Every key but the shadow's, with its value and expiry: what "nothing live changes" compares.
async fn live_state(app: &TestApp) -> Vec<(String, Vec<u8>, i64)> {
    app.keyspace().await.into_iter().filter(|(key, ..)| !key.contains(":shadow-")).collect()
}

/// What a shadow replay leaves behind expires within minutes.
async fn assert_shadow_expires(app: &TestApp) {
    for (key, _, expiry) in app.keyspace().await.into_iter().filter(|(key, ..)| key.contains(":shadow-")) {
        let left = expiry - Utc::now().timestamp_millis();
        assert!(expiry > 0 && left <= standings::redis::keys::SHADOW_TTL_SECS * 1000, "{key} is left for {left} ms");
    }
}

#[tokio::test]
async fn verify_finds_nothing_on_boards_the_journal_explains_and_names_a_score_changed_behind_its_back() {
    let app = spawn_journaled(Config::default_boards()).await;
    app.set_now(Utc::now());
    for i in 0..12 {
        let event =
            json!({"event_id": format!("v{i}"), "user_id": format!("u{}", i % 4), "action": "page_view", "target": format!("p{i}")});
        assert_eq!(app.event(event).await.0, StatusCode::OK);
    }
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let metrics = Arc::new(Mutex::new(Vec::new()));
    let jobs = app.journal_jobs(&client, &bucket, metrics.clone());
    jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    // Some writes not drained yet: verify reads them from Redis.
    for i in 12..16 {
        let event = json!({"event_id": format!("v{i}"), "user_id": format!("u{}", i % 4), "action": "comment", "target": format!("p{i}")});
        assert_eq!(app.event(event).await.0, StatusCode::OK);
    }
    let clean = jobs.run(json!({"verify": {}}), far()).await.expect("a verify");
    assert_eq!(clean["mismatches"], 0, "{clean}");
    let activity = clean["boards"].as_array().unwrap().iter().find(|b| b["board"] == "activity").unwrap();
    assert_eq!(activity["replayed"], 16);
    assert_eq!(activity["periods"][0]["members"], 4);

    // Someone edits Redis by hand: u2's day score.
    let day = Period::containing(PeriodKind::Day, app.now(), chrono_tz::Asia::Shanghai);
    let key = app.keys.board("activity").period(&day);
    let held: f64 = redis::cmd("ZSCORE").arg(&key).arg("u2").query_async(&mut app.redis.clone()).await.unwrap();
    let _: () = redis::cmd("ZADD")
        .arg(&key)
        .arg(held + 50.0 * standings::domain::tiebreak::TIME_SPAN as f64)
        .arg("u2")
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    let before = live_state(&app).await;
    let found = jobs.run(json!({"verify": {"board": "activity"}}), far()).await.expect("a verify");
    assert_eq!(found["mismatches"], 1, "{found}");
    let difference = &found["boards"][0]["periods"][0]["differences"][0];
    assert_eq!(difference["user_id"], "u2");
    assert_eq!(difference["live"].as_i64().unwrap() - difference["replayed"].as_i64().unwrap(), 50, "{difference}");
    let lines = metrics.lock().unwrap().clone();
    let mismatch = |board: Option<&str>| {
        let line = lines.iter().rev().find(|m| m.get(journal::MISMATCH_METRIC).is_some() && m["Board"].as_str() == board);
        line.and_then(|m| m[journal::MISMATCH_METRIC].as_f64())
    };
    assert_eq!((mismatch(Some("activity")), mismatch(None)), (Some(1.0), Some(1.0)), "per board, and the total the alarm watches");
    assert_eq!(live_state(&app).await, before, "verify writes nothing live");
    assert_shadow_expires(&app).await;
}

/// The model: each user's score under `points` per win, and when they reached it (their last
/// win: a give is reached when it is applied), best first, earlier first among equals.
fn model(wins: &[(String, chrono::DateTime<Utc>)], points: i64) -> Vec<(String, i64)> {
    let mut users: HashMap<&str, (i64, chrono::DateTime<Utc>)> = HashMap::new();
    for (user, at) in wins {
        let entry = users.entry(user).or_insert((0, *at));
        *entry = (entry.0 + points, *at);
    }
    let mut ranked: Vec<(&str, (i64, chrono::DateTime<Utc>))> = users.into_iter().collect();
    ranked.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)));
    ranked.into_iter().map(|(user, (score, _))| (user.to_owned(), score)).collect()
}

fn standings(list: &Value) -> Vec<(String, i64)> {
    list.as_array().unwrap().iter().map(|s| (s["user_id"].as_str().unwrap().to_owned(), s["score"].as_i64().unwrap())).collect()
}

#[tokio::test]
async fn a_dry_run_reports_what_candidate_rules_would_make_of_the_period_and_changes_nothing() {
    let app =
        spawn_journaled(arena(r#"[{ action = "win", points = 3, scope = "none" }, { action = "draw", points = 1, scope = "none" }]"#))
            .await;
    // Wins and draws on a clock that moves a second per event, so ties are decided by time.
    let start = Utc::now() - Duration::minutes(10);
    let mut wins = Vec::new();
    let rounds = [
        ("ann", "win"),
        ("bob", "win"),
        ("cid", "draw"),
        ("bob", "draw"),
        ("ann", "draw"),
        ("cid", "win"),
        ("dan", "draw"),
        ("cid", "win"),
    ];
    for (i, (user, action)) in rounds.iter().enumerate() {
        let at = start + Duration::seconds(i as i64);
        app.set_now(at);
        assert_eq!(app.event(json!({"event_id": format!("g{i}"), "user_id": user, "action": action})).await.0, StatusCode::OK);
        if *action == "win" {
            wins.push((user.to_string(), at));
        }
    }
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let jobs = app.journal_jobs(&client, &bucket, Arc::default());
    jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    let before = live_state(&app).await;

    // Candidate rules: a win is worth 5 and draws count for nothing (no rule).
    let candidate = r#"name = "arena"
kind = "cumulative"
timezone = "UTC"
periods = ["all"]
top = 10
rules = [{ action = "win", points = 5, scope = "none" }]"#;
    let request = json!({"dry_run": {"board": "arena", "period": "all", "period_id": "all", "config": candidate}});
    let report = jobs.run(request, far()).await.expect("a dry-run");
    assert_eq!((report["replayed"].as_u64(), report["refused"].as_u64()), (Some(8), Some(4)), "draws are refused: {report}");
    assert_eq!(standings(&report["top_after"]), model(&wins, 5), "{report}");
    let live_top: Vec<(String, i64)> = standings(&report["top_before"]);
    assert_eq!(live_top[0], ("cid".to_owned(), 7), "{report}");
    assert_eq!(report["before"]["members"], 4);
    assert_eq!(report["after"], json!({"members": 3, "points": 20}));
    let dan = report["movers"].as_array().unwrap().iter().find(|m| m["user_id"] == "dan").expect("dan leaves the board");
    assert_eq!((dan["rank_before"].as_u64(), dan["rank_after"].as_u64()), (Some(4), None));
    assert_eq!(live_state(&app).await, before, "nothing live changes");
    assert_shadow_expires(&app).await;

    // Bad requests write nothing and say what is wrong.
    for (bad, says) in [
        (json!({"dry_run": {"board": "arena", "period": "day", "period_id": "2026-11-22", "config": candidate}}), "period"),
        (json!({"dry_run": {"board": "arena", "period": "all", "period_id": "all", "config": "rules = ["}}), "config"),
        (json!({"dry_run": {"board": "nope", "period": "all", "period_id": "all", "config": candidate}}), "nope"),
    ] {
        let error = jobs.run(bad, far()).await.unwrap_err();
        assert!(["bad_request", "unknown_board"].contains(&error.code()) && error.to_string().contains(says), "{error}");
    }
    assert_eq!(live_state(&app).await, before);
}

/// Verify reads live state after the last line it replayed: writes landing meanwhile must not
/// read as mismatches (the alarm fires at 1). It replays what landed since and looks again, so
/// a verify under a steady writer finds nothing.
#[tokio::test]
async fn verify_under_a_concurrent_writer_finds_no_mismatch() {
    let app = spawn_journaled(Config::default_boards()).await;
    app.set_now(Utc::now());
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let jobs = app.journal_jobs(&client, &bucket, Arc::new(Mutex::new(Vec::new())));
    let comment =
        |i: usize| json!({"event_id": format!("w{i}"), "user_id": format!("u{}", i % 5), "action": "comment", "target": format!("p{i}")});
    for i in 0..20 {
        assert_eq!(app.event(comment(i)).await.0, StatusCode::OK);
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    let writer = async {
        let mut i = 20;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            assert_eq!(app.event(comment(i)).await.0, StatusCode::OK);
            i += 1;
        }
        i - 20
    };
    let verify = async {
        let report = jobs.run(json!({"verify": {"board": "activity"}}), far()).await.expect("a verify");
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        report
    };
    let (written, report) = tokio::join!(writer, verify);
    assert!(written > 0, "the writer wrote while verify ran");
    assert_eq!(report["mismatches"], 0, "{report}");
}

/// Objects that overlap (a store rolled back drains its stream again: two lines stored twice,
/// the copy named after the first's third line): verify replays each line once, in order,
/// where it replayed the copies again (a grant without an id applied twice, a false mismatch).
#[tokio::test]
async fn verify_over_overlapping_objects_replays_each_line_once() {
    let app = spawn_journaled(Config::default_boards()).await;
    app.set_now(Utc::now());
    for i in 0..6 {
        let event = json!({"event_id": format!("v{i}"), "user_id": format!("u{i}"), "action": "page_view", "target": format!("p{i}")});
        assert_eq!(app.event(event).await.0, StatusCode::OK);
    }
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let jobs = app.journal_jobs(&client, &bucket, Arc::default());
    jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    standings_tests::journal::store_overlapping_copy(&client, &bucket, "activity", 6).await;
    let verified = jobs.run(json!({"verify": {"board": "activity"}}), far()).await.expect("a verify");
    assert_eq!(verified["mismatches"], 0, "{verified}");
    assert_eq!(verified["boards"][0]["replayed"], 6, "{verified}");
}
