//! Admin routes: bans racing ingestion, audited corrections, and the admin scope.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::Method;
use serde_json::{Value, json};
use standings_tests::{ADMIN, Caller, TestApp, WRITER, day, month, season, spawn_ingest};
use tokio::sync::Notify;

async fn admin(app: &TestApp, method: Method, path: &str, body: Value) -> (u16, Value) {
    let (status, reply) = app.call(method, path, body.to_string(), ADMIN).await;
    (status.as_u16(), reply)
}

/// Every board the user could be on right now (10:00 in Shanghai: no boundary nearby).
async fn live_scores(app: &TestApp, user: &str) -> Vec<Option<i64>> {
    vec![
        app.points("activity", day("2026-11-22"), user).await,
        app.points("activity", month("2026-11-22"), user).await,
        app.points("points", season("2026-11-22"), user).await,
        app.points(
            "invites",
            standings::domain::period::Period::containing(standings::domain::period::PeriodKind::All, app.now(), chrono_tz::UTC),
            user,
        )
        .await,
    ]
}

const TASKS: usize = 16;
const EVENTS_PER_TASK: usize = 60;

/// Task `t`'s `i`-th event: each feeds a different board, all for the cheater.
fn cheater_event(t: usize, i: usize) -> Value {
    match i % 3 {
        0 => json!({"event_id": format!("c{t}-{i}"), "user_id": "cheater", "action": "comment", "target": format!("a{t}-{i}")}),
        1 => json!({"event_id": format!("c{t}-{i}"), "user_id": "cheater", "action": "qa"}),
        _ => json!({"event_id": format!("c{t}-{i}"), "user_id": "cheater", "action": "invite", "target": format!("f{t}-{i}")}),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_ban_racing_concurrent_ingestion_leaves_the_user_on_no_live_board() {
    let app = Arc::new(spawn_ingest().await);
    let first_applied = Arc::new(Notify::new());
    let banned = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let (app, first_applied, banned) = (app.clone(), first_applied.clone(), banned.clone());
            tokio::spawn(async move {
                let (mut before_ban, mut honest_points) = (0, 0);
                for i in 0..EVENTS_PER_TASK {
                    let sent_after_ban = banned.load(Ordering::SeqCst);
                    let (status, body) = app.event(cheater_event(t, i)).await;
                    if status == 200 {
                        assert!(!sent_after_ban, "an event sent after the ban returned was applied: {body}");
                        before_ban += 1;
                        first_applied.notify_one();
                    } else {
                        assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (422, Some("user_banned")), "{body}");
                    }
                    // An honest user's events are never refused.
                    let honest =
                        json!({"event_id": format!("h{t}-{i}"), "user_id": "honest", "action": "comment", "target": format!("a{t}-{i}")});
                    assert_eq!(app.event(honest).await.0, 200);
                    honest_points += 3;
                }
                (before_ban, honest_points)
            })
        })
        .collect();

    first_applied.notified().await;
    let (status, ban) = admin(&app, Method::POST, "/v1/admin/users/cheater/ban", json!({})).await;
    banned.store(true, Ordering::SeqCst);
    assert_eq!(status, 200, "{ban}");
    assert_eq!(ban["banned"], true);
    assert_eq!(ban["boards"], json!(["activity", "invites", "points", "high-scores", "lap-times", "xp"]), "every board of users");
    assert!(!ban["removed"].as_array().unwrap().is_empty(), "the cheater had points when banned: {ban}");
    assert_eq!(live_scores(&app, "cheater").await, [None, None, None, None], "off every live board as the ban returns");

    let (mut applied, mut honest_points) = (0, 0);
    for task in tasks {
        let (a, h) = task.await.unwrap();
        applied += a;
        honest_points += h;
    }
    assert!(applied > 0 && applied < TASKS * EVENTS_PER_TASK, "the ban raced the ingestion ({applied} applied)");
    assert_eq!(live_scores(&app, "cheater").await, [None, None, None, None], "and stays off");
    assert_eq!(app.points("activity", day("2026-11-22"), "honest").await, Some(honest_points));
    let (status, body) = app.post("/v1/sign-ins", &json!({"event_id": "s1", "user_id": "cheater"})).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (422, Some("user_banned")));
}

