//! The archive's schedule and what it serves: every ended season archived oldest first, a
//! lost board refused and alarmed, archived seasons served with the live shapes.

use axum::http::Method;
use serde_json::{Value, json};
use standings::archive::job::Status;
use standings::archive::table::{SeasonTable, Shard};
use standings::runtime::metrics::Metrics;
use standings_tests::{ArchiveHarness, at, season_members};
use std::sync::{Arc, Mutex};

use crate::archive::*;

/// An archiver whose metric lines land in the returned buffer.
fn archiver_with_metrics(harness: &ArchiveHarness) -> (standings::archive::job::Archiver<SeasonTable>, Arc<Mutex<Vec<Value>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let metrics =
        Metrics::with_sink("archive", Arc::new(move |line: String| sink.lock().unwrap().push(serde_json::from_str(&line).unwrap())));
    (harness.archiver(harness.table.clone()).with_metrics(metrics), lines)
}

fn seasons_overdue(lines: &Mutex<Vec<Value>>) -> Vec<f64> {
    lines.lock().unwrap().iter().filter_map(|line| line.get(standings::archive::job::SEASONS_OVERDUE)?.as_f64()).collect()
}

#[tokio::test]
async fn the_scheduled_event_archives_every_ended_season_not_yet_archived_oldest_first() {
    let harness = ArchiveHarness::new().await;
    let september = ArchiveHarness::season("2026-09");
    harness.seed("2026-09", &season_members(7, &september)).await;
    let live = seeded(&harness, 5).await;
    let (archiver, metrics) = archiver_with_metrics(&harness);
    let scheduled: Value = serde_json::from_str(include_str!("../../functions/archive/fixtures/scheduled-event.json")).unwrap();

    let response = archive::run(&archiver, &harness.closer(), scheduled.clone(), far()).await.unwrap();
    let summary = |board: &str| -> Vec<_> {
        response.results.iter().filter(|r| r.board == board).map(|r| (r.season.as_str(), r.status, r.total)).collect()
    };
    // August's board could still exist (a season board outlives its season by 90 days): it
    // had no members, and is recorded as such.
    assert_eq!(summary("points"), [("2026-08", Status::Complete, 0), ("2026-09", Status::Complete, 7), (SEASON, Status::Complete, 5)]);
    // The other archived board (lap-times, in UTC) is archived in the same run, on its own.
    assert_eq!(summary("lap-times"), [("2026-08", Status::Complete, 0), ("2026-09", Status::Complete, 0)]);
    assert_archived_exactly(&harness, &live).await;
    assert_eq!(harness.table.count_entries("points", "2026-09").await.unwrap(), 7);
    assert_eq!(seasons_overdue(&metrics), [0.0]);

    let again = archive::run(&archiver, &harness.closer(), scheduled, far()).await.unwrap();
    assert!(again.results.iter().all(|r| r.status == Status::AlreadyComplete), "{:?}", again.results);
}

#[tokio::test]
async fn a_season_whose_live_board_was_lost_is_refused_alarmed_and_never_recorded_as_empty() {
    let harness = ArchiveHarness::new().await;
    let ingest = harness.app().await;
    ingest.set_now(at("2026-10-20T12:00:00+08:00"));
    let (status, body) = ingest.event(json!({"event_id": "e1", "user_id": "ann", "action": "learning"})).await;
    assert_eq!(status, 200, "{body}");
    // The board vanishes as an eviction, an expiry or a flush would take it.
    let live_key = harness.keys.board("points").period(&ArchiveHarness::season(SEASON));
    let _: u64 = redis::cmd("DEL").arg(&live_key).query_async(&mut harness.redis.clone()).await.unwrap();

    let error = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap_err();
    assert_eq!(error.code(), "live_board_lost", "{error}");
    assert!(harness.table.completed("points", SEASON).await.unwrap().is_none(), "not recorded as complete");
    let again = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap_err();
    assert_eq!(again.code(), "live_board_lost", "a re-run refuses again");

    // A day later the scheduled run still archives the other seasons, then fails, and counts
    // October overdue for the alarm.
    harness.set_now(at("2026-11-02T01:00:00+08:00"));
    let (archiver, metrics) = archiver_with_metrics(&harness);
    let scheduled: Value = serde_json::from_str(include_str!("../../functions/archive/fixtures/scheduled-event.json")).unwrap();
    let error = archive::run(&archiver, &harness.closer(), scheduled, far()).await.unwrap_err();
    assert_eq!(error.code(), "live_board_lost");
    for season in ["2026-08", "2026-09"] {
        assert!(harness.table.completed("points", season).await.unwrap().is_some(), "{season} archived despite October");
    }
    assert!(harness.table.completed("points", SEASON).await.unwrap().is_none());
    assert_eq!(seasons_overdue(&metrics), [1.0]);

    // And the season stays closed: nothing lands on a board that would then look complete.
    let (status, body) = ingest.event(json!({"event_id": "e2", "user_id": "bob", "action": "learning"})).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (422, Some("period_closed")), "{body}");
}

