//! Statements of frozen and archived periods: the statement route answers 410 `period_closed`
//! (never `score: 0` with a negative remainder), and the statement hashes are released with the
//! season. Through the archive job, on the real redis-server and moto_server.

use axum::http::Method;
use serde_json::json;
use standings::archive::job::Status;
use standings::archive::table::Shard;
use standings_tests::{ArchiveHarness, at};

const SEASON: &str = "2026-10";

#[tokio::test]
async fn an_archived_seasons_statement_is_gone_and_its_hashes_are_released() {
    let harness = ArchiveHarness::new().await;
    let app = harness.app().await;
    app.set_now(at("2026-10-20T12:00:00+08:00"));
    for (id, user) in [("e1", "ann"), ("e2", "bob"), ("e3", "ann")] {
        let (status, body) = app.event(json!({"event_id": id, "user_id": user, "action": "learning"})).await;
        assert_eq!(status, 200, "{body}");
    }
    let path = "/v1/boards/points/users/ann/statement?period=season&at=2026-10-20";
    let (status, live) = app.call_query(Method::GET, path, "").await;
    assert_eq!((status.as_u16(), &live["score"]), (200, &json!(20)), "{live}");
    let statements = || async {
        let pattern = format!("{}:v1:{{points}}:stmt:*", harness.keys.prefix());
        standings_tests::cluster::scan_all(&harness.redis, &pattern).await
    };
    assert_eq!(statements().await.len(), 2, "ann's and bob's October statements");

    // Frozen (the archive job has started): the live board is gone, so is its statement.
    let season = ArchiveHarness::season(SEASON);
    standings::archive::freeze::freeze(&mut harness.redis.clone(), &harness.keys.board("points"), &season, None).await.unwrap();
    let (status, frozen) = app.call_query(Method::GET, path, "").await;
    assert_eq!((status.as_u16(), frozen["error"]["code"].as_str()), (410, Some("period_closed")), "{frozen}");

    let report = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, at("2100-01-01T00:00:00Z")).await;
    assert_eq!(report.map(|r| (r.status, r.total)).unwrap(), (Status::Complete, 2));
    assert!(statements().await.is_empty(), "released with the season");
    let (status, archived) = app.call_query(Method::GET, path, "").await;
    assert_eq!((status.as_u16(), archived["error"]["code"].as_str()), (410, Some("period_closed")), "{archived}");
    assert!(archived["error"]["message"].as_str().unwrap().contains("2026-10"), "{archived}");
}

/// A user of the season who is no longer on its board (corrected down to 0 points) still has a
/// statement: it is released with the season too, not left to its TTL.
#[tokio::test]
async fn statements_of_users_no_longer_on_the_board_are_released_with_the_season() {
    let harness = ArchiveHarness::new().await;
    let app = harness.app().await;
    app.set_now(at("2026-10-20T12:00:00+08:00"));
    for (id, user) in [("e1", "ann"), ("e2", "cy")] {
        let (status, body) = app.event(json!({"event_id": id, "user_id": user, "action": "learning"})).await;
        assert_eq!(status, 200, "{body}");
    }
    let correction = json!({"delta": -10, "reason": "duplicate lesson", "correction_id": "k1"}).to_string();
    let (status, body) = app.call(Method::POST, "/v1/admin/boards/points/users/cy/corrections", correction, standings_tests::ADMIN).await;
    assert_eq!(status, 200, "{body}");
    let statements = || async {
        let pattern = format!("{}:v1:{{points}}:stmt:*", harness.keys.prefix());
        standings_tests::cluster::scan_all(&harness.redis, &pattern).await
    };
    assert_eq!(statements().await.len(), 2, "cy is off the board, with a statement that says why");

    let season = ArchiveHarness::season(SEASON);
    standings::archive::freeze::freeze(&mut harness.redis.clone(), &harness.keys.board("points"), &season, None).await.unwrap();
    let report = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, at("2100-01-01T00:00:00Z")).await;
    assert_eq!(report.map(|r| (r.status, r.total)).unwrap(), (Status::Complete, 1));
    assert!(statements().await.is_empty(), "every user's statement released with the season: {:?}", statements().await);
}
