//! The promises at the edges of the write path, each over HTTP and with two boards fed by one
//! action (boards live in different hash slots, so they are applied separately):
//! (1) a retry is a duplicate whenever it arrives, (2) ties go to who reached the score first
//! by the server's clock, (3) a fan-out answer says what each board did, (4) corrections are
//! idempotent and can aim at a past period, (5) answers report what happened.

use axum::http::Method;
use chrono::{Duration, NaiveDate};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings_tests::{ADMIN, TestApp, at, day, month, spawn_ingest, spawn_ingest_with};

/// `win` feeds both boards: 2 points on `alpha` (day and all-time; reversible) and 3 on `beta`
/// (all-time; not reversible; once an hour per user). `solo` feeds only `alpha`, `lock` only
/// `beta`.
fn two_boards() -> Config {
    Config::parse(
        r#"
[[boards]]
name = "alpha"
kind = "cumulative"
timezone = "UTC"
periods = ["day", "all"]
top = 10
rules = [
  { action = "win", points = 2, scope = "user_target_day", reversible = true },
  { action = "solo", points = 1, scope = "none" },
]

[[boards]]
name = "beta"
kind = "cumulative"
timezone = "UTC"
periods = ["all"]
top = 10
rules = [
  { action = "win", points = 3, scope = "user_target_day", rate_limit = { max = 1, per_secs = 3600 } },
  { action = "lock", points = 5, scope = "user_target_day" },
]
"#,
    )
    .unwrap()
}

fn utc_period(kind: PeriodKind, date: &str) -> Period {
    Period::on_date(kind, NaiveDate::parse_from_str(date, "%Y-%m-%d").unwrap(), chrono_tz::UTC)
}

fn all() -> Period {
    utc_period(PeriodKind::All, "2026-11-22")
}

fn win(id: &str, user: &str, target: &str) -> Value {
    json!({"event_id": id, "user_id": user, "action": "win", "target": target})
}

fn board<'a>(receipt: &'a Value, name: &str) -> &'a Value {
    receipt["results"].as_array().unwrap().iter().find(|r| r["board"] == name).unwrap_or_else(|| panic!("{name} in {receipt}"))
}

async fn two_board_app() -> TestApp {
    let app = spawn_ingest_with(two_boards()).await;
    app.set_now(at("2026-11-22T10:00:00Z"));
    app
}

// 1. A retry is a duplicate, whenever it arrives.

#[tokio::test]
async fn a_retry_past_the_window_is_a_duplicate_with_the_first_results() {
    let app = two_board_app().await;
    let event = json!({"event_id": "e1", "user_id": "u1", "action": "win", "target": "t", "occurred_at": "2026-11-22T10:00:00Z"});
    let (status, first) = app.event(event.clone()).await;
    assert_eq!(status, 200, "{first}");
    for later in [Duration::minutes(16), Duration::hours(23)] {
        app.set_now(at("2026-11-22T10:00:00Z") + later);
        let before = app.keyspace().await;
        let (status, retry) = app.event(event.clone()).await;
        assert_eq!(status, 200, "a byte-identical retry {later} later: {retry}");
        assert_eq!(retry["duplicate"], true);
        assert_eq!(retry["results"], first["results"]);
        assert_eq!(app.keyspace().await, before, "a duplicate writes nothing");
    }
    // An event never seen, with the same old time, is refused and writes nothing.
    let before = app.keyspace().await;
    let (status, body) =
        app.event(json!({"event_id": "e2", "user_id": "u1", "action": "win", "target": "t2", "occurred_at": "2026-11-22T10:00:00Z"})).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (422, Some("too_late")), "{body}");
    assert_eq!(app.keyspace().await, before);
}

#[tokio::test]
async fn a_late_retry_in_a_batch_is_its_own_duplicate_item() {
    let app = two_board_app().await;
    let old = json!({"event_id": "old", "user_id": "u1", "action": "solo", "occurred_at": "2026-11-22T10:00:00Z"});
    app.event(old.clone()).await;
    app.set_now(at("2026-11-22T11:00:00Z"));
    let fresh = json!({"event_id": "fresh", "user_id": "u2", "action": "solo"});
    let late = json!({"event_id": "late", "user_id": "u3", "action": "solo", "occurred_at": "2026-11-22T10:00:00Z"});
    let (status, body) = app.post("/v1/events:batch", &json!({"events": [old, fresh, late]})).await;
    assert_eq!(status, 200, "{body}");
    let items = body["results"].as_array().unwrap();
    assert_eq!(items[0]["duplicate"], true);
    assert_eq!(items[1]["duplicate"], false);
    assert_eq!((items[2]["status"].as_u64(), items[2]["error"]["code"].as_str()), (Some(422), Some("too_late")));
    assert_eq!(app.ranking("alpha", &all()).await, ["u1", "u2"], "u3's late event wrote nothing");
}

