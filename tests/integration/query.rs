//! The read side: top-N with profiles, my rank and around-me, rank modes, percentiles, paging
//! and its edge cases, checked against a sorted-list oracle.

use axum::http::Method;
use serde_json::{Value, json};
use standings::domain::period::{Period, PeriodKind};
use standings::domain::tiebreak;
use standings_tests::{TestApp, WRITER, at, spawn_ingest};

async fn comment(app: &TestApp, event_id: &str, user: &str, target: &str) {
    let (status, body) = app.event(json!({"event_id": event_id, "user_id": user, "action": "comment", "target": target})).await;
    assert_eq!(status, 200, "{body}");
}

/// u1: 9 points, u2: 6, u3: 3, u4: 3 (u3 first).
async fn small_board(app: &TestApp) {
    for (i, (user, comments)) in [("u1", 3), ("u2", 2), ("u3", 1), ("u4", 1)].into_iter().enumerate() {
        for c in 0..comments {
            comment(app, &format!("{i}-{c}"), user, &format!("a{c}")).await;
        }
        app.set_now(app.now() + chrono::Duration::seconds(1));
    }
}

fn users(entries: &Value) -> Vec<&str> {
    entries.as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn top_returns_ranked_entries_with_profiles() {
    let app = spawn_ingest().await;
    small_board(&app).await;
    let profile = json!({"nickname": "One", "avatar_url": "https://x.example/1.png"});
    app.call(Method::PUT, "/v1/users/u1/profile", profile.to_string(), WRITER).await;
    let (status, headers, top) = app.get_with_headers("/v1/boards/activity/top").await;
    assert_eq!(status, 200, "{top}");
    assert_eq!(headers["cache-control"], "public, max-age=5");
    assert_eq!(
        (top["board"].as_str(), top["period"].as_str(), top["period_id"].as_str()),
        (Some("activity"), Some("day"), Some("2026-11-22"))
    );
    assert_eq!(top["total"], 4);
    assert_eq!(users(&top["entries"]), ["u1", "u2", "u3", "u4"]);
    assert_eq!(top["entries"][0], json!({"rank": 1, "user_id": "u1", "score": 9, "profile": profile}));
    assert_eq!(top["entries"][3], json!({"rank": 4, "user_id": "u4", "score": 3, "profile": null}), "no profile still appears");

    let (_, month) = app.get("/v1/boards/activity/top?period=month&at=2026-11-01").await;
    assert_eq!((month["period_id"].as_str(), month["total"].as_u64()), (Some("2026-11"), Some(4)));
    let (_, other_day) = app.get("/v1/boards/activity/top?at=2026-11-21").await;
    assert_eq!(
        (other_day["total"].as_u64(), other_day["entries"].as_array().unwrap().len()),
        (Some(0), 0),
        "an empty board is an empty list"
    );
}

#[tokio::test]
async fn competition_mode_gives_equal_points_equal_rank() {
    let app = spawn_ingest().await;
    small_board(&app).await;
    comment(&app, "extra", "u2", "z").await; // u2: 9 points, like u1
    let (_, unique) = app.get("/v1/boards/activity/top").await;
    let ranks = |v: &Value| v["entries"].as_array().unwrap().iter().map(|e| e["rank"].as_u64().unwrap()).collect::<Vec<_>>();
    assert_eq!(ranks(&unique), [1, 2, 3, 4]);
    let (_, competition) = app.get("/v1/boards/activity/top?rank_mode=competition").await;
    assert_eq!(users(&competition["entries"]), ["u1", "u2", "u3", "u4"]);
    assert_eq!(ranks(&competition), [1, 1, 3, 3]);
    let (_, me) = app.get("/v1/boards/activity/users/u4?rank_mode=competition").await;
    assert_eq!(me["rank"], 3);
}

#[tokio::test]
async fn paging_past_the_end_is_empty_and_bounds_are_enforced() {
    let app = spawn_ingest().await;
    small_board(&app).await;
    let (_, page) = app.get("/v1/boards/activity/top?limit=2&offset=2").await;
    assert_eq!(users(&page["entries"]), ["u3", "u4"]);
    assert_eq!(page["entries"][0]["rank"], 3);
    let (_, past) = app.get("/v1/boards/activity/top?limit=2&offset=4").await;
    assert_eq!((past["total"].as_u64(), past["entries"].as_array().unwrap().len()), (Some(4), 0));
    for (query, status, code) in [
        ("limit=0", 400, "out_of_range"),
        ("limit=1001", 400, "out_of_range"),
        ("limit=-1", 400, "malformed"),
        ("limit=ten", 400, "malformed"),
        ("offset=-5", 400, "malformed"),
        ("offset=1000000001", 400, "out_of_range"),
        ("period=week", 400, "unknown_period"),
        ("period=season", 400, "unknown_period"),
        ("at=22-11-2026", 400, "malformed"),
        ("rank_mode=dense", 400, "malformed"),
        ("colour=red", 400, "malformed"),
    ] {
        let (got, body) = app.get(&format!("/v1/boards/activity/top?{query}")).await;
        assert_eq!((got.as_u16(), body["error"]["code"].as_str()), (status, Some(code)), "{query}: {body}");
    }
    let (got, body) = app.get("/v1/boards/nope/top").await;
    assert_eq!((got.as_u16(), body["error"]["code"].as_str()), (404, Some("unknown_board")));
    let (got, _) = app.get("/v1/boards/hot-videos/top").await;
    assert_eq!(got, 404, "hot boards are read at /v1/hot");
    let (got, body) = app.get("/v1/boards/activity/users/u%7B1%7D").await;
    assert_eq!((got.as_u16(), body["error"]["code"].as_str()), (400, Some("invalid_id")));
    let (got, _) = app.get("/v1/boards/activity/users/u1?around=51").await;
    assert_eq!(got, 400);
}

#[tokio::test]
async fn my_rank_reports_rank_score_percentile_and_a_full_window() {
    let app = spawn_ingest().await;
    small_board(&app).await;
    let (status, headers, me) = app.get_with_headers("/v1/boards/activity/users/u2?around=1").await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(headers["cache-control"], "private, no-cache");
    assert_eq!((me["rank"].as_u64(), me["score"].as_i64(), me["total"].as_u64()), (Some(2), Some(6), Some(4)));
    assert_eq!(me["percentile"], 50.0, "two of four members have fewer points");
    assert_eq!(users(&me["around"]), ["u1", "u2", "u3"]);
    // At the very top and bottom the window shifts instead of shrinking.
    let (_, top) = app.get("/v1/boards/activity/users/u1?around=1").await;
    assert_eq!(users(&top["around"]), ["u1", "u2", "u3"]);
    let (_, bottom) = app.get("/v1/boards/activity/users/u4?around=1").await;
    assert_eq!(users(&bottom["around"]), ["u2", "u3", "u4"]);
    assert_eq!(bottom["percentile"], 0.0, "u3 has as many points, nobody has fewer");
    // A window wider than the board is the whole board.
    let (_, wide) = app.get("/v1/boards/activity/users/u3?around=50").await;
    assert_eq!(users(&wide["around"]), ["u1", "u2", "u3", "u4"]);
    // Unranked: rank null, not an error.
    let (status, nobody) = app.get("/v1/boards/activity/users/nobody").await;
    assert_eq!(status, 200);
    assert_eq!(nobody["rank"], Value::Null);
    assert_eq!((nobody["score"].as_i64(), nobody["around"].as_array().unwrap().len()), (Some(0), 0));
}

#[tokio::test]
async fn invites_report_the_invite_count() {
    let app = spawn_ingest().await;
    for (i, invitee) in ["b", "c", "d"].iter().enumerate() {
        app.event(json!({"event_id": format!("i{i}"), "user_id": "alice", "action": "invite", "target": invitee})).await;
    }
    let (_, top) = app.get("/v1/boards/invites/top").await;
    assert_eq!(top["period"], "all");
    assert_eq!(top["entries"][0]["score"], 300);
    assert_eq!(top["entries"][0]["invite_count"], 3);
}

#[tokio::test]
async fn a_read_right_after_a_write_sees_it() {
    let app = spawn_ingest().await;
    for i in 0..20 {
        comment(&app, &format!("e{i}"), "u1", &format!("t{i}")).await;
        let (_, me) = app.get("/v1/boards/activity/users/u1").await;
        assert_eq!(me["score"], 3 * (i + 1));
    }
}

#[tokio::test]
async fn top_30_with_profiles_is_two_round_trips() {
    let app = spawn_ingest().await;
    for u in 0..40 {
        comment(&app, &format!("e{u}"), &format!("u{u}"), "a").await;
        let profile = json!({"nickname": format!("user {u}")});
        app.call(Method::PUT, &format!("/v1/users/u{u}/profile"), profile.to_string(), WRITER).await;
    }
    // The first call in a fresh Redis also loads the script (NOSCRIPT, LOAD, retry).
    app.get("/v1/boards/activity/top?limit=30").await;
    let before = app.store.round_trips();
    let (_, top) = app.get("/v1/boards/activity/top?limit=30").await;
    let profiles = app.profile_requests(users(&top["entries"])).await;
    assert_eq!(
        app.store.round_trips() - before,
        1 + profiles,
        "one script call for the page, one pipeline for profiles (per node on a cluster)"
    );
    assert_eq!(top["entries"].as_array().unwrap().len(), 30);
    assert!(top["entries"].as_array().unwrap().iter().all(|e| e["profile"]["nickname"].is_string()));
    let before = app.store.round_trips();
    let (_, me) = app.get("/v1/boards/activity/users/u7?around=5").await;
    let profiles = app.profile_requests(users(&me["around"])).await;
    assert_eq!(app.store.round_trips() - before, 1 + profiles);
}

/// Every member of a 10,000-member board with many ties, against a sorted list.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_members_agree_with_a_sorted_oracle() {
    let app = std::sync::Arc::new(spawn_ingest().await);
    let now = at("2026-11-22T10:00:00+08:00");
    let day = Period::containing(PeriodKind::Day, now, chrono_tz::Asia::Shanghai);
    let key = app.keys.board("activity").period(&day);
    // Points repeat every 300 members; reach times repeat every 7: exact composite ties too.
    let members: Vec<(String, i64, f64)> = (0..10_000)
        .map(|i| {
            let points = (i * 7919 % 300) as i64 + 1;
            let reached = now - chrono::Duration::seconds((i % 7) as i64);
            (format!("m{i:05}"), points, tiebreak::encode(points, reached).unwrap())
        })
        .collect();
    let mut pipe = redis::pipe();
    for (member, _, composite) in &members {
        pipe.zadd(&key, member, *composite).ignore();
    }
    let () = pipe.query_async(&mut app.redis.clone()).await.unwrap();

    let mut oracle = members.clone();
    // Highest composite first; equal composites in reverse byte order of the member (Redis).
    oracle.sort_by(|a, b| b.2.partial_cmp(&a.2).unwrap().then(b.0.cmp(&a.0)));
    let above = |points: i64| oracle.iter().filter(|m| m.1 > points).count() as u64;

    let mut paged = Vec::new();
    for offset in (0..10_000).step_by(1000) {
        let (_, page) = app.get(&format!("/v1/boards/activity/top?limit=1000&offset={offset}&rank_mode=competition")).await;
        paged.extend(page["entries"].as_array().unwrap().iter().cloned());
    }
    assert_eq!(paged.len(), 10_000);
    for (entry, (member, points, _)) in paged.iter().zip(&oracle) {
        assert_eq!((entry["user_id"].as_str().unwrap(), entry["score"].as_i64().unwrap()), (member.as_str(), *points));
        assert_eq!(entry["rank"].as_u64().unwrap(), above(*points) + 1);
    }

    let tasks: Vec<_> = (0..4)
        .map(|part| {
            let (app, oracle) = (app.clone(), oracle.clone());
            tokio::spawn(async move {
                for (index, (member, points, _)) in oracle.iter().enumerate().skip(part).step_by(4) {
                    let (_, me) = app.get(&format!("/v1/boards/activity/users/{member}?around=5")).await;
                    assert_eq!(me["rank"].as_u64().unwrap(), index as u64 + 1, "{member}");
                    assert_eq!(me["score"].as_i64().unwrap(), *points);
                    let start = index.saturating_sub(5).min(10_000 - 11);
                    let want: Vec<&str> = oracle[start..start + 11].iter().map(|m| m.0.as_str()).collect();
                    assert_eq!(users(&me["around"]), want, "window of {member}");
                    // Of 10,000 members, each one strictly below is 0.01 %.
                    let strictly_below = oracle.iter().filter(|m| m.1 < *points).count();
                    assert_eq!(me["percentile"].as_f64().unwrap(), strictly_below as f64 / 100.0);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}
