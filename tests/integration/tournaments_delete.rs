//! A tournament deleted (docs/tournaments.md#deleting): refused at once, its open instance
//! ended then and none opened after, every instance that ran stored and announced by the next
//! run, then its keys freed and its name kept; and an instance whose end keeps failing holds
//! the watermark of ended instances while later ones are ended.

use axum::http::{Method, StatusCode};
use chrono::Duration;
use journal::S3Objects;
use serde_json::{Value, json};
use standings::archive::bus::TOURNAMENT_ENDED;
use standings_tests::journal::drain_to_new_bucket;
use standings_tests::notify::subscribed_to;
use standings_tests::runtime::call_on;
use standings_tests::tournament::{Arena, cup, flush_and_restore};
use standings_tests::{WRITER, cluster};

fn code(body: &Value) -> Option<&str> {
    body["error"]["code"].as_str()
}

#[tokio::test]
async fn a_deleted_tournament_is_refused_at_once_its_instances_stored_and_announced_then_its_keys_freed() {
    let arena = Arena::new().await;
    let bus = subscribed_to(TOURNAMENT_ENDED).await;
    let midnight = arena.app.now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    let extra = json!({"reset": "day", "duration_secs": 7200, "description": "Every day", "metadata": {"banner": "b".repeat(2000)},
        "prizes": [{"ranks": [1, 1], "reward": {"gems": 50}}]});
    let body = cup(midnight - Duration::days(1), 24 * 30, extra);
    assert_eq!(arena.put_at("daily", &body, midnight - Duration::days(1)).await.0, StatusCode::CREATED);
    let (yesterday, today) = ((midnight - Duration::days(1)).format("%Y-%m-%d").to_string(), midnight.format("%Y-%m-%d").to_string());
    arena.app.set_now(midnight - Duration::days(1) + Duration::minutes(10));
    assert_eq!(arena.play("daily", "y1", "ann", 10).await.0, StatusCode::OK);
    arena.app.set_now(midnight + Duration::minutes(10));
    assert_eq!(arena.play("daily", "t1", "bo", 20).await.0, StatusCode::OK);
    assert_eq!(arena.play("daily", "t2", "cy", 5).await.0, StatusCode::OK);

    // A warm container that read the catalog before the deletion.
    let stale = arena.app.ingest_instance(std::time::Duration::from_secs(3600), 10);
    let play = |event: &str, user: &str, score: i64| json!({"event_id": event, "user_id": user, "score": score});
    let (status, warm) = call_on(&stale, Method::POST, "/v1/tournaments/daily/scores", &play("t0", "dee", 1), WRITER).await;
    assert_eq!(status, StatusCode::OK, "{warm}");
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
    let (status, redefined) = arena.put("daily", &body).await;
    assert_eq!(
        (status, code(&redefined)),
        (StatusCode::CONFLICT, Some("board_exists")),
        "a tournament being deleted is not defined again, the same body neither: {redefined}"
    );
    let (status, late) = arena.play("daily", "t3", "dee", 99).await;
    assert_eq!((status, code(&late)), (StatusCode::CONFLICT, Some("tournament_closed")), "{late}");
    let board = arena.app.keyspace().await;
    let (status, stale_late) = call_on(&stale, Method::POST, "/v1/tournaments/daily/scores", &play("t4", "dee", 99), WRITER).await;
    assert_eq!(
        (status, code(&stale_late)),
        (StatusCode::CONFLICT, Some("tournament_closed")),
        "refused in Redis whatever a catalog says, with the tournament's code: {stale_late}"
    );
    let (status, stale_join) = call_on(&stale, Method::POST, "/v1/tournaments/daily/join", &json!({"user_id": "eve"}), WRITER).await;
    assert_eq!((status, code(&stale_join)), (StatusCode::CONFLICT, Some("tournament_closed")), "a join too: {stale_join}");
    assert_eq!(arena.app.keyspace().await, board, "nothing written");
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
    assert_eq!(rows, [("bo", 20), ("cy", 5), ("dee", 1)], "its results stay readable: {results}");
    assert_eq!(results["results"][0]["prize"], json!({"gems": 50}), "with their prizes: {results}");
    // Its tombstone keeps what those reads need, not its description and metadata.
    let tombstone: String =
        redis::cmd("HGET").arg(arena.app.keys.catalog().ending()).arg("daily").query_async(&mut arena.app.redis.clone()).await.unwrap();
    let kept: Value = serde_json::from_str(&tombstone).unwrap();
    let kept = &kept["definition"]["tournament"];
    assert_eq!((kept.get("description"), kept.get("metadata"), &kept["prizes"]), (None, None, &body["prizes"]), "{tombstone}");
    let (status, again) = arena.put("daily", &body).await;
    assert_eq!((status, code(&again)), (StatusCode::CONFLICT, Some("board_exists")), "its name is kept: {again}");
    let (ended, boards) = arena.runtime_run(Some(&bus.bus)).await;
    assert!(ended.is_empty() && boards.is_empty(), "nothing left to do: {ended:?} {boards:?}");
}