#[tokio::test]
async fn heat_with_an_event_id_retried_past_the_window_is_a_duplicate() {
    let app = spawn_ingest().await;
    let heat = json!({"event_id": "h1", "delta": 3, "occurred_at": "2026-11-22T10:00:00+08:00"});
    let (status, first) = app.post("/v1/hot/hot-videos/items/v1", &heat).await;
    assert_eq!(status, 200, "{first}");
    app.set_now(at("2026-11-22T12:00:00+08:00"));
    let before = app.keyspace().await;
    let (status, retry) = app.post("/v1/hot/hot-videos/items/v1", &heat).await;
    assert_eq!((status.as_u16(), &retry["duplicate"]), (200, &json!(true)), "{retry}");
    assert_eq!((&retry["bucket"], &retry["heat"]), (&first["bucket"], &first["heat"]));
    assert_eq!(app.keyspace().await, before);
    let (status, body) =
        app.post("/v1/hot/hot-videos/items/v1", &json!({"event_id": "h2", "occurred_at": "2026-11-22T10:00:00+08:00"})).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (422, Some("too_late")));
    assert_eq!(app.keyspace().await, before);
}

#[tokio::test]
async fn a_sign_in_retried_after_midnight_is_a_duplicate_for_the_day_first_recorded() {
    let app = spawn_ingest().await;
    app.set_now(at("2026-11-22T23:59:00+08:00"));
    let undated = json!({"event_id": "s1", "user_id": "u1"});
    let dated = json!({"event_id": "s2", "user_id": "u2", "date": "2026-11-22"});
    let (_, first_undated) = app.post("/v1/sign-ins", &undated).await;
    let (_, first_dated) = app.post("/v1/sign-ins", &dated).await;
    assert_eq!(first_undated["date"], "2026-11-22");
    // Past midnight and past the grace window: yesterday can no longer be signed, but the
    // retries of what was signed are duplicates, reporting the day they were recorded for.
    app.set_now(at("2026-11-23T01:00:00+08:00"));
    let before = app.keyspace().await;
    for (request, first) in [(&undated, &first_undated), (&dated, &first_dated)] {
        let (status, retry) = app.post("/v1/sign-ins", request).await;
        assert_eq!(status, 200, "{retry}");
        assert_eq!(retry["duplicate"], true);
        assert_eq!(retry["date"], "2026-11-22", "{retry}");
        assert_eq!(retry["points_awarded"], first["points_awarded"]);
    }
    assert_eq!(app.keyspace().await, before);
    let (status, body) = app.post("/v1/sign-ins", &json!({"event_id": "s3", "user_id": "u3", "date": "2026-11-22"})).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (422, Some("too_late")));
    assert_eq!(app.keyspace().await, before);
}

// 2. "First to reach" is the time the store counted it.

#[tokio::test]
async fn a_backdated_event_cannot_rank_above_someone_tied_who_got_there_first() {
    let app = two_board_app().await;
    app.event(json!({"event_id": "a", "user_id": "amy", "action": "solo"})).await;
    app.set_now(at("2026-11-22T10:00:30Z"));
    // zed claims to have acted ten minutes earlier: that picks the period, not the tie-break.
    let (_, zed) = app.event(json!({"event_id": "z", "user_id": "zed", "action": "solo", "occurred_at": "2026-11-22T09:50:00Z"})).await;
    assert_eq!(board(&zed, "alpha")["periods"][1]["rank"], 2, "{zed}");
    assert_eq!(app.ranking("alpha", &all()).await, ["amy", "zed"]);
    assert_eq!(app.standing("alpha", &all(), "zed").await, Some((1, at("2026-11-22T10:00:30Z"))));
}

