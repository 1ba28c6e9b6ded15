//! A tournament deleted (docs/tournaments.md#deleting): refused at once, its open instance
//! ended then and none opened after, every instance that ran stored and announced by the next
//! run, then its keys freed and its name kept.

use axum::http::{Method, StatusCode};
use chrono::Duration;
use serde_json::{Value, json};
use standings::archive::bus::TOURNAMENT_ENDED;
use standings_tests::notify::subscribed_to;
use standings_tests::tournament::{Arena, cup};
use standings_tests::{WRITER, cluster};

fn code(body: &Value) -> Option<&str> {
    body["error"]["code"].as_str()
}

#[tokio::test]
async fn a_deleted_tournament_is_refused_at_once_its_instances_stored_and_announced_then_its_keys_freed() {
    let arena = Arena::new().await;
    let bus = subscribed_to(TOURNAMENT_ENDED).await;
    let midnight = arena.app.now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    let body = cup(midnight - Duration::days(1), 24 * 30, json!({"reset": "day", "duration_secs": 7200}));
    assert_eq!(arena.put("daily", &body).await.0, StatusCode::CREATED);
    let (yesterday, today) = ((midnight - Duration::days(1)).format("%Y-%m-%d").to_string(), midnight.format("%Y-%m-%d").to_string());
    arena.app.set_now(midnight - Duration::days(1) + Duration::minutes(10));
    assert_eq!(arena.play("daily", "y1", "ann", 10).await.0, StatusCode::OK);
    arena.app.set_now(midnight + Duration::minutes(10));
    assert_eq!(arena.play("daily", "t1", "bo", 20).await.0, StatusCode::OK);
    assert_eq!(arena.play("daily", "t2", "cy", 5).await.0, StatusCode::OK);

    arena.app.set_now(midnight + Duration::minutes(30));
    let (status, refused) = arena.app.call(Method::DELETE, "/v1/admin/tournaments/daily", String::new(), WRITER).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "an admin's route: {refused}");
    let (status, deleted) = arena.delete("daily", "cancelled").await;
    assert_eq!(
        (status, deleted["tournament_id"].as_str(), deleted["state"].as_str(), deleted["ended"]["reason"].as_str()),
        (StatusCode::ACCEPTED, Some("daily"), Some("ending"), Some("cancelled")),
        "{deleted}"
    );
    assert_eq!(deleted["definition"], body, "{deleted}");
    assert_eq!(arena.delete("daily", "cancelled").await, (StatusCode::ACCEPTED, deleted.clone()), "again: the same answer");
    let (status, late) = arena.play("daily", "t3", "dee", 99).await;
    assert_eq!((status, code(&late)), (StatusCode::CONFLICT, Some("tournament_closed")), "{late}");
    assert_eq!(code(&arena.join("daily", "eve").await.1), Some("tournament_closed"));
    let (_, listed) = arena.read("/v1/tournaments").await;
    assert_eq!(listed["tournaments"], json!([]), "a deleted tournament is not listed: {listed}");
    let (status, unknown) = arena.delete("nothing-here", "x").await;
    assert_eq!((status, code(&unknown)), (StatusCode::NOT_FOUND, Some("unknown_tournament")), "{unknown}");

    // Tomorrow's instance never opens; the next run ends the two that ran, then frees the keys.
    arena.app.set_now(midnight + Duration::days(1) + Duration::minutes(5));
    assert_eq!(code(&arena.play("daily", "n1", "ann", 1).await.1), Some("tournament_closed"));
    let (ended, boards) = arena.runtime_run(Some(&bus.bus)).await;
    let mut instances: Vec<(String, &str)> = ended.iter().map(|r| (r.instance.clone(), r.status)).collect();
    instances.sort();
    assert_eq!(instances, [(yesterday.clone(), "done"), (today.clone(), "done")], "{ended:?}");
    assert_eq!(boards.iter().map(|r| (r.board.as_str(), r.status)).collect::<Vec<_>>(), [("daily", "done")], "{boards:?}");
    assert_eq!(bus.events(TOURNAMENT_ENDED).await.len(), 2, "each instance announced once");
    let left: Vec<String> = cluster::scan_all(&arena.app.redis, &arena.app.keys.all_pattern())
        .await
        .into_iter()
        .filter(|key| key.contains("{daily}"))
        .collect();
    assert_eq!(left, [arena.app.keys.board("daily").guard()], "every key freed but the guard");
    let (_, results) = arena.read(&format!("/v1/tournaments/daily/results?instance={today}")).await;
    let rows: Vec<(&str, i64)> =
        results["results"].as_array().unwrap().iter().map(|r| (r["user_id"].as_str().unwrap(), r["score"].as_i64().unwrap())).collect();
    assert_eq!(rows, [("bo", 20), ("cy", 5)], "its results stay readable: {results}");
    let (status, again) = arena.put("daily", &body).await;
    assert_eq!((status, code(&again)), (StatusCode::CONFLICT, Some("board_exists")), "its name is kept: {again}");
    let (ended, boards) = arena.runtime_run(Some(&bus.bus)).await;
    assert!(ended.is_empty() && boards.is_empty(), "nothing left to do: {ended:?} {boards:?}");
}
