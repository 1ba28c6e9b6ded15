//! Sign-ins: the day bitmap, streaks across months, bonuses on exactly 7/14/28
//! days, one award per day, the date window, and the calendar read by `query`.

use std::sync::Arc;

use chrono::{Datelike, Days, NaiveDate};
use serde_json::{Value, json};
use standings_tests::{TestApp, at, season, spawn_ingest};

fn date(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

/// Sets the clock to `time` (Shanghai) on `day` and signs `user` in with event id `id`.
async fn sign_in_at(app: &TestApp, day: NaiveDate, time: &str, id: &str, body: Value) -> (u16, Value) {
    app.set_now(at(&format!("{day}T{time}+08:00")));
    let mut body = body;
    body["event_id"] = json!(id);
    let (status, reply) = app.post("/v1/sign-ins", &body).await;
    (status.as_u16(), reply)
}

/// Signs `user` in on `day`, at 09:00 that day.
async fn sign_in_on(app: &TestApp, user: &str, day: NaiveDate) -> Value {
    let (status, reply) = sign_in_at(app, day, "09:00:00", &format!("{user}-{day}"), json!({"user_id": user})).await;
    assert_eq!(status, 200, "{day}: {reply}");
    reply
}

fn bonus(streak: u64) -> i64 {
    match streak {
        7 => 10,
        14 => 20,
        28 => 40,
        _ => 0,
    }
}

#[tokio::test]
async fn seventy_days_in_a_row_give_bonuses_on_exactly_days_7_14_and_28_across_three_months() {
    let app = spawn_ingest().await;
    let first = date("2026-11-01");
    let mut season_points = std::collections::BTreeMap::<String, i64>::new();
    for n in 1..=70u64 {
        let day = first + Days::new(n - 1);
        let reply = sign_in_on(&app, "u1", day).await;
        assert_eq!(reply["already_signed"], false);
        assert_eq!(reply["streak"], n, "{day}: the streak runs on across month ends");
        assert_eq!(reply["days_this_month"], day.day(), "{day}");
        assert_eq!(reply["points_awarded"], 1 + bonus(n), "{day}: streak {n}");
        assert_eq!(reply["date"], day.to_string());
        *season_points.entry(day.format("%Y-%m").to_string()).or_default() += 1 + bonus(n);
    }
    assert_eq!(season_points.values().sum::<i64>(), 70 + 10 + 20 + 40);
    for (month, points) in &season_points {
        assert_eq!(app.points("points", season(&format!("{month}-01")), "u1").await, Some(*points), "season {month}");
    }
    let (status, january) = app.get("/v1/users/u1/sign-ins?month=2027-01").await;
    assert_eq!(status, 200, "{january}");
    assert_eq!(january, json!({"user_id": "u1", "month": "2027-01", "days": (1..=9).collect::<Vec<_>>(), "streak": 70}));
}

#[tokio::test]
async fn a_streak_crosses_the_month_end_and_a_missed_day_resets_it() {
    let app = spawn_ingest().await;
    for day in 27..=30 {
        sign_in_on(&app, "u1", date(&format!("2026-11-{day}"))).await;
    }
    for day in 1..=2 {
        sign_in_on(&app, "u1", date(&format!("2026-12-0{day}"))).await;
    }
    let seventh = sign_in_on(&app, "u1", date("2026-12-03")).await;
    assert_eq!((&seventh["streak"], &seventh["days_this_month"], &seventh["points_awarded"]), (&json!(7), &json!(3), &json!(11)));
    // December 4 is missed.
    let after_gap = sign_in_on(&app, "u1", date("2026-12-05")).await;
    assert_eq!((&after_gap["streak"], &after_gap["days_this_month"], &after_gap["points_awarded"]), (&json!(1), &json!(4), &json!(1)));
    assert_eq!(app.points("points", season("2026-11-01"), "u1").await, Some(4));
    assert_eq!(app.points("points", season("2026-12-01"), "u1").await, Some(3 + 10 + 1));

    let (_, december) = app.get("/v1/users/u1/sign-ins?month=2026-12").await;
    assert_eq!((&december["days"], &december["streak"]), (&json!([1, 2, 3, 5]), &json!(1)));
    let (_, november) = app.get("/v1/users/u1/sign-ins?month=2026-11").await;
    assert_eq!((&november["days"], &november["streak"]), (&json!([27, 28, 29, 30]), &json!(4)), "as of the month's last day");
    // The next morning, before signing in, yesterday's streak is still alive; a day later it is gone.
    app.set_now(at("2026-12-06T08:00:00+08:00"));
    assert_eq!(app.get("/v1/users/u1/sign-ins").await.1["streak"], 1, "the current month by default");
    app.set_now(at("2026-12-07T08:00:00+08:00"));
    assert_eq!(app.get("/v1/users/u1/sign-ins?month=2026-12").await.1["streak"], 0);
    assert_eq!(
        app.get("/v1/users/nobody/sign-ins?month=2026-12").await.1,
        json!({"user_id": "nobody", "month": "2026-12", "days": [], "streak": 0})
    );
}

#[tokio::test]
async fn signing_twice_a_day_is_already_signed_and_awards_nothing() {
    let app = spawn_ingest().await;
    let today = date("2026-11-22");
    let (_, first) = sign_in_at(&app, today, "09:00:00", "s1", json!({"user_id": "u1"})).await;
    assert_eq!(first["already_signed"], false);
    let (status, second) = sign_in_at(&app, today, "21:00:00", "s2", json!({"user_id": "u1"})).await;
    assert_eq!(status, 200);
    assert_eq!(
        (&second["already_signed"], &second["streak"], &second["days_this_month"], &second["points_awarded"], &second["duplicate"]),
        (&json!(true), &json!(1), &json!(1), &json!(0), &json!(false))
    );
    assert_eq!(app.points("points", season("2026-11-22"), "u1").await, Some(1));

    // Exactly once per event id: a retry gets the first answer; another payload is a conflict.
    let (status, retry) = sign_in_at(&app, today, "21:01:00", "s1", json!({"user_id": "u1"})).await;
    assert_eq!((status, &retry["duplicate"]), (200, &json!(true)));
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().remove("duplicate");
        v
    };
    assert_eq!(strip(retry), strip(first));
    let keys_before = app.keyspace().await;
    let (status, conflict) = sign_in_at(&app, today, "21:02:00", "s1", json!({"user_id": "u2"})).await;
    assert_eq!((status, conflict["error"]["code"].as_str()), (409, Some("idempotency_conflict")));
    assert_eq!(app.keyspace().await, keys_before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_sign_ins_on_one_day_award_exactly_once() {
    let app = Arc::new(spawn_ingest().await);
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move { app.post("/v1/sign-ins", &json!({"event_id": format!("c{i}"), "user_id": "u1"})).await })
        })
        .collect();
    let mut awarded = Vec::new();
    for task in tasks {
        let (status, reply) = task.await.unwrap();
        assert_eq!(status, 200, "{reply}");
        awarded.push(reply["points_awarded"].as_i64().unwrap());
    }
    assert_eq!(awarded.iter().filter(|&&p| p > 0).count(), 1, "{awarded:?}");
    assert_eq!(awarded.iter().sum::<i64>(), 1);
    assert_eq!(app.points("points", season("2026-11-22"), "u1").await, Some(1));
}

