//! The live routes of a season the archive has closed (docs/archival.md): from its freeze on, a
//! read of it through `top`, a user's standing, `ranks`, `distribution` or a cursor page answers
//! 410 `period_closed`, never 200 with an empty board (its set renamed to the frozen one, then
//! freed), whether the archive has stored it yet (the seasons route then serves it) or not; on a
//! sharded board, as soon as one shard is frozen. Seasons not closed read as before.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use standings::archive::job::Status;
use standings::archive::table::Shard;
use standings::domain::config::Config;
use standings_tests::{ArchiveHarness, TestApp, at, season_members, seed_board};

const SEASON: &str = "2026-10";
const AT: &str = "2026-10-15";
const POINTS_USERS: [&str; 2] = ["u000001", "u000002"];

/// The cursor of the season's first page of 3 on `board`, the season read at the local date `at`.
pub(crate) async fn cursor(app: &TestApp, board: &str, at: &str) -> String {
    let (status, body) = app.get(&format!("/v1/boards/{board}/top?period=season&at={at}&limit=3")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["next_cursor"].as_str().expect("a next page").to_owned()
}

/// Every live read of the season at the local date `at` on `board` (a page after `cursor`
/// among them; `users` the standings and ranks asked): each route's status and body.
pub(crate) async fn live_reads(app: &TestApp, board: &str, at: &str, users: [&str; 2], cursor: &str) -> Vec<(String, StatusCode, Value)> {
    let query = format!("period=season&at={at}");
    let mut reads = Vec::new();
    for path in [
        format!("/v1/boards/{board}/top?{query}&limit=3"),
        format!("/v1/boards/{board}/top?{query}&limit=3&cursor={cursor}"),
        format!("/v1/boards/{board}/users/{}?{query}&around=2", users[0]),
        format!("/v1/boards/{board}/users/{}?{query}&around=2&rank_mode=competition", users[1]),
        format!("/v1/boards/{board}/distribution?{query}&buckets=3"),
    ] {
        let (status, body) = app.get(&path).await;
        reads.push((path, status, body));
    }
    let body = json!({"user_ids": users, "period": "season", "at": at});
    let (status, value) = app.call_query(Method::POST, &format!("/v1/boards/{board}/ranks"), body.to_string()).await;
    reads.push(("ranks".into(), status, value));
    reads
}

pub(crate) fn assert_all_ok(reads: &[(String, StatusCode, Value)], members: u64) {
    for (path, status, body) in reads {
        assert_eq!(*status, StatusCode::OK, "{path}: {body}");
        if body.get("total").is_some() && !path.contains("cursor") {
            assert_eq!(body["total"], json!(members), "{path}: {body}");
        }
    }
}

pub(crate) fn assert_all_closed(reads: &[(String, StatusCode, Value)], board: &str, season: &str) {
    for (path, status, body) in reads {
        assert_eq!((*status, body["error"]["code"].as_str()), (StatusCode::GONE, Some("period_closed")), "{path}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("/v1/boards/{board}/seasons/{season}")), "{path}: names the archive's route: {message}");
    }
}

#[tokio::test]
async fn a_season_frozen_for_archiving_answers_period_closed_on_every_live_route_never_an_empty_board() {
    let harness = ArchiveHarness::new().await;
    let season = ArchiveHarness::season(SEASON);
    harness.seed(SEASON, &season_members(5, &season)).await;
    let app = harness.app().await;
    app.set_now(at("2026-11-01T01:00:00+08:00"));
    let cursor = cursor(&app, "points", AT).await;
    assert_all_ok(&live_reads(&app, "points", AT, POINTS_USERS, &cursor).await, 5);

    let mut conn = harness.redis.clone();
    let board = harness.keys.layout("points", 1).all().remove(0);
    let frozen = standings::archive::freeze::freeze(&mut conn, &board, &season, None).await.unwrap();
    assert_eq!((frozen.members, frozen.present), (5, true));
    assert_all_closed(&live_reads(&app, "points", AT, POINTS_USERS, &cursor).await, "points", SEASON);
    let (status, body) = app.get(&format!("/v1/boards/points/seasons/{SEASON}/top?limit=3")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("season_not_archived")), "{body}");

    let report = harness.archiver(harness.table.clone()).archive_season("points", SEASON, Shard::WHOLE, at("2100-01-01T00:00:00Z")).await;
    assert_eq!(report.unwrap().status, Status::Complete);
    assert_all_closed(&live_reads(&app, "points", AT, POINTS_USERS, &cursor).await, "points", SEASON);
    let (status, body) = app.get(&format!("/v1/boards/points/seasons/{SEASON}/top?limit=3")).await;
    assert_eq!((status, body["total"].as_u64()), (StatusCode::OK, Some(5)), "{body}");

    // The season running now, and an ended one the archive has not closed, read as before.
    harness.seed("2026-09", &season_members(2, &ArchiveHarness::season("2026-09"))).await;
    let (status, body) = app.get("/v1/boards/points/top?period=season&at=2026-09-15").await;
    assert_eq!((status, body["total"].as_u64()), (StatusCode::OK, Some(2)), "{body}");
    let (status, body) = app.get("/v1/boards/points/top?period=season").await;
    assert_eq!((status, body["total"].as_u64()), (StatusCode::OK, Some(0)), "{body}");
}

#[tokio::test]
async fn a_sharded_season_answers_period_closed_once_one_shard_is_frozen() {
    const SHARDS: u32 = 4;
    let config = format!(
        "[[boards]]\nname = \"wide\"\nkind = \"cumulative\"\ntimezone = \"Asia/Shanghai\"\nperiods = [\"season\"]\ntop = 10\narchive = true\nshards = {SHARDS}\nrules = [{{ action = \"a\", points = 1, scope = \"none\" }}]\n"
    );
    let harness = ArchiveHarness::with_config(Config::parse(&config).unwrap()).await;
    let season = ArchiveHarness::season(SEASON);
    let members = season_members(40, &season);
    let layout = harness.keys.layout("wide", SHARDS);
    for shard in 0..SHARDS as usize {
        let mine: Vec<_> = members.iter().filter(|(user, ..)| layout.shard_of(user) == shard).cloned().collect();
        assert!(!mine.is_empty(), "every shard holds some of the season");
        seed_board(&layout.shard(shard).period(&season), &mine).await;
    }
    let app = harness.app().await;
    app.set_now(at("2026-11-01T01:00:00+08:00"));
    let cursor = cursor(&app, "wide", AT).await;
    assert_all_ok(&live_reads(&app, "wide", AT, POINTS_USERS, &cursor).await, 40);

    // An archive run cut off after its first shard's freeze.
    let mut conn = harness.redis.clone();
    let frozen = standings::archive::freeze::freeze(&mut conn, &layout.shard(2), &season, None).await.unwrap();
    assert!(frozen.present && frozen.members > 0, "{frozen:?}");
    assert_all_closed(&live_reads(&app, "wide", AT, POINTS_USERS, &cursor).await, "wide", SEASON);
}

/// A runtime board deleted (docs/runtime-boards.md): the archive's end freezes the season it was
/// deleted in before that season ends, while its reads go on; from that freeze its live reads are
/// closed too, never an empty board.
#[tokio::test]
async fn a_deleted_runtime_boards_season_frozen_by_its_end_answers_period_closed_before_the_season_ends() {
    let harness = ArchiveHarness::new().await;
    let app = harness.app().await;
    let definition = json!({"kind": "scores", "timezone": "UTC", "periods": ["season", "all"], "top": 10, "keep": "best", "archive": true});
    assert_eq!(app.define("spring-cup", &definition).await.0, StatusCode::CREATED);
    for (id, user, score) in [("s1", "ann", 40), ("s2", "bo", 70)] {
        let (status, body) = app.post("/v1/boards/spring-cup/scores", &json!({"event_id": id, "user_id": user, "score": score})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, _) = app.call(Method::DELETE, "/v1/admin/boards/spring-cup?reason=over", "", standings_tests::ADMIN).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, top) = app.get("/v1/boards/spring-cup/top?period=season").await;
    assert_eq!((status, top["total"].as_u64()), (StatusCode::OK, Some(2)), "reads go on until the end is done: {top}");

    let season = standings::domain::period::Period::containing(standings::domain::period::PeriodKind::Season, app.now(), chrono_tz::UTC);
    let keys = app.keys.layout("spring-cup", 1).all().remove(0);
    let frozen = standings::archive::freeze::freeze(&mut harness.redis.clone(), &keys, &season, None).await.unwrap();
    assert_eq!(frozen.members, 2);
    for path in ["/v1/boards/spring-cup/top?period=season", "/v1/boards/spring-cup/users/ann?period=season"] {
        let (status, body) = app.get(path).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::GONE, Some("period_closed")), "{path}: {body}");
    }
    let (status, body) = app.get("/v1/boards/spring-cup/top?period=all").await;
    assert_eq!((status, body["total"].as_u64()), (StatusCode::OK, Some(2)), "all time is no season: {body}");
}