#[tokio::test]
async fn an_unban_lets_events_in_again_without_restoring_scores() {
    let app = spawn_ingest().await;
    app.event(json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a"})).await;
    let (_, ban) = admin(&app, Method::POST, "/v1/admin/users/u1/ban", json!({})).await;
    assert_eq!(
        ban["removed"],
        json!([{"board": "activity", "period": "day", "period_id": "2026-11-22"}, {"board": "activity", "period": "month", "period_id": "2026-11"}])
    );
    let (status, unban) = admin(&app, Method::DELETE, "/v1/admin/users/u1/ban", json!({})).await;
    assert_eq!((status, &unban["banned"], &unban["removed"]), (200, &json!(false), &json!([])));
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, None, "not restored");
    let (status, receipt) = app.event(json!({"event_id": "e2", "user_id": "u1", "action": "comment", "target": "b"})).await;
    assert_eq!((status.as_u16(), &receipt["results"][0]["periods"][0]["score"]), (200, &json!(3)));
    let (_, audit) = admin(&app, Method::GET, "/v1/admin/audit?board=points", json!({})).await;
    let kinds: Vec<&str> = audit["entries"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["unban", "ban"], "every user board records both, newest first");
}

#[tokio::test]
async fn a_correction_shows_in_the_score_and_in_the_audit_log() {
    let app = spawn_ingest().await;
    app.event(json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a"})).await;
    let path = "/v1/admin/boards/activity/users/u1/corrections";
    let (status, corrected) = admin(&app, Method::POST, path, json!({"delta": 5, "reason": "missed praise"})).await;
    assert_eq!(status, 200, "{corrected}");
    assert_eq!(
        corrected["periods"],
        json!([{"period": "day", "period_id": "2026-11-22", "score": 8, "delta": 5, "rank": 1},
               {"period": "month", "period_id": "2026-11", "score": 8, "delta": 5, "rank": 1}])
    );
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(8));
    assert_eq!(app.points("activity", month("2026-11-22"), "u1").await, Some(8));

    // Below zero, zero, too large, no reason: refused, and nothing written.
    let keys_before = app.keyspace().await;
    for (body, status, code) in [
        (json!({"delta": -9, "reason": "too much"}), 422, "out_of_range"),
        (json!({"delta": 0, "reason": "nothing"}), 422, "out_of_range"),
        (json!({"delta": 4_194_304, "reason": "huge"}), 422, "out_of_range"),
        (json!({"delta": 1, "reason": ""}), 400, "malformed"),
        (json!({"delta": 1, "reason": "x".repeat(201)}), 400, "malformed"),
        (json!({"delta": 1.5, "reason": "half"}), 400, "malformed"),
        (json!({"delta": 1}), 400, "malformed"),
    ] {
        let (got, reply) = admin(&app, Method::POST, path, body.clone()).await;
        assert_eq!((got, reply["error"]["code"].as_str()), (status, Some(code)), "{body}");
    }
    for (path, status, code) in [
        ("/v1/admin/boards/nope/users/u1/corrections", 404, "unknown_board"),
        ("/v1/admin/boards/hot-videos/users/u1/corrections", 404, "unknown_board"),
        ("/v1/admin/boards/activity/users/u%20x/corrections", 400, "invalid_id"),
    ] {
        let (got, reply) = admin(&app, Method::POST, path, json!({"delta": 1, "reason": "r"})).await;
        assert_eq!((got, reply["error"]["code"].as_str()), (status, Some(code)), "{path}");
    }
    assert_eq!(app.keyspace().await, keys_before);

    let (_, to_zero) = admin(&app, Method::POST, path, json!({"delta": -8, "reason": "fraud"})).await;
    assert_eq!(
        to_zero["periods"][0],
        json!({"period": "day", "period_id": "2026-11-22", "score": 0, "delta": -8, "rank": null}),
        "zero is off the board"
    );
    let (status, audit) = admin(&app, Method::GET, "/v1/admin/audit?board=activity", json!({})).await;
    assert_eq!(status, 200);
    let entries = audit["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    let mut newest = entries[0].clone();
    let at = newest.as_object_mut().unwrap().remove("at").unwrap();
    assert_eq!(standings_tests::at(at.as_str().unwrap()), app.now());
    let id = newest.as_object_mut().unwrap().remove("correction_id").unwrap();
    assert!(id.as_str().unwrap().starts_with("auto-"), "a correction without an id gets one: {id}");
    assert_eq!(
        newest,
        json!({"board": "activity", "kind": "correction", "user_id": "u1", "delta": -8, "reason": "fraud", "actor": "tester"})
    );
    let mut answered = to_zero.clone();
    answered.as_object_mut().unwrap().remove("periods");
    assert_eq!(answered.as_object_mut().unwrap().remove("duplicate"), Some(json!(false)));
    assert_eq!(answered, entries[0], "the correction answers with its audit entry");
    assert_eq!((&entries[1]["delta"], &entries[1]["reason"]), (&json!(5), &json!("missed praise")));
    let (_, newest) = admin(&app, Method::GET, "/v1/admin/audit?board=activity&limit=1", json!({})).await;
    assert_eq!(newest["entries"].as_array().unwrap().len(), 1);
    assert_eq!(newest["entries"][0]["delta"], -8);

    // A banned user's score cannot be corrected back onto the board.
    admin(&app, Method::POST, "/v1/admin/users/u1/ban", json!({})).await;
    let (status, body) = admin(&app, Method::POST, path, json!({"delta": 5, "reason": "sneak back"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("user_banned")));
}

#[tokio::test]
async fn the_audit_log_keeps_the_newest_ten_thousand_entries() {
    let app = spawn_ingest().await;
    let log = app.keys.board("activity").audit();
    let old = json!({"at": "2026-11-01T00:00:00Z", "board": "activity", "kind": "ban", "user_id": "old", "actor": null}).to_string();
    let () = redis::cmd("LPUSH").arg(&log).arg(vec![old; 10_000]).query_async(&mut app.redis.clone()).await.unwrap();
    admin(&app, Method::POST, "/v1/admin/boards/activity/users/u1/corrections", json!({"delta": 1, "reason": "r"})).await;
    let len: usize = redis::cmd("LLEN").arg(&log).query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(len, 10_000);
    let (_, audit) = admin(&app, Method::GET, "/v1/admin/audit?board=activity&limit=2", json!({})).await;
    assert_eq!((&audit["entries"][0]["user_id"], &audit["entries"][1]["user_id"]), (&json!("u1"), &json!("old")));
    for (query, code) in [
        ("?board=activity&limit=0", "out_of_range"),
        ("?board=activity&limit=1001", "out_of_range"),
        ("", "malformed"),
        ("?board=nope", "unknown_board"),
    ] {
        let (_, reply) = admin(&app, Method::GET, &format!("/v1/admin/audit{query}"), json!({})).await;
        assert_eq!(reply["error"]["code"], code, "{query}");
    }
}

#[tokio::test]
async fn every_admin_route_needs_the_admin_scope() {
    let app = spawn_ingest().await;
    let routes = [
        (Method::POST, "/v1/admin/users/u1/ban", "{}"),
        (Method::DELETE, "/v1/admin/users/u1/ban", "{}"),
        (Method::POST, "/v1/admin/boards/activity/users/u1/corrections", r#"{"delta": 5, "reason": "r"}"#),
        (Method::GET, "/v1/admin/audit?board=activity", ""),
    ];
    for (method, path, body) in routes {
        let (status, reply) = app.call(method.clone(), path, body, Caller::Anonymous).await;
        assert_eq!((status.as_u16(), reply["error"]["code"].as_str()), (401, Some("unauthenticated")), "{method} {path}");
        let (status, reply) = app.call(method.clone(), path, body, WRITER).await;
        assert_eq!((status.as_u16(), reply["error"]["code"].as_str()), (403, Some("forbidden")), "{method} {path}");
    }
    assert_eq!(app.written_keys().await, Vec::<String>::new());
}