#[tokio::test]
async fn only_today_and_yesterday_within_fifteen_minutes_of_midnight_can_be_signed() {
    let app = spawn_ingest().await;
    let december = date("2026-12-01");
    let (status, late) = sign_in_at(&app, december, "00:10:00", "y1", json!({"user_id": "u1", "date": "2026-11-30"})).await;
    assert_eq!(status, 200, "{late}");
    assert_eq!(late["date"], "2026-11-30");
    assert_eq!(app.points("points", season("2026-11-30"), "u1").await, Some(1), "the points land in the date's season");

    let keys_before = app.keyspace().await;
    for (time, body, code) in [
        ("00:10:00", json!({"user_id": "u2", "date": "2026-11-29"}), "too_late"),
        ("00:15:00", json!({"user_id": "u2", "date": "2026-11-30"}), "too_late"),
        ("23:59:59", json!({"user_id": "u2", "date": "2026-12-02"}), "in_future"),
    ] {
        let (status, reply) = sign_in_at(&app, december, time, "refused", body.clone()).await;
        assert_eq!((status, reply["error"]["code"].as_str()), (422, Some(code)), "{time} {body}");
    }
    for (body, code) in [
        (json!({"user_id": "u2", "date": "2026-12-32"}), "malformed"),
        (json!({"user_id": "u2", "date": "2026-12-01T00:00:00Z"}), "malformed"),
        (json!({"user_id": "u2", "day": "2026-12-01"}), "malformed"),
        (json!({"user_id": "u{2}"}), "invalid_id"),
    ] {
        let (status, reply) = sign_in_at(&app, december, "09:00:00", "bad", body.clone()).await;
        assert_eq!((status, reply["error"]["code"].as_str()), (400, Some(code)), "{body}");
    }
    assert_eq!(app.keyspace().await, keys_before, "refused sign-ins write nothing");
}

