//! Periods by event time, the event window, the exact tie-break and the script cache.

use serde_json::json;
use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings::domain::tiebreak::{self, MAX_POINTS};
use standings_tests::{arena, at, day, spawn_ingest, spawn_ingest_at, spawn_ingest_with};

#[tokio::test]
async fn events_either_side_of_shanghai_midnight_land_on_different_days() {
    let app = spawn_ingest().await;
    app.set_now(at("2026-11-23T00:00:05+08:00"));
    let (_, late) = app
        .event(json!({"event_id": "a", "user_id": "u1", "action": "comment", "target": "x", "occurred_at": "2026-11-22T23:59:59+08:00"}))
        .await;
    let (_, early) = app
        .event(json!({"event_id": "b", "user_id": "u1", "action": "comment", "target": "y", "occurred_at": "2026-11-22T16:00:01Z"}))
        .await;
    assert_eq!(late["results"][0]["periods"][0]["period_id"], "2026-11-22");
    assert_eq!(early["results"][0]["periods"][0]["period_id"], "2026-11-23");
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(3));
    assert_eq!(app.points("activity", day("2026-11-23"), "u1").await, Some(3));
    assert_eq!(early["results"][0]["periods"][1]["score"], 6, "same month");
}

#[tokio::test]
async fn late_and_future_events_are_refused_with_their_own_codes() {
    let app = spawn_ingest().await;
    app.set_now(at("2026-11-22T10:00:00Z"));
    let event = |id: &str, when: &str| json!({"event_id": id, "user_id": "u1", "action": "comment", "target": "x", "occurred_at": when});
    let (status, body) = app.event(event("late", "2026-11-22T09:44:59Z")).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (422, Some("too_late")));
    let (status, body) = app.event(event("future", "2026-11-22T10:01:01Z")).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (422, Some("in_future")));
    let (status, _) = app.event(event("edge", "2026-11-22T09:45:00Z")).await;
    assert_eq!(status, 200);
    assert_eq!(app.written_keys().await.iter().filter(|k| k.contains(":evt:")).count(), 1);
}

/// A board that can reach the top of the composite's range quickly.
fn big_board() -> Config {
    arena(r#"[{ action = "win", points = 1, max_points = 100000, scope = "none" }]"#)
}

#[tokio::test]
async fn the_earlier_of_two_equal_scores_ranks_higher_even_at_the_top_of_the_range() {
    let app = spawn_ingest_with(big_board()).await;
    // The last representable second, and the one before.
    let last = standings::domain::tiebreak::LAST_SECS;
    let t = |secs: i64| chrono::DateTime::from_timestamp(secs, 0).unwrap();
    let win = |id: &str, user: &str, points: i64| json!({"event_id": id, "user_id": user, "action": "win", "points": points});
    // Equal composites would put "bob" above "alice" (Redis breaks score ties by reverse
    // byte order), so only the time part can rank alice, who got there first, above him.
    app.set_now(t(last - 1));
    // 41 × 100,000 + 94,303 = 4,194,303 = the maximum.
    for i in 0..41 {
        assert_eq!(app.event(win(&format!("a{i}"), "alice", 100_000)).await.0, 200);
    }
    app.event(win("a-last", "alice", 94_303)).await;
    app.set_now(t(last));
    for i in 0..41 {
        app.event(win(&format!("b{i}"), "bob", 100_000)).await;
    }
    let (_, bob) = app.event(win("b-last", "bob", 94_303)).await;
    assert_eq!(bob["results"][0]["periods"][0]["score"], MAX_POINTS);
    assert_eq!(bob["results"][0]["periods"][0]["rank"], 2, "alice reached it a second earlier");

    // One point more is refused, and changes nothing.
    let keys_before = app.keyspace().await;
    let (status, body) = app.event(win("over", "bob", 1)).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (422, Some("out_of_range")));
    assert_eq!(app.keyspace().await, keys_before);
    let key = app.keys.board("arena").period(&Period::containing(PeriodKind::All, t(last), chrono_tz::UTC));
    let top: Vec<(String, f64)> =
        redis::cmd("ZREVRANGE").arg(&key).arg(0).arg(-1).arg("WITHSCORES").query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(top.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(), ["alice", "bob"]);
    assert_eq!(tiebreak::decode(top[0].1).unwrap(), (MAX_POINTS, t(last - 1)));
    assert_eq!(tiebreak::decode(top[1].1).unwrap(), (MAX_POINTS, t(last)));
}

#[tokio::test]
async fn two_users_a_second_apart_rank_by_who_got_there_first() {
    let app = spawn_ingest().await;
    app.set_now(at("2026-11-22T10:00:00+08:00"));
    app.event(json!({"event_id": "1", "user_id": "amy", "action": "comment", "target": "x"})).await;
    app.set_now(at("2026-11-22T10:00:01+08:00"));
    // Without the time part, Redis would rank "zed" above "amy" (reverse byte order); zed's
    // claim to have commented five minutes earlier picks the day, not the tie-break.
    let (_, zed) = app
        .event(json!({"event_id": "2", "user_id": "zed", "action": "comment", "target": "x", "occurred_at": "2026-11-22T09:55:01+08:00"}))
        .await;
    assert_eq!(zed["results"][0]["periods"][0]["rank"], 2, "amy reached 3 points first");
}

#[tokio::test]
async fn events_still_apply_after_script_flush() {
    // A server of its own: flushing the suite's would race tests that count cached scripts.
    let server = standings_tests::servers::RedisServer::start(&[]).await;
    let app = spawn_ingest_at(Config::default_boards(), &standings::redis::settings::RedisSettings::standalone(&server.url())).await;
    app.event(json!({"event_id": "1", "user_id": "u1", "action": "comment", "target": "x"})).await;
    let () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut app.redis.clone()).await.unwrap();
    let (status, body) = app.event(json!({"event_id": "2", "user_id": "u1", "action": "comment", "target": "y"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(6));
}