#[tokio::test]
async fn a_take_back_keeps_reached_at_and_a_correction_up_is_reached_now() {
    let app = two_board_app().await;
    app.event(win("a1", "amy", "x")).await; // amy 2 at 10:00
    app.set_now(at("2026-11-22T10:01:00Z"));
    app.event(win("a2", "amy", "y")).await; // amy 4 at 10:01
    app.set_now(at("2026-11-22T10:02:00Z"));
    app.event(json!({"event_id": "z1", "user_id": "zed", "action": "solo"})).await;
    app.event(json!({"event_id": "z2", "user_id": "zed", "action": "solo"})).await; // zed 2 at 10:02
    app.set_now(at("2026-11-22T10:03:00Z"));
    let (_, taken) = app.event(json!({"event_id": "a3", "user_id": "amy", "action": "win", "target": "y", "active": false})).await;
    assert_eq!(board(&taken, "alpha")["delta"], -2, "{taken}");
    // amy has held at least 2 points since 10:00; her composite keeps 10:01, before zed.
    assert_eq!(app.standing("alpha", &all(), "amy").await, Some((2, at("2026-11-22T10:01:00Z"))));
    assert_eq!(app.ranking("alpha", &all()).await, ["amy", "zed"]);
    // A correction down keeps it too; a correction up is reached now.
    app.set_now(at("2026-11-22T10:04:00Z"));
    let correct = |delta: i64, id: &str| json!({"delta": delta, "reason": "review", "correction_id": id});
    let path = "/v1/admin/boards/alpha/users/zed/corrections";
    assert_eq!(app.call(Method::POST, path, correct(1, "c1").to_string(), ADMIN).await.0, 200);
    assert_eq!(app.standing("alpha", &all(), "zed").await, Some((3, at("2026-11-22T10:04:00Z"))));
    app.set_now(at("2026-11-22T10:05:00Z"));
    assert_eq!(app.call(Method::POST, path, correct(-1, "c2").to_string(), ADMIN).await.0, 200);
    assert_eq!(app.standing("alpha", &all(), "zed").await, Some((2, at("2026-11-22T10:04:00Z"))));
    assert_eq!(app.ranking("alpha", &all()).await, ["amy", "zed"]);
}

// 3. A fan-out answer tells the truth.

#[tokio::test]
async fn one_board_refusing_is_reported_beside_the_board_that_applied() {
    let app = two_board_app().await;
    app.event(win("w1", "u1", "a")).await;
    let beta_before = app.keyspace().await.into_iter().filter(|(k, ..)| k.contains("{beta}")).collect::<Vec<_>>();
    let (status, body) = app.event(win("w2", "u1", "b")).await;
    assert_eq!(status, 200, "alpha applied it, so the answer is not a refusal: {body}");
    assert_eq!(body["duplicate"], false);
    assert_eq!((&board(&body, "alpha")["applied"], &board(&body, "alpha")["delta"]), (&json!(true), &json!(2)));
    let beta = board(&body, "beta");
    assert_eq!((&beta["applied"], &beta["reason"]), (&json!(false), &json!("rate_limited")), "{body}");
    assert!(beta["retry_after"].as_u64().unwrap() > 3000);
    assert_eq!(app.points("alpha", all(), "u1").await, Some(4));
    let beta_after = app.keyspace().await.into_iter().filter(|(k, ..)| k.contains("{beta}")).collect::<Vec<_>>();
    assert_eq!(beta_after, beta_before, "the refusing board wrote nothing");
    // Its retry later applies on beta only: alpha answers from its marker.
    app.set_now(at("2026-11-22T11:00:01Z"));
    let (_, retry) = app.event(win("w2", "u1", "b")).await;
    assert_eq!(retry["duplicate"], false);
    assert_eq!(board(&retry, "alpha"), board(&body, "alpha"));
    assert_eq!(board(&retry, "beta")["applied"], true);
    assert_eq!(app.points("beta", all(), "u1").await, Some(6));
    assert_eq!(app.points("alpha", all(), "u1").await, Some(4));
}

#[tokio::test]
async fn when_every_board_refuses_nothing_is_written_anywhere() {
    let app = two_board_app().await;
    app.event(win("w1", "u1", "a")).await;
    for guard in [app.keys.board("alpha").guard(), app.keys.board("beta").guard()] {
        let () = redis::cmd("HSET")
            .arg(guard)
            .arg(standings::domain::guard::ban_field("u1"))
            .arg(1)
            .query_async(&mut app.redis.clone())
            .await
            .unwrap();
    }
    let before = app.keyspace().await;
    let (status, body) = app.event(win("w2", "u1", "b")).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (422, Some("user_banned")), "{body}");
    // The same id with another payload: a conflict on both boards.
    let (status, body) = app.event(win("w1", "u1", "other")).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (409, Some("idempotency_conflict")), "{body}");
    assert_eq!(app.keyspace().await, before);
}