#[tokio::test]
async fn archived_seasons_are_served_with_the_live_shapes_and_cached() {
    let harness = ArchiveHarness::new().await;
    let september = ArchiveHarness::season("2026-09");
    harness.seed("2026-09", &season_members(40, &september)).await;
    let october = seeded(&harness, 40).await;
    let archiver = harness.archiver(harness.table.clone());
    for season in ["2026-09", SEASON] {
        archiver.archive_season("points", season, Shard::WHOLE, far()).await.unwrap();
    }
    let (top_user, ..) = &october[0];
    let app = harness.app().await;
    let profile = json!({"nickname": "Top"});
    let (status, _) = app.call(Method::PUT, &format!("/v1/users/{top_user}/profile"), profile.to_string(), standings_tests::WRITER).await;
    assert_eq!(status, 200);
    let get = |path: String| {
        let app = &app;
        async move { app.get_with_headers(&path).await }
    };

    let (status, headers, top) = get("/v1/boards/points/seasons/2026-10/top".into()).await;
    assert_eq!(status, 200, "{top}");
    assert_eq!(headers["cache-control"], "public, max-age=86400");
    assert_eq!(
        (&top["board"], &top["period"], &top["period_id"], &top["total"]),
        (&json!("points"), &json!("season"), &json!(SEASON), &json!(40))
    );
    assert_eq!((&top["period_start"], &top["next_reset"]), (&json!("2026-10-01T00:00:00+08:00"), &json!("2026-11-01T00:00:00+08:00")));
    let entries = top["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 30, "the default limit");
    for (i, (entry, (user, points, _))) in entries.iter().zip(&october).enumerate() {
        assert_eq!(
            (entry["rank"].as_u64(), entry["user_id"].as_str(), entry["score"].as_i64()),
            (Some(i as u64 + 1), Some(user.as_str()), Some(*points))
        );
    }
    assert_eq!(entries[0]["profile"], profile);
    assert_eq!(entries[1]["profile"], Value::Null, "no profile");

    let (_, _, tail) = get("/v1/boards/points/seasons/2026-10/top?limit=10&offset=35".into()).await;
    let ranks: Vec<_> = tail["entries"].as_array().unwrap().iter().map(|e| e["rank"].as_u64().unwrap()).collect();
    assert_eq!(ranks, [36, 37, 38, 39, 40]);
    let (_, _, past_the_end) = get("/v1/boards/points/seasons/2026-10/top?offset=40".into()).await;
    assert_eq!(past_the_end["entries"], json!([]));

    let (status, headers, mine) = get(format!("/v1/boards/points/seasons/2026-10/users/{top_user}")).await;
    assert_eq!((status.as_u16(), headers["cache-control"].to_str().unwrap()), (200, "public, max-age=86400"));
    assert_eq!(
        (&mine["rank"], &mine["score"], &mine["percentile"], &mine["total"]),
        (&json!(1), &json!(october[0].1), &json!(97.5), &json!(40))
    );
    let around: Vec<_> = mine["around"].as_array().unwrap().iter().map(|e| e["rank"].as_u64().unwrap()).collect();
    assert_eq!(around, (1..=11).collect::<Vec<_>>(), "a full window, shifted at the top");
    let (user_20, points_20, _) = &october[19];
    let (_, _, middle) = get(format!("/v1/boards/points/seasons/2026-10/users/{user_20}?around=2")).await;
    assert_eq!((&middle["rank"], &middle["score"]), (&json!(20), &json!(points_20)));
    let around: Vec<_> = middle["around"].as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(around, october[17..22].iter().map(|m| m.0.clone()).collect::<Vec<_>>());
    let (status, _, nobody) = get("/v1/boards/points/seasons/2026-10/users/nobody".into()).await;
    assert_eq!((status.as_u16(), &nobody["rank"], &nobody["around"]), (200, &Value::Null, &json!([])));

    let (status, headers, history) = get(format!("/v1/users/{top_user}/seasons")).await;
    assert_eq!((status.as_u16(), headers["cache-control"].to_str().unwrap()), (200, "public, max-age=3600"));
    let seasons: Vec<_> = history["seasons"].as_array().unwrap().iter().map(|s| s["season"].as_str().unwrap()).collect();
    assert_eq!(seasons, ["2026-10", "2026-09"], "newest first");
    assert_eq!((&history["seasons"][0]["rank"], &history["seasons"][0]["total"]), (&json!(1), &json!(40)));
    let (_, _, filtered) = get(format!("/v1/users/{top_user}/seasons?board=points")).await;
    assert_eq!(filtered["seasons"], history["seasons"]);

    let errors = [
        ("/v1/boards/points/seasons/2026-08/top", 404, "season_not_archived"),
        ("/v1/boards/points/seasons/2026-08/users/u1", 404, "season_not_archived"),
        ("/v1/boards/no-such-board/seasons/2026-10/top", 404, "unknown_board"),
        ("/v1/boards/activity/seasons/2026-10/top", 404, "unknown_board"),
        ("/v1/boards/points/seasons/2026-13/top", 400, "malformed"),
        ("/v1/boards/points/seasons/2026-10/top?limit=0", 400, "out_of_range"),
        ("/v1/boards/points/seasons/2026-10/top?limit=1001", 400, "out_of_range"),
        ("/v1/boards/points/seasons/2026-10/top?limit=ten", 400, "malformed"),
        ("/v1/boards/points/seasons/2026-10/top?period=day", 400, "malformed"),
        ("/v1/boards/points/seasons/2026-10/users/u1?around=51", 400, "out_of_range"),
        ("/v1/boards/points/seasons/2026-10/users/a%7Bb%7D", 400, "invalid_id"),
        ("/v1/users/u1/seasons?board=activity", 404, "unknown_board"),
    ];
    for (path, status, code) in errors {
        let (actual, headers, body) = get(path.into()).await;
        assert_eq!((actual.as_u16(), body["error"]["code"].as_str()), (status, Some(code)), "{path}: {body}");
        assert!(headers.get("cache-control").is_none(), "{path}: errors are not cached");
    }
}

/// The distribution the archive stores is the one the live board had, for every bucket count.
#[tokio::test]
async fn an_archived_season_serves_the_distribution_its_board_had() {
    let harness = ArchiveHarness::new().await;
    seeded(&harness, 250).await;
    let app = harness.app().await;
    let counts = [1, 3, 10, 37, 100];
    let mut live = Vec::new();
    for buckets in counts {
        let (status, body) = app.get(&format!("/v1/boards/points/distribution?period=season&at=2026-10-15&buckets={buckets}")).await;
        assert_eq!((status.as_u16(), &body["total"]), (200, &json!(250)), "{body}");
        live.push(body);
    }
    let report = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, far()).await.unwrap();
    assert_eq!(report.status, Status::Complete);
    assert!(!frozen_exists(&harness).await, "Redis is freed: what follows is read from DynamoDB");

    for (buckets, live) in counts.iter().zip(&live) {
        let (status, headers, archived) =
            app.get_with_headers(&format!("/v1/boards/points/seasons/{SEASON}/distribution?buckets={buckets}")).await;
        assert_eq!((status.as_u16(), headers["cache-control"].to_str().unwrap()), (200, "public, max-age=86400"), "{archived}");
        assert_eq!(archived, *live, "{buckets} buckets");
    }
    let (_, default) = app.get(&format!("/v1/boards/points/seasons/{SEASON}/distribution")).await;
    assert_eq!(default["buckets"].as_array().unwrap().len(), 10);

    for (path, status, code) in [
        ("/v1/boards/points/seasons/2026-08/distribution", 404, "season_not_archived"),
        ("/v1/boards/points/seasons/2026-10/distribution?buckets=0", 400, "out_of_range"),
        ("/v1/boards/points/seasons/2026-10/distribution?buckets=101", 400, "out_of_range"),
        ("/v1/boards/activity/seasons/2026-10/distribution", 404, "unknown_board"),
    ] {
        let (actual, body) = app.get(path).await;
        assert_eq!((actual.as_u16(), body["error"]["code"].as_str()), (status, Some(code)), "{path}: {body}");
    }
    // A season archived by a release that kept no distribution: complete, but nothing to serve.
    harness.table.mark_complete("points", "2026-07", 1, at("2026-08-02T00:00:00Z")).await.unwrap();
    let (status, body) = app.get("/v1/boards/points/seasons/2026-07/distribution").await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (404, Some("distribution_not_archived")), "{body}");
}
