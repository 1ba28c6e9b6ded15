//! The seed-000/001 activity rules, the invite and points rules, and profiles.

use serde_json::{Value, json};
use standings_tests::{Caller, WRITER, day, month, spawn_ingest};

fn result(receipt: &Value) -> &Value {
    &receipt["results"][0]
}

#[tokio::test]
async fn viewing_the_same_path_twice_a_day_counts_once() {
    let app = spawn_ingest().await;
    let view = |id: &str| json!({"event_id": id, "user_id": "u1", "action": "page_view", "target": "/article/1"});
    let (status, first) = app.event(view("v1")).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(result(&first)["applied"], true);
    assert_eq!(result(&first)["delta"], 1);
    let (_, second) = app.event(view("v2")).await;
    assert_eq!(result(&second)["applied"], false);
    assert_eq!(result(&second)["reason"], "already_counted");
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(1));
    assert_eq!(app.points("activity", month("2026-11-22"), "u1").await, Some(1));
    // A different path is a new page.
    app.event(json!({"event_id": "v3", "user_id": "u1", "action": "page_view", "target": "/article/2"})).await;
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(2));
}

#[tokio::test]
async fn praise_cancel_praise_nets_two_points() {
    let app = spawn_ingest().await;
    let praise = |id: &str, active: bool| json!({"event_id": id, "user_id": "u1", "action": "praise", "target": "a7", "active": active});
    let (_, given) = app.event(praise("p1", true)).await;
    assert_eq!(result(&given)["periods"][0]["score"], 2);
    let (_, taken) = app.event(praise("p2", false)).await;
    assert_eq!(result(&taken)["delta"], -2);
    assert_eq!(result(&taken)["periods"][0]["score"], 0);
    assert_eq!(result(&taken)["periods"][0]["rank"], Value::Null, "zero points is off the board");
    let (_, again) = app.event(praise("p3", true)).await;
    assert_eq!(result(&again)["delta"], 2);
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(2));
    assert_eq!(app.points("activity", month("2026-11-22"), "u1").await, Some(2));
}

#[tokio::test]
async fn a_cancel_with_nothing_to_take_back_changes_nothing() {
    let app = spawn_ingest().await;
    app.event(json!({"event_id": "c1", "user_id": "u1", "action": "comment", "target": "a1"})).await;
    let (status, receipt) =
        app.event(json!({"event_id": "c2", "user_id": "u1", "action": "collect", "target": "a1", "active": false})).await;
    assert_eq!(status, 200);
    assert_eq!(result(&receipt)["applied"], false);
    assert_eq!(result(&receipt)["reason"], "nothing_to_take_back");
    assert_eq!(result(&receipt)["periods"][0]["score"], 3);
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(3));
}

#[tokio::test]
async fn take_backs_never_go_below_what_was_earned() {
    let app = spawn_ingest().await;
    app.event(json!({"event_id": "f1", "user_id": "u1", "action": "follow", "target": "u9"})).await;
    app.event(json!({"event_id": "m1", "user_id": "u1", "action": "publish", "target": "a1"})).await;
    // Two cancels of the one follow: only the first takes anything back.
    for id in ["f2", "f3"] {
        app.event(json!({"event_id": id, "user_id": "u1", "action": "follow", "target": "u9", "active": false})).await;
    }
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(10));
    // A follow of u8 stays given on the 22nd; its cancel on the 23rd finds nothing in the
    // 23rd's ledger (ledgers are per day), so yesterday's points stay on the month.
    app.event(json!({"event_id": "f5", "user_id": "u1", "action": "follow", "target": "u8"})).await;
    app.set_now(standings_tests::at("2026-11-23T10:00:00+08:00"));
    let (_, receipt) = app.event(json!({"event_id": "f4", "user_id": "u1", "action": "follow", "target": "u8", "active": false})).await;
    assert_eq!(result(&receipt)["reason"], "nothing_to_take_back");
    assert_eq!(app.points("activity", month("2026-11-22"), "u1").await, Some(12));
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(12));
}

#[tokio::test]
async fn publishing_counts_once_per_article_ever() {
    let app = spawn_ingest().await;
    app.event(json!({"event_id": "p1", "user_id": "u1", "action": "publish", "target": "a1"})).await;
    app.set_now(standings_tests::at("2026-11-25T10:00:00+08:00"));
    let (_, again) = app.event(json!({"event_id": "p2", "user_id": "u1", "action": "publish", "target": "a1"})).await;
    assert_eq!(result(&again)["reason"], "already_counted");
    assert_eq!(app.points("activity", month("2026-11-22"), "u1").await, Some(10));
}

#[tokio::test]
async fn an_invitee_counts_once_on_the_whole_board() {
    let app = spawn_ingest().await;
    let (_, first) = app.event(json!({"event_id": "i1", "user_id": "alice", "action": "invite", "target": "bob"})).await;
    assert_eq!(result(&first)["board"], "invites");
    assert_eq!(result(&first)["periods"][0], json!({"period": "all", "period_id": "all", "score": 100, "delta": 100, "rank": 1}));
    let (_, second) = app.event(json!({"event_id": "i2", "user_id": "carol", "action": "invite", "target": "bob"})).await;
    assert_eq!(result(&second)["reason"], "already_counted");
    let keys = app.written_keys().await;
    let all_time = keys.iter().find(|k| k.contains(":z:all:")).expect("the all-time board exists");
    let ttl: i64 = redis::cmd("TTL").arg(all_time).query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(ttl, -1, "all-time boards never expire");
}

