//! Moderation reaches tournaments consistently (issue 59 item 8, docs/tournaments.md): a
//! correction respects the instance's window, a ban frees the player's seat with their score.

use axum::http::{Method, StatusCode};
use chrono::Duration;
use serde_json::{Value, json};
use standings_tests::ADMIN;
use standings_tests::tournament::{Arena, cup};

fn code(body: &Value) -> Option<&str> {
    body["error"]["code"].as_str()
}

fn users(top: &Value) -> Vec<(String, i64)> {
    top["entries"].as_array().unwrap().iter().map(|e| (e["user_id"].as_str().unwrap().to_owned(), e["score"].as_i64().unwrap())).collect()
}

async fn correct(arena: &Arena, user: &str, body: Value) -> (StatusCode, Value) {
    arena.app.call(Method::POST, &format!("/v1/admin/boards/cup/users/{user}/corrections"), body.to_string(), ADMIN).await
}

/// A correction lands in the open instance; after the end, named or not, it is 422
/// `period_closed` and writes nothing, so the results stay what the scores made them.
#[tokio::test]
async fn a_correction_reaches_the_open_instance_and_is_refused_after_its_end() {
    let arena = Arena::new().await;
    let start = arena.app.now() - Duration::hours(1);
    assert_eq!(arena.put("cup", &cup(start, 2, json!({}))).await.0, StatusCode::CREATED);
    assert_eq!(arena.play("cup", "a1", "ann", 10).await.0, StatusCode::OK);
    assert_eq!(arena.play("cup", "b1", "bo", 7).await.0, StatusCode::OK);
    let (status, body) = correct(&arena, "bo", json!({"set": 12, "reason": "scored offline"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, top) = arena.read("/v1/tournaments/cup/top").await;
    assert_eq!(users(&top), [("bo".to_owned(), 12), ("ann".to_owned(), 10)]);

    arena.app.set_now(start + Duration::hours(2) + Duration::minutes(1));
    let before = arena.app.keyspace().await;
    for body in [
        json!({"set": 20, "reason": "late"}),
        json!({"set": 20, "reason": "late", "period": "all", "period_id": "all"}),
        json!({"remove": true, "reason": "late"}),
    ] {
        let (status, answer) = correct(&arena, "ann", body.clone()).await;
        assert_eq!((status, code(&answer)), (StatusCode::UNPROCESSABLE_ENTITY, Some("period_closed")), "{body}: {answer}");
    }
    assert_eq!(arena.app.keyspace().await, before, "a refused correction writes nothing");
    let (_, top) = arena.read("/v1/tournaments/cup/top").await;
    assert_eq!(users(&top), [("bo".to_owned(), 12), ("ann".to_owned(), 10)]);
}

/// Before the tournament opens, a correction is refused too (its instance has not started) and
/// writes nothing; once it opens, the same correction lands.
#[tokio::test]
async fn a_correction_before_the_tournament_opens_is_refused_and_writes_nothing() {
    let arena = Arena::new().await;
    let start = arena.app.now() + Duration::hours(1);
    assert_eq!(arena.put("cup", &cup(start, 2, json!({}))).await.0, StatusCode::CREATED);
    let before = arena.app.keyspace().await;
    for body in [json!({"set": 20, "reason": "early"}), json!({"set": 20, "reason": "early", "period": "all", "period_id": "all"})] {
        let (status, answer) = correct(&arena, "ann", body.clone()).await;
        assert_eq!((status, code(&answer)), (StatusCode::UNPROCESSABLE_ENTITY, Some("period_closed")), "{body}: {answer}");
    }
    assert_eq!(arena.app.keyspace().await, before, "a refused correction writes nothing");
    arena.app.set_now(start + Duration::minutes(1));
    let (status, body) = correct(&arena, "ann", json!({"set": 20, "reason": "opened"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, top) = arena.read("/v1/tournaments/cup/top").await;
    assert_eq!(users(&top), [("ann".to_owned(), 20)]);
}

/// A ban takes the player off the open instance and frees their seat: a full tournament takes
/// the next player, and the banned one cannot join again.
#[tokio::test]
async fn a_ban_frees_the_seat_and_the_score_in_the_open_instance() {
    let arena = Arena::new().await;
    let start = arena.app.now() - Duration::hours(1);
    assert_eq!(arena.put("cup", &cup(start, 2, json!({"max_size": 2, "join_required": true}))).await.0, StatusCode::CREATED);
    for user in ["ann", "bo"] {
        assert_eq!(arena.join("cup", user).await.0, StatusCode::OK);
    }
    assert_eq!(arena.play("cup", "a1", "ann", 10).await.0, StatusCode::OK);
    let (status, full) = arena.join("cup", "cy").await;
    assert_eq!((status, code(&full)), (StatusCode::CONFLICT, Some("tournament_full")), "{full}");

    let (status, ban) = arena.app.call(Method::POST, "/v1/admin/users/ann/ban", "", ADMIN).await;
    assert_eq!(status, StatusCode::OK, "{ban}");
    let (_, view) = arena.read("/v1/tournaments/cup").await;
    assert_eq!((view["size"].as_u64(), view["can_join"].as_bool()), (Some(1), Some(true)), "{view}");
    let (_, top) = arena.read("/v1/tournaments/cup/top").await;
    assert_eq!(users(&top), []);
    let (status, joined) = arena.join("cup", "cy").await;
    assert_eq!((status, joined["size"].as_u64()), (StatusCode::OK, Some(2)), "{joined}");
    let (status, again) = arena.join("cup", "ann").await;
    assert_eq!((status, code(&again)), (StatusCode::UNPROCESSABLE_ENTITY, Some("user_banned")), "{again}");
    // The same ban again (a retry) frees nothing more and takes no seat back.
    assert_eq!(arena.app.call(Method::POST, "/v1/admin/users/ann/ban", "", ADMIN).await.0, StatusCode::OK);
    let (_, view) = arena.read("/v1/tournaments/cup").await;
    assert_eq!(view["size"].as_u64(), Some(2), "{view}");
}

/// A ban meeting a seats key of another type writes nothing on that board (the script checks
/// every key before its first write), and is whole once the key is mended.
#[tokio::test]
async fn a_ban_meeting_a_wrong_type_seats_key_writes_nothing_on_the_board() {
    let arena = Arena::new().await;
    let start = arena.app.now() - Duration::hours(1);
    assert_eq!(arena.put("cup", &cup(start, 2, json!({"join_required": true}))).await.0, StatusCode::CREATED);
    assert_eq!(arena.join("cup", "ann").await.0, StatusCode::OK);
    assert_eq!(arena.play("cup", "a1", "ann", 10).await.0, StatusCode::OK);
    let all = standings::domain::period::Period::named(standings::domain::period::PeriodKind::All, "all", chrono_tz::UTC).unwrap();
    let players = arena.app.keys.board("cup").players(&all);
    let mut conn = arena.app.redis.clone();
    let seats: Vec<String> = redis::cmd("SMEMBERS").arg(&players).query_async(&mut conn).await.unwrap();
    assert_eq!(seats, ["ann"]);
    let _: () = redis::cmd("DEL").arg(&players).query_async(&mut conn).await.unwrap();
    let _: () = redis::cmd("SET").arg(&players).arg("x").query_async(&mut conn).await.unwrap();
    let (status, _) = arena.app.call(Method::POST, "/v1/admin/users/ann/ban", "", ADMIN).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    let (_, top) = arena.read("/v1/tournaments/cup/top").await;
    assert_eq!(users(&top), [("ann".to_owned(), 10)], "nothing written on the board");
    let _: () = redis::cmd("DEL").arg(&players).query_async(&mut conn).await.unwrap();
    let _: () = redis::cmd("SADD").arg(&players).arg("ann").query_async(&mut conn).await.unwrap();
    assert_eq!(arena.app.call(Method::POST, "/v1/admin/users/ann/ban", "", ADMIN).await.0, StatusCode::OK);
    let (_, top) = arena.read("/v1/tournaments/cup/top").await;
    let (_, view) = arena.read("/v1/tournaments/cup").await;
    assert_eq!((users(&top), view["size"].as_u64()), (vec![], Some(0)));
}

/// An arena with a daily tournament of five days opened at the midnight before now, joins
/// required; now, and the midnight after it.
async fn daily_cup() -> (Arena, chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) {
    let arena = Arena::new().await;
    let now = arena.app.now();
    let midnight = (now + Duration::days(1)).date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    let daily = cup(midnight - Duration::days(1), 24 * 5, json!({"reset": "day", "duration_secs": 86_400, "join_required": true}));
    assert_eq!(arena.put("cup", &daily).await.0, StatusCode::CREATED);
    (arena, now, midnight)
}

/// A ban minutes after an instance ended, before its results are stored, takes the player out
/// of it, score and seat: a cheater caught at the end is not in the results.
#[tokio::test]
async fn a_ban_before_the_results_are_stored_takes_the_player_out_of_them() {
    let (arena, now, midnight) = daily_cup().await;
    for user in ["ann", "bo"] {
        assert_eq!(arena.join("cup", user).await.0, StatusCode::OK);
    }
    assert_eq!(arena.play("cup", "a1", "ann", 10).await.0, StatusCode::OK);
    assert_eq!(arena.play("cup", "b1", "bo", 8).await.0, StatusCode::OK);
    arena.app.set_now(midnight + Duration::minutes(5));
    assert_eq!(arena.app.call(Method::POST, "/v1/admin/users/ann/ban", "", ADMIN).await.0, StatusCode::OK);
    let ended = now.format("%Y-%m-%d").to_string();
    let (_, top) = arena.read(&format!("/v1/tournaments/cup/top?instance={ended}")).await;
    assert_eq!(users(&top), [("bo".to_owned(), 8)], "{top}");
    let period = standings::domain::period::Period::named(standings::domain::period::PeriodKind::Day, &ended, chrono_tz::UTC).unwrap();
    let mut conn = arena.app.redis.clone();
    let seats: Vec<String> = redis::cmd("SMEMBERS").arg(arena.app.keys.board("cup").players(&period)).query_async(&mut conn).await.unwrap();
    assert_eq!(seats, ["bo"], "ann's seat in the ended instance is freed too");
    let reports = arena.end_run(None).await;
    assert!(reports.iter().any(|r| r.instance == ended && r.total == 1 && r.error.is_none()), "{reports:?}");
    let (_, results) = arena.read(&format!("/v1/tournaments/cup/results?instance={ended}")).await;
    let ranked: Vec<&str> = results["results"].as_array().unwrap().iter().map(|r| r["user_id"].as_str().unwrap()).collect();
    assert_eq!(ranked, ["bo"], "{results}");
}

/// A ban mid-tournament reaches an instance that ended a day before and whose results the
/// archive has not stored yet (it lags), as it reaches the open one: every instance not frozen
/// loses the player, score and seat; a frozen one keeps its results as stored.
#[tokio::test]
async fn a_ban_reaches_every_ended_instance_whose_results_are_not_stored() {
    let (arena, _, midnight) = daily_cup().await;
    let mut instances = Vec::new();
    // Four days played (on the third ann only takes a seat); the archive runs after the first
    // only.
    for day in 0..4 {
        arena.app.set_now(midnight - Duration::days(1) + Duration::days(day) + Duration::hours(12));
        for user in ["ann", "bo"] {
            assert_eq!(arena.join("cup", user).await.0, StatusCode::OK);
        }
        if day != 2 {
            assert_eq!(arena.play("cup", &format!("a{day}"), "ann", 10).await.0, StatusCode::OK);
        }
        assert_eq!(arena.play("cup", &format!("b{day}"), "bo", 8).await.0, StatusCode::OK);
        instances.push(arena.app.now().format("%Y-%m-%d").to_string());
        if day == 0 {
            arena.app.set_now(midnight + Duration::hours(1));
            let reports = arena.end_run(None).await;
            assert!(reports.iter().any(|r| r.instance == instances[0] && r.error.is_none()), "{reports:?}");
        }
    }
    // The fourth day's noon: the second and third days ended, not stored.
    assert_eq!(arena.app.call(Method::POST, "/v1/admin/users/ann/ban", "", ADMIN).await.0, StatusCode::OK);
    let mut conn = arena.app.redis.clone();
    for (i, instance) in instances.iter().enumerate() {
        let (_, top) = arena.read(&format!("/v1/tournaments/cup/top?instance={instance}")).await;
        let period =
            standings::domain::period::Period::named(standings::domain::period::PeriodKind::Day, instance, chrono_tz::UTC).unwrap();
        let seats: Vec<String> =
            redis::cmd("SMEMBERS").arg(arena.app.keys.board("cup").players(&period)).query_async(&mut conn).await.unwrap();
        if i == 0 {
            let (_, results) = arena.read(&format!("/v1/tournaments/cup/results?instance={instance}")).await;
            let ranked: Vec<&str> = results["results"].as_array().unwrap().iter().map(|r| r["user_id"].as_str().unwrap()).collect();
            assert_eq!(ranked, ["ann", "bo"], "the stored results stay: {results}");
        } else {
            assert_eq!(users(&top), [("bo".to_owned(), 8)], "{instance}: {top}");
            assert_eq!(seats, ["bo"], "{instance}: ann's seat is freed");
        }
    }
}