#[tokio::test]
async fn a_conflict_is_409_only_when_no_board_wrote() {
    let app = two_board_app().await;
    app.event(json!({"event_id": "e1", "user_id": "u1", "action": "solo"})).await;
    let before = app.keyspace().await;
    // Same id, another payload that feeds alpha only: alpha holds the id, so a 409, nothing written.
    let (status, _) = app.event(json!({"event_id": "e1", "user_id": "u2", "action": "solo"})).await;
    assert_eq!(status, 409);
    assert_eq!(app.keyspace().await, before);
    // Same id, a payload feeding alpha and beta: beta has never seen it and applies it, so the
    // answer must say so rather than claim nothing was written.
    let (status, body) = app.event(win("e1", "u1", "t")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(board(&body, "alpha")["reason"], "idempotency_conflict");
    assert_eq!(board(&body, "beta")["applied"], true);
    assert_eq!(app.points("beta", all(), "u1").await, Some(3));
}

#[tokio::test]
async fn a_take_back_feeding_a_non_reversible_board_takes_back_where_it_can() {
    let app = two_board_app().await;
    app.event(win("w1", "u1", "a")).await;
    let beta_before = app.keyspace().await.into_iter().filter(|(k, ..)| k.contains("{beta}")).collect::<Vec<_>>();
    let (status, body) = app.event(json!({"event_id": "w2", "user_id": "u1", "action": "win", "target": "a", "active": false})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(board(&body, "alpha")["delta"], -2);
    assert_eq!((&board(&body, "beta")["applied"], &board(&body, "beta")["reason"]), (&json!(false), &json!("not_reversible")));
    assert_eq!(app.points("alpha", all(), "u1").await, None);
    assert_eq!(app.points("beta", all(), "u1").await, Some(3));
    let beta_after = app.keyspace().await.into_iter().filter(|(k, ..)| k.contains("{beta}")).collect::<Vec<_>>();
    assert_eq!(beta_after, beta_before);
    // An action no board can take back is refused as a whole.
    app.event(json!({"event_id": "l1", "user_id": "u1", "action": "lock", "target": "a"})).await;
    let before = app.keyspace().await;
    let (status, body) = app.event(json!({"event_id": "l2", "user_id": "u1", "action": "lock", "target": "a", "active": false})).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (422, Some("not_reversible")));
    assert_eq!(app.keyspace().await, before);
}

#[test]
fn the_store_full_answer_does_not_claim_nothing_was_written() {
    let message = standings::http::STORE_FULL;
    assert!(!message.contains("nothing was written"), "with one node full, other boards may have applied the write");
    assert!(message.contains("retry"));
}

// 4. Admin corrections are idempotent and aimed.

#[tokio::test]
async fn a_correction_retried_with_its_id_applies_once() {
    let app = two_board_app().await;
    app.event(win("w1", "u1", "a")).await;
    let path = "/v1/admin/boards/alpha/users/u1/corrections";
    let request = json!({"correction_id": "fix-1", "delta": -1, "reason": "double award"});
    let (status, first) = app.call(Method::POST, path, request.to_string(), ADMIN).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!((&first["duplicate"], &first["correction_id"]), (&json!(false), &json!("fix-1")));
    let before = app.keyspace().await;
    app.set_now(at("2026-11-22T10:05:00Z"));
    let (status, again) = app.call(Method::POST, path, request.to_string(), ADMIN).await;
    assert_eq!(status, 200);
    assert_eq!(again["duplicate"], true);
    let strip = |v: &Value| {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove("duplicate");
        v
    };
    assert_eq!(strip(&again), strip(&first), "the first answer, audit time included");
    let other = json!({"correction_id": "fix-1", "delta": -2, "reason": "double award"});
    let (status, body) = app.call(Method::POST, path, other.to_string(), ADMIN).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (409, Some("idempotency_conflict")));
    assert_eq!(app.keyspace().await, before, "neither the retry nor the conflict wrote anything");
    assert_eq!(app.points("alpha", all(), "u1").await, Some(1));
    let (_, audit) = app.call(Method::GET, "/v1/admin/audit?board=alpha", "", ADMIN).await;
    assert_eq!(audit["entries"].as_array().unwrap().len(), 1);
    assert_eq!(audit["entries"][0]["correction_id"], "fix-1");
    // Without an id, one is made up and returned, so the retry can carry it.
    let (_, auto) = app.call(Method::POST, path, json!({"delta": 1, "reason": "r"}).to_string(), ADMIN).await;
    assert!(auto["correction_id"].as_str().unwrap().starts_with("auto-"), "{auto}");
}