#[tokio::test]
async fn ttls_are_set_once_and_follow_the_period() {
    let app = spawn_ingest().await;
    app.event(json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"})).await;
    let day_key = app.keys.board("activity").period(&day("2026-11-22"));
    let month_key = app.keys.board("activity").period(&month("2026-11-22"));
    let expire_at = |key: String| {
        let app = &app;
        async move { app.expiry_from(&key, app.now()).await }
    };
    assert_eq!(expire_at(day_key.clone()).await, standings_tests::at("2026-12-23T00:00:00+08:00").timestamp());
    assert_eq!(expire_at(month_key.clone()).await, standings_tests::at("2027-12-01T00:00:00+08:00").timestamp());
    // Shorten the TTL by hand: a later event must not refresh it (the hand-rolled design's bug).
    let () = redis::cmd("EXPIRE").arg(&day_key).arg(1000).query_async(&mut app.redis.clone()).await.unwrap();
    let before = expire_at(day_key.clone()).await;
    app.event(json!({"event_id": "e2", "user_id": "u2", "action": "comment", "target": "a1"})).await;
    assert_eq!(expire_at(day_key).await, before);
}

#[tokio::test]
async fn daily_caps_hold_and_say_what_was_capped() {
    let app = spawn_ingest().await;
    let mut last = Value::Null;
    for i in 0..6 {
        last = app.event(json!({"event_id": format!("l{i}"), "user_id": "u1", "action": "learning"})).await.1;
    }
    assert_eq!(result(&last)["applied"], false);
    assert_eq!(result(&last)["reason"], "daily_cap");
    assert_eq!(result(&last)["capped"], 10);
    assert_eq!(result(&last)["periods"][0]["score"], 50);
    // qa: 5 points, cap 20 → the fifth is capped.
    for i in 0..5 {
        last = app.event(json!({"event_id": format!("q{i}"), "user_id": "u1", "action": "qa"})).await.1;
    }
    assert_eq!(result(&last)["capped"], 5);
    assert_eq!(result(&last)["periods"][0]["score"], 70);
    // A new day has a new cap.
    app.set_now(standings_tests::at("2026-11-23T09:00:00+08:00"));
    let (_, next_day) = app.event(json!({"event_id": "l-next", "user_id": "u1", "action": "learning"})).await;
    assert_eq!(result(&next_day)["delta"], 10);
}

#[tokio::test]
async fn profiles_are_replaced_and_validated() {
    let app = spawn_ingest().await;
    let profile = json!({"nickname": "PlayerOne", "avatar_url": "https://cdn.example.com/a.png"});
    let (status, body) = app.call(axum::http::Method::PUT, "/v1/users/u1/profile", profile.to_string(), WRITER).await;
    assert_eq!((status.as_u16(), &body), (200, &profile));
    let stored = standings::services::profiles::get_profile(&app.store, &app.keys, "u1").await.unwrap().unwrap();
    assert_eq!(stored.nickname.as_deref(), Some("PlayerOne"));
    let replaced = json!({"nickname": "P1"});
    app.call(axum::http::Method::PUT, "/v1/users/u1/profile", replaced.to_string(), WRITER).await;
    let stored = standings::services::profiles::get_profile(&app.store, &app.keys, "u1").await.unwrap().unwrap();
    assert_eq!((stored.nickname.as_deref(), stored.avatar_url), (Some("P1"), None));
    let (status, body) = app.call(axum::http::Method::PUT, "/v1/users/u1/profile", r#"{"avatar_url":"javascript:alert(1)"}"#, WRITER).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (400, Some("malformed")));
    // Checked by parsing, not by prefix: what the document promises (`format: uri`).
    for url in ["https://Ï", "https://", "http:///path", "https://exa mple.com/a.png", "ftp://cdn.example.com/a.png"] {
        let body = json!({"avatar_url": url}).to_string();
        let (status, reply) = app.call(axum::http::Method::PUT, "/v1/users/u1/profile", body, WRITER).await;
        assert_eq!(status, 400, "{url}: {reply}");
    }
    let (status, _) = app.call(axum::http::Method::PUT, "/v1/users/u1/profile", "{}", Caller::Anonymous).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn the_board_guard_refuses_banned_users_and_closed_periods_without_writing() {
    let app = spawn_ingest().await;
    let guard = app.keys.board("activity").guard();
    let () = redis::cmd("HSET")
        .arg(&guard)
        .arg(standings::domain::guard::ban_field("cheater"))
        .arg(1)
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    let (status, body) = app.event(json!({"event_id": "b1", "user_id": "cheater", "action": "comment", "target": "a"})).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (422, Some("user_banned")));

    let () = redis::cmd("HSET").arg(&guard).arg("closed|month:2026-11").arg(1).query_async(&mut app.redis.clone()).await.unwrap();
    let (status, body) = app.event(json!({"event_id": "c1", "user_id": "u1", "action": "comment", "target": "a"})).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (422, Some("period_closed")));
    assert!(body["error"]["message"].as_str().unwrap().contains("2026-11"));
    assert_eq!(app.written_keys().await, vec![guard], "only the guard itself exists");
}