#[tokio::test]
async fn a_late_sign_in_for_yesterday_completes_today_s_streak_and_its_bonus() {
    let app = spawn_ingest().await;
    for day in 25..=29 {
        sign_in_on(&app, "u1", date(&format!("2026-11-{day}"))).await;
    }
    // 00:05 on December 1st: today's sign-in arrives before yesterday's.
    let december = date("2026-12-01");
    let (_, today) = sign_in_at(&app, december, "00:05:00", "today", json!({"user_id": "u1"})).await;
    assert_eq!((&today["streak"], &today["points_awarded"]), (&json!(1), &json!(1)));
    let (_, yesterday) = sign_in_at(&app, december, "00:06:00", "yesterday", json!({"user_id": "u1", "date": "2026-11-30"})).await;
    assert_eq!(yesterday["streak"], 6, "November 25-30");
    assert_eq!(yesterday["points_awarded"], 1 + 10, "its point, and today's seven-day bonus");
    assert_eq!(app.points("points", season("2026-11-01"), "u1").await, Some(6), "November: six sign-ins");
    assert_eq!(app.points("points", season("2026-12-01"), "u1").await, Some(1 + 10), "December: today's point and bonus");
    let (_, calendar) = app.get("/v1/users/u1/sign-ins?month=2026-12").await;
    assert_eq!((&calendar["days"], &calendar["streak"]), (&json!([1]), &json!(7)));
    // The streak carries on from there.
    let next = sign_in_on(&app, "u1", date("2026-12-02")).await;
    assert_eq!((&next["streak"], &next["points_awarded"]), (&json!(8), &json!(1)));
}

#[tokio::test]
async fn the_calendar_refuses_bad_input() {
    let app = spawn_ingest().await;
    for (path, status, code) in [
        ("/v1/users/u1/sign-ins?month=2026-13", 400, "malformed"),
        ("/v1/users/u1/sign-ins?month=2026-1", 400, "malformed"),
        ("/v1/users/u1/sign-ins?mnth=2026-11", 400, "malformed"),
        ("/v1/users/u%7B1%7D/sign-ins", 400, "invalid_id"),
    ] {
        let (got, body) = app.get(path).await;
        assert_eq!((got.as_u16(), body["error"]["code"].as_str()), (status, Some(code)), "{path}: {body}");
    }
}

/// A journaled board that lost its keys answers its calendar 503 `board_restoring`, as its
/// other reads do (docs/journal.md#fence), not an empty month (200, as if the user never
/// signed in).
#[tokio::test]
async fn a_lost_board_answers_its_calendar_503_not_an_empty_month() {
    let app = standings_tests::spawn_journaled(standings::domain::config::Config::default_boards()).await;
    sign_in_on(&app, "u1", date("2026-12-01")).await;
    let (status, calendar) = app.get("/v1/users/u1/sign-ins?month=2026-12").await;
    assert_eq!((status.as_u16(), &calendar["days"]), (200, &json!([1])), "{calendar}");
    app.lose_written_keys().await;
    let (status, body) = app.get("/v1/users/u1/sign-ins?month=2026-12").await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (503, Some("board_restoring")), "{body}");
}