/// Three days of a daily tournament to end, the middle one failing (its kept size is a key of
/// another type): the others are ended, the failing one holds the watermark and is tried again
/// each run, and once fixed it is ended and none is read again.
#[tokio::test]
async fn an_instance_that_keeps_failing_holds_the_watermark_while_later_ones_are_ended() {
    use standings::domain::period::{Period, PeriodKind};
    let arena = Arena::new().await;
    let bus = subscribed_to(TOURNAMENT_ENDED).await;
    let midnight = arena.app.now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    let first = midnight - Duration::days(2);
    assert_eq!(
        arena.put_at("daily", &cup(first, 24 * 30, json!({"reset": "day", "duration_secs": 7200})), first).await.0,
        StatusCode::CREATED
    );
    let days: Vec<String> = (0..3).map(|d| (first + Duration::days(d)).format("%Y-%m-%d").to_string()).collect();
    for d in 0..3 {
        arena.app.set_now(first + Duration::days(d) + Duration::minutes(10));
        assert_eq!(arena.play("daily", &format!("d{d}"), "ann", 10 + d).await.0, StatusCode::OK);
    }
    let size = arena.app.keys.board("daily").final_size(&Period::named(PeriodKind::Day, &days[1], chrono_tz::UTC).unwrap());
    let mut conn = arena.app.redis.clone();
    let () = redis::cmd("RPUSH").arg(&size).arg("x").query_async(&mut conn).await.unwrap();
    arena.app.set_now(midnight + Duration::hours(3));
    let statuses = |reports: Vec<standings::archive::tournament_end::InstanceEnd>| {
        let mut ended: Vec<(String, &'static str)> = reports.into_iter().map(|r| (r.instance, r.status)).collect();
        ended.sort();
        ended
    };
    let expected = |middle: &'static str| vec![(days[0].clone(), "done"), (days[1].clone(), middle), (days[2].clone(), "done")];
    assert_eq!(statuses(arena.end_run(Some(&bus.bus)).await), expected("failed"));
    // Tried again; the one below it is behind the watermark, the one above is not yet.
    let again = statuses(arena.end_run(Some(&bus.bus)).await);
    assert_eq!(again, [(days[1].clone(), "failed"), (days[2].clone(), "done")]);
    let () = redis::cmd("DEL").arg(&size).query_async(&mut conn).await.unwrap();
    assert_eq!(statuses(arena.end_run(Some(&bus.bus)).await), [(days[1].clone(), "done"), (days[2].clone(), "done")]);
    assert!(arena.end_run(Some(&bus.bus)).await.is_empty(), "every instance behind the watermark");
    assert_eq!(bus.events(TOURNAMENT_ENDED).await.len(), 3, "each announced once");
}

/// On a journaled deployment, a tournament deleted while its instance is open, whether anybody
/// played it or not, and one whose instance an operator ended early first: each 202 with its
/// end recorded, and the same answer again.
#[tokio::test]
async fn an_open_tournament_nobody_played_or_ended_early_is_deleted_on_a_journaled_deployment() {
    let (_server, arena) = standings_tests::tournament::journaled_arena_of_its_own().await;
    let now = arena.app.now();
    for id in ["empty", "played", "early"] {
        assert_eq!(arena.put(id, &cup(now - Duration::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    }
    assert_eq!(arena.play("played", "p1", "ann", 10).await.0, StatusCode::OK);
    assert_eq!(arena.play("early", "e1", "bo", 10).await.0, StatusCode::OK);
    let (status, ended) = arena.end("early", "rained off").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{ended}");
    for id in ["empty", "played", "early"] {
        let (status, deleted) = arena.delete(id, "cancelled").await;
        assert_eq!((status, deleted["state"].as_str()), (StatusCode::ACCEPTED, Some("ending")), "{id}: {deleted}");
        assert_eq!(arena.delete(id, "cancelled").await, (StatusCode::ACCEPTED, deleted.clone()), "{id} again: the same answer");
        let (status, late) = arena.play(id, &format!("{id}-late"), "cy", 1).await;
        assert_eq!((status, code(&late)), (StatusCode::CONFLICT, Some("tournament_closed")), "{id}: {late}");
    }

    // Their ends done once their journals are stored: listed under `ended` from their
    // tombstones, and so again after every key was lost and the journal restored.
    let (client, bucket) = drain_to_new_bucket(&arena.app, 50).await;
    let mut done = Vec::new();
    for _ in 0..3 {
        let (_, boards) = arena.runtime_run(None).await;
        done.extend(boards.into_iter().filter(|r| r.status == "done").map(|r| r.board));
        let objects = S3Objects::new(client.clone(), &bucket);
        arena.app.drainer(objects, Default::default()).drain(chrono::Utc::now() + Duration::minutes(5)).await;
    }
    done.sort();
    assert_eq!(done, ["early", "empty", "played"]);
    let listed = |page: &Value| -> Vec<(String, u64)> {
        page["tournaments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["tournament_id"].as_str().unwrap().to_owned(), t["size"].as_u64().unwrap()))
            .collect()
    };
    let (_, ended) = arena.read("/v1/tournaments?state=ended").await;
    let expected = [("early".to_owned(), 1), ("empty".to_owned(), 0), ("played".to_owned(), 1)];
    assert_eq!(listed(&ended), expected, "{ended}");
    flush_and_restore(&arena, &client, &bucket).await;
    let (_, restored) = arena.read("/v1/tournaments?state=ended").await;
    assert_eq!(listed(&restored), expected, "{restored}");
    // The catalog lost (its guard with it): the deleted ones are being restored, not gone.
    let () = redis::cmd("DEL").arg(arena.app.keys.catalog().guard()).query_async(&mut arena.app.redis.clone()).await.unwrap();
    let (status, lost) = arena.read("/v1/tournaments?state=ended").await;
    assert_eq!((status, code(&lost)), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{lost}");
}

/// A deletion part-way through a second (as a real clock makes every one): the run that stores
/// its last instance moves the watermark past that instance's end, so the tournament's end is
/// done in the same run and no later run reads it again (a watermark kept in whole seconds
/// below the end held it `archiving`, its instance stored again, every minute for ever).
#[tokio::test]
async fn a_tournament_deleted_part_way_through_a_second_finishes_its_end() {
    let arena = Arena::new().await;
    let start = arena.app.now() - Duration::minutes(30);
    assert_eq!(arena.put("subsec", &cup(start, 24, json!({}))).await.0, StatusCode::CREATED);
    assert_eq!(arena.play("subsec", "p1", "ann", 7).await.0, StatusCode::OK);
    arena.app.set_now(arena.app.now() + Duration::milliseconds(110));
    assert_eq!(arena.delete("subsec", "gone").await.0, StatusCode::ACCEPTED);
    arena.app.set_now(arena.app.now() + Duration::seconds(5));
    let (ended, boards) = arena.runtime_run(None).await;
    assert_eq!(ended.iter().map(|r| (r.instance.as_str(), r.status)).collect::<Vec<_>>(), [("all", "stored")], "{ended:?}");
    assert_eq!(boards.iter().map(|r| (r.board.as_str(), r.status)).collect::<Vec<_>>(), [("subsec", "done")], "{boards:?}");
    let (status, gone) = arena.app.call(Method::GET, "/v1/admin/tournaments/subsec", String::new(), standings_tests::ADMIN).await;
    assert_eq!((status, code(&gone)), (StatusCode::NOT_FOUND, Some("unknown_tournament")), "{gone}");
    let (ended, boards) = arena.runtime_run(None).await;
    assert!(ended.is_empty() && boards.is_empty(), "nothing left to do: {ended:?} {boards:?}");
}
