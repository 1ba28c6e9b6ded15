//! A tournament defined with its `start` in the past (issue 59 item 5, docs/tournaments.md):
//! it opens the current instance only. Before, a daily tournament starting 30 days back had 30
//! instances already over, each stored and announced as an empty `Tournament Ended` event by
//! the archive's next runs; now no instance that ended before the definition ever ran. And a
//! recurring tournament's resets in its timezone (item 6).

use axum::http::StatusCode;
use chrono::Duration;
use serde_json::json;
use standings::archive::bus::TOURNAMENT_ENDED;
use standings::archive::ends_known::EndsKnown;
use standings_tests::notify::subscribed_to;
use standings_tests::tournament::{Arena, cup};
use standings_tests::unique_season_table;

#[tokio::test]
async fn a_start_in_the_past_opens_the_current_instance_only() {
    let arena = Arena::new().await;
    let bus = subscribed_to(TOURNAMENT_ENDED).await;
    let midnight = arena.app.now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    let day = |at: chrono::DateTime<chrono::Utc>| at.format("%Y-%m-%d").to_string();
    // Daily, two hours from each midnight, from 30 days back; defined at 01:00, today's open.
    arena.app.set_now(midnight + Duration::hours(1));
    let body = cup(midnight - Duration::days(30), 24 * 60, json!({"reset": "day", "duration_secs": 7200}));
    assert_eq!(arena.put("daily", &body).await.0, StatusCode::CREATED);
    assert_eq!(arena.play("daily", "t1", "ann", 10).await.0, StatusCode::OK);
    let (status, view) = arena.read("/v1/tournaments/daily").await;
    assert_eq!((status, view["state"].as_str()), (StatusCode::OK, Some("open")), "{view}");
    let (status, before) = arena.read(&format!("/v1/tournaments/daily/results?instance={}", day(midnight - Duration::days(1)))).await;
    assert_eq!((status, before["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("unknown_instance")), "{before}");
    let (status, top) = arena.read(&format!("/v1/tournaments/daily/top?instance={}", day(midnight - Duration::days(2)))).await;
    assert_eq!((status, top["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("unknown_instance")), "{top}");

    // A window none of whose instances runs from now on is refused, nothing stored: over, or
    // its last instance (a day's first hour) over before the definition.
    for (id, over) in [
        ("over", cup(midnight - Duration::days(3), 24, json!({}))),
        ("late", cup(midnight - Duration::days(3), 24 * 3 + 23, json!({"reset": "day", "duration_secs": 3600}))),
    ] {
        let (status, refused) = arena.put(id, &over).await;
        let field = refused["error"]["message"].as_str().unwrap_or_default();
        assert_eq!((status, field.starts_with("end")), (StatusCode::BAD_REQUEST, true), "{id}: {refused}");
        let (status, _) = arena.read(&format!("/v1/tournaments/{id}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{id}: nothing stored");
    }
    let (status, same) = arena.put("daily", &body).await;
    assert_eq!(status, StatusCode::OK, "the same body again: {same}");

    // The next day: the archive's run ends today's instance, and only it, once.
    arena.app.set_now(midnight + Duration::days(1) + Duration::minutes(5));
    let (ended, _) = arena.runtime_run(Some(&bus.bus)).await;
    let instances: Vec<(String, &str)> = ended.iter().map(|r| (r.instance.clone(), r.status)).collect();
    assert_eq!(instances, [(day(midnight), "done")], "{ended:?}");
    assert_eq!(bus.events(TOURNAMENT_ENDED).await.len(), 1, "one instance announced");
    let (again, _) = arena.runtime_run(Some(&bus.bus)).await;
    assert!(again.is_empty(), "nothing more to end: {again:?}");
    let (status, results) = arena.read(&format!("/v1/tournaments/daily/results?instance={}", day(midnight))).await;
    assert_eq!((status, results["results"][0]["user_id"].as_str()), (StatusCode::OK, Some("ann")), "{results}");
}

/// A warm archive function reads a tournament's watermark from the table only when an instance
/// ended after the one it knows (issue 59 item 5: each run read every tournament's, for ever).
/// Shown by swapping the table for an empty one: a run that reads it ends the instance again.
#[tokio::test]
async fn a_warm_archive_reads_a_watermark_only_when_an_instance_ended_after_it() {
    let mut arena = Arena::new().await;
    let midnight = arena.app.now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    let day = |at: chrono::DateTime<chrono::Utc>| at.format("%Y-%m-%d").to_string();
    arena.app.set_now(midnight + Duration::hours(1));
    let body = cup(midnight, 24 * 60, json!({"reset": "day", "duration_secs": 7200}));
    assert_eq!(arena.put("daily", &body).await.0, StatusCode::CREATED);
    assert_eq!(arena.play("daily", "t1", "ann", 10).await.0, StatusCode::OK);
    let instances = |ended: Vec<standings::archive::tournament_end::InstanceEnd>| ended.into_iter().map(|r| r.instance).collect::<Vec<_>>();
    let known = EndsKnown::default();
    assert!(arena.end_run_knowing(&known).await.is_empty(), "nothing ended yet");

    arena.app.set_now(midnight + Duration::hours(3));
    assert_eq!(instances(arena.end_run_knowing(&known).await), [day(midnight)]);
    arena.table = unique_season_table().await;
    assert!(arena.end_run_knowing(&known).await.is_empty(), "nothing ended after the watermark it knows: no read");
    // (Its board freed by the first end, the instance is reported failed: what matters is the read.)
    assert_eq!(instances(arena.end_run(None).await), [day(midnight)], "a cold function reads the (empty) table's");

    // The next day's instance ends: the warm function reads the table again (and, as the cold
    // one, finds the first instance not finished there), the latest first.
    arena.app.set_now(midnight + Duration::days(1) + Duration::hours(3));
    let next = arena.end_run_knowing(&known).await;
    assert_eq!((next[0].instance.clone(), next[0].status), (day(midnight + Duration::days(1)), "stored"), "{next:?}");
}

/// A daily tournament in Tokyo (UTC+9) resets at Tokyo's midnight, 15:00 UTC: a score a second
/// before lands in the local day's instance, one at the reset in the next; the first's results
/// are stored once it ends, under its local date (issue 59 item 6).
#[tokio::test]
async fn a_daily_tournament_in_a_timezone_resets_at_its_local_midnight() {
    let arena = Arena::new().await;
    let midnight = arena.app.now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    let reset = midnight + Duration::hours(15);
    let body = cup(midnight - Duration::days(1), 24 * 5, json!({"reset": "day", "duration_secs": 86_400, "timezone": "Asia/Tokyo"}));
    assert_eq!(arena.put_at("tokyo", &body, midnight).await.0, StatusCode::CREATED);
    let local = |at: chrono::DateTime<chrono::Utc>| (at + Duration::hours(9)).format("%Y-%m-%d").to_string();
    arena.app.set_now(reset - Duration::seconds(1));
    let (status, before) = arena.play("tokyo", "t1", "ann", 5).await;
    assert_eq!((status, before["instance"].as_str()), (StatusCode::OK, Some(local(reset - Duration::seconds(1)).as_str())), "{before}");
    arena.app.set_now(reset);
    let (status, after) = arena.play("tokyo", "t2", "bo", 7).await;
    assert_eq!((status, after["instance"].as_str()), (StatusCode::OK, Some(local(reset).as_str())), "{after}");
    assert_ne!(before["instance"], after["instance"]);
    let (_, view) = arena.read("/v1/tournaments/tokyo").await;
    assert_eq!(
        (view["start"].clone(), view["state"].clone()),
        (json!(reset.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)), json!("open")),
        "{view}"
    );
    arena.end_run(None).await;
    let (status, results) = arena.read(&format!("/v1/tournaments/tokyo/results?instance={}", local(reset - Duration::seconds(1)))).await;
    assert_eq!(status, StatusCode::OK, "{results}");
    assert_eq!(results["results"][0]["user_id"], json!("ann"));
    let mut bad = body.clone();
    bad["timezone"] = json!("Tokyo");
    let (status, refused) = arena.put("tokyo-bad", &bad).await;
    assert_eq!(
        (status, refused["error"]["message"].as_str().map(|m| m.starts_with("timezone"))),
        (StatusCode::BAD_REQUEST, Some(true)),
        "{refused}"
    );
}