#[tokio::test]
async fn a_correction_aimed_at_a_past_day_leaves_today_alone() {
    let app = spawn_ingest().await;
    // 5 points on Nov 20 (Shanghai), 3 today, Nov 22.
    app.set_now(at("2026-11-20T12:00:00+08:00"));
    app.event(json!({"event_id": "p1", "user_id": "u1", "action": "comment", "target": "a"})).await;
    app.event(json!({"event_id": "p2", "user_id": "u1", "action": "praise", "target": "a"})).await;
    app.set_now(at("2026-11-22T10:00:00+08:00"));
    app.event(json!({"event_id": "p3", "user_id": "u1", "action": "comment", "target": "a"})).await;
    let path = "/v1/admin/boards/activity/users/u1/corrections";
    let request = json!({"correction_id": "c1", "delta": -5, "reason": "bot activity", "period": "day", "period_id": "2026-11-20"});
    let (status, body) = app.call(Method::POST, path, request.to_string(), ADMIN).await;
    assert_eq!(status, 200, "{body}");
    let ids: Vec<&str> = body["periods"].as_array().unwrap().iter().map(|p| p["period_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["2026-11-20", "2026-11"]);
    assert_eq!(app.points("activity", day("2026-11-20"), "u1").await, None);
    assert_eq!(app.points("activity", month("2026-11-20"), "u1").await, Some(3));
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(3), "today's board is untouched");
    // `at` names the same day; a period the board does not have, or one not started, is refused.
    let at_day = json!({"correction_id": "c2", "delta": 1, "reason": "r", "at": "2026-11-20"});
    let (_, body) = app.call(Method::POST, path, at_day.to_string(), ADMIN).await;
    assert_eq!(body["periods"][0]["period_id"], "2026-11-20", "{body}");
    let before = app.keyspace().await;
    for bad in [
        json!({"delta": 1, "reason": "r", "period": "season", "period_id": "2026-11"}),
        json!({"delta": 1, "reason": "r", "period": "day", "period_id": "2026-11-23"}),
        json!({"delta": 1, "reason": "r", "period": "day", "period_id": "2026-10-01"}),
        json!({"delta": 1, "reason": "r", "period": "day"}),
        json!({"delta": 1, "reason": "r", "period": "day", "period_id": "+262142-12-31"}),
        json!({"delta": 1, "reason": "r", "at": "+262142-12-31"}),
    ] {
        let (status, body) = app.call(Method::POST, path, bad.to_string(), ADMIN).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    assert_eq!(app.keyspace().await, before);
}

// 5. Answers report what happened.

#[tokio::test]
async fn a_take_back_reports_the_points_it_removed_not_the_points_once_given() {
    let app = two_board_app().await;
    app.event(win("w1", "u1", "a")).await;
    let path = "/v1/admin/boards/alpha/users/u1/corrections";
    app.call(Method::POST, path, json!({"delta": -2, "reason": "r", "correction_id": "c"}).to_string(), ADMIN).await;
    let (status, body) = app.event(json!({"event_id": "w2", "user_id": "u1", "action": "win", "target": "a", "active": false})).await;
    assert_eq!(status, 200, "{body}");
    let alpha = board(&body, "alpha");
    assert_eq!(alpha["delta"], 0, "the score was already 0: {body}");
    for period in alpha["periods"].as_array().unwrap() {
        assert_eq!((&period["score"], &period["delta"]), (&json!(0), &json!(0)), "{body}");
    }
}

#[tokio::test]
async fn sign_ins_and_corrections_never_refresh_a_period_s_expiry() {
    let app = spawn_ingest().await;
    let season = app.keys.board("points").period(&standings_tests::season("2026-11-22"));
    app.post("/v1/sign-ins", &json!({"event_id": "s1", "user_id": "u1"})).await;
    let shorten = || {
        let (mut conn, key) = (app.redis.clone(), season.clone());
        async move {
            let () = redis::cmd("EXPIRE").arg(&key).arg(100_000).query_async(&mut conn).await.unwrap();
            redis::cmd("EXPIRETIME").arg(&key).query_async::<i64>(&mut conn).await.unwrap()
        }
    };
    let expiry = shorten().await;
    app.post("/v1/sign-ins", &json!({"event_id": "s2", "user_id": "u2"})).await;
    let path = "/v1/admin/boards/points/users/u1/corrections";
    let (status, _) = app.call(Method::POST, path, json!({"delta": 3, "reason": "r"}).to_string(), ADMIN).await;
    assert_eq!(status, 200);
    let after: i64 = redis::cmd("EXPIRETIME").arg(&season).query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(after, expiry, "TTLs are set once, never refreshed");
}
