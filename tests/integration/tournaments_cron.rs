//! A `cron` tournament (issue 59's "schedules that games use", docs/tournaments.md#schedules):
//! an instance opens at every time a five-field schedule names, in the tournament's timezone,
//! and runs `duration_secs`. Through the routes: a score lands in the instance open at its
//! time, none between instances, the ended one's results are stored under its local opening
//! minute and read by default, and a schedule that never fires is refused, nothing stored.

use axum::http::StatusCode;
use chrono::{DateTime, Duration, NaiveTime, TimeZone, Utc};
use chrono_tz::America::New_York;
use serde_json::json;
use standings_tests::tournament::{Arena, cup};

/// 20:00 in New York on the local day of `at`.
fn evening_of(at: DateTime<Utc>) -> DateTime<Utc> {
    let day = at.with_timezone(&New_York).date_naive();
    New_York.from_local_datetime(&day.and_time(NaiveTime::from_hms_opt(20, 0, 0).unwrap())).earliest().unwrap().with_timezone(&Utc)
}

#[tokio::test]
async fn a_cron_tournament_opens_at_each_scheduled_time_in_its_timezone() {
    let arena = Arena::new().await;
    let evening = evening_of(arena.app.now());
    let id = |at: DateTime<Utc>| at.with_timezone(&New_York).format("%Y-%m-%dT%H%M").to_string();
    // Every evening at eight, New York time, for an hour.
    let body =
        cup(evening - Duration::days(2), 24 * 5, json!({"cron": "0 20 * * *", "timezone": "America/New_York", "duration_secs": 3600}));
    let (status, created) = arena.put_at("evenings", &body, evening - Duration::hours(1)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");

    arena.app.set_now(evening - Duration::minutes(1));
    let (status, early) = arena.play("evenings", "e0", "ann", 99).await;
    assert_eq!((status, early["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("tournament_closed")), "{early}");
    let (_, view) = arena.read("/v1/tournaments/evenings").await;
    assert_eq!((view["state"].as_str(), view["instance"].as_str()), (Some("upcoming"), Some(id(evening).as_str())), "{view}");

    arena.app.set_now(evening + Duration::minutes(10));
    let (status, played) = arena.play("evenings", "e1", "ann", 10).await;
    assert_eq!((status, played["instance"].as_str()), (StatusCode::OK, Some(id(evening).as_str())), "{played}");
    assert_eq!(arena.play("evenings", "e2", "bo", 20).await.0, StatusCode::OK);
    let (_, view) = arena.read("/v1/tournaments/evenings").await;
    assert_eq!(view["state"].as_str(), Some("open"), "{view}");
    assert_eq!(
        view["next_reset"].as_str(),
        Some(evening_of(evening + Duration::hours(12)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true).as_str())
    );

    arena.app.set_now(evening + Duration::minutes(61));
    let (status, late) = arena.play("evenings", "e3", "cy", 30).await;
    assert_eq!((status, late["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("tournament_closed")), "{late}");
    // Between instances, the top without `instance` is the one that just ended (it was the
    // next one's, empty), while the tournament shows the next one coming.
    let (_, top) = arena.read("/v1/tournaments/evenings/top").await;
    let listed: Vec<&str> = top["entries"].as_array().unwrap().iter().filter_map(|e| e["user_id"].as_str()).collect();
    assert_eq!((top["instance"].as_str(), listed), (Some(id(evening).as_str()), vec!["bo", "ann"]), "{top}");
    let (_, view) = arena.read("/v1/tournaments/evenings").await;
    assert_eq!(view["state"].as_str(), Some("upcoming"), "{view}");

    // The archive's run ends it; its results, by default and by name, are the instance's.
    let (ended, _) = arena.runtime_run(None).await;
    assert_eq!(ended.iter().map(|r| (r.instance.clone(), r.status)).collect::<Vec<_>>(), [(id(evening), "stored")], "{ended:?}");
    for path in ["/v1/tournaments/evenings/results".to_owned(), format!("/v1/tournaments/evenings/results?instance={}", id(evening))] {
        let (status, results) = arena.read(&path).await;
        assert_eq!((status, results["instance"].as_str()), (StatusCode::OK, Some(id(evening).as_str())), "{path}: {results}");
        let users: Vec<&str> = results["results"].as_array().unwrap().iter().filter_map(|row| row["user_id"].as_str()).collect();
        assert_eq!(users, ["bo", "ann"], "{path}");
    }
    let (status, unknown) = arena.read(&format!("/v1/tournaments/evenings/top?instance={}", id(evening + Duration::minutes(1)))).await;
    assert_eq!((status, unknown["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("unknown_instance")), "{unknown}");

    for (name, schedule) in [
        ("never", json!({"cron": "0 0 30 2 *", "duration_secs": 60})),
        ("both", json!({"cron": "@daily", "reset": "day", "duration_secs": 60})),
    ] {
        let (status, refused) = arena.put(name, &cup(evening, 48, schedule)).await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(
            (status, message.starts_with("tournament.cron") || message.starts_with("cron")),
            (StatusCode::BAD_REQUEST, true),
            "{refused}"
        );
        assert_eq!(arena.read(&format!("/v1/tournaments/{name}")).await.0, StatusCode::NOT_FOUND, "{name}: nothing stored");
    }
}

/// A correction naming a cron instance reaches that instance: the open one by its id, and one
/// that has not opened yet is refused, nothing written (it was looked up at its local
/// midnight, which found the instance before it: the open one refused, a later one corrected
/// in its stead).
#[tokio::test]
async fn a_correction_names_a_cron_instance_by_its_id() {
    let arena = Arena::new().await;
    let noon = arena.app.now().date_naive().and_hms_opt(12, 0, 0).unwrap().and_utc();
    let id = |at: DateTime<Utc>| at.format("%Y-%m-%dT%H%M").to_string();
    let body = cup(noon - Duration::days(1), 24 * 4, json!({"cron": "0 12 * * *", "duration_secs": 6 * 3600}));
    assert_eq!(arena.put_at("noons", &body, noon - Duration::hours(1)).await.0, StatusCode::CREATED);
    arena.app.set_now(noon + Duration::hours(1));
    assert_eq!(arena.play("noons", "n1", "ann", 10).await.0, StatusCode::OK);
    let correct = |period_id: String| {
        let body = json!({"set": 25, "reason": "scored offline", "period": "cron", "period_id": period_id});
        arena.app.call(axum::http::Method::POST, "/v1/admin/boards/noons/users/ann/corrections", body.to_string(), standings_tests::ADMIN)
    };
    let before = arena.app.keyspace().await;
    let (status, refused) = correct(id(noon + Duration::days(1))).await;
    assert!(status.is_client_error(), "an instance not open yet: {status} {refused}");
    assert_eq!(arena.app.keyspace().await, before, "a refused correction writes nothing");
    let (status, corrected) = correct(id(noon)).await;
    assert_eq!(status, StatusCode::OK, "{corrected}");
    let (_, top) = arena.read("/v1/tournaments/noons/top").await;
    assert_eq!((top["instance"].as_str(), top["entries"][0]["score"].as_i64()), (Some(id(noon).as_str()), Some(25)), "{top}");
}
