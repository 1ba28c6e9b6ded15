//! Boards created at runtime (`PUT/GET/DELETE /v1/admin/boards/{board}`, docs/runtime-boards.md):
//! the definition's life, every route on a runtime board, other warm instances, the limit.

use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use standings::domain::period::{Period, PeriodKind};
use standings_tests::runtime::call_on;
use standings_tests::{ADMIN, Caller, TestApp, WRITER, spawn_ingest};

fn cup() -> Value {
    json!({"kind": "scores", "timezone": "UTC", "periods": ["week", "all"], "top": 10, "keep": "best", "statements": true})
}

fn quiz() -> Value {
    json!({"kind": "cumulative", "timezone": "UTC", "periods": ["day", "all"], "top": 10,
        "rules": [{"action": "quiz_passed", "points": 7, "scope": "none"}]})
}

async fn definitions(app: &TestApp) -> Vec<String> {
    redis::cmd("HKEYS").arg(app.keys.catalog().definitions()).query_async(&mut app.redis.clone()).await.unwrap()
}

#[tokio::test]
async fn a_definition_is_created_once_read_back_and_never_silently_replaced() {
    let app = spawn_ingest().await;
    let (status, created) = app.define("cup-2027", &cup()).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!((created["board"].as_str(), created["state"].as_str()), (Some("cup-2027"), Some("active")));
    assert_eq!(created["definition"]["keep"], "best");
    let (again, same) = app.define("cup-2027", &cup()).await;
    assert_eq!((again, &same), (StatusCode::OK, &created), "the same definition again is the same answer");
    let (status, read) = app.call(Method::GET, "/v1/admin/boards/cup-2027", "", ADMIN).await;
    assert_eq!((status, &read), (StatusCode::OK, &created));

    let mut other = cup();
    other["top"] = json!(20);
    let (status, body) = app.define("cup-2027", &other).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("board_exists")), "{body}");
    let (status, body) = app.define("points", &cup()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("board_exists")), "a declared name: {body}");

    let mut bad = cup();
    bad["top"] = json!(0);
    let (status, body) = app.define("cup-2028", &bad).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_board")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().starts_with("top:"), "the field is named: {body}");
    let (status, body) = app.define("Cup!", &cup()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = app.define("cup-2029", &json!({"kind": "scores", "colour": "red"})).await;
    assert!(status == StatusCode::BAD_REQUEST && body["error"]["message"].as_str().unwrap().contains("colour"), "{body}");
    let (status, body) = app.call(Method::GET, "/v1/admin/boards/nope", "", ADMIN).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("unknown_board")));

    for caller in [Caller::Anonymous, WRITER] {
        let (status, _) = app.call(Method::PUT, "/v1/admin/boards/cup-2030", cup().to_string(), caller).await;
        assert!(status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN, "{status}");
    }
    assert_eq!(definitions(&app).await, vec!["cup-2027"], "only the one created is stored");

    // A name holding a board's state (once declared, since removed from the file) is taken.
    let guard = app.keys.board("old-cup").guard();
    let _: () = redis::cmd("HSET").arg(&guard).arg("born").arg(1).query_async(&mut app.redis.clone()).await.unwrap();
    let (status, body) = app.define("old-cup", &cup()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("board_exists")), "{body}");
}

#[tokio::test]
async fn a_runtime_board_serves_the_routes_a_declared_board_does() {
    let app = spawn_ingest().await.reading_runtime_boards();
    assert_eq!(app.define("cup-2027", &cup()).await.0, StatusCode::CREATED);
    assert_eq!(app.define("quiz", &quiz()).await.0, StatusCode::CREATED);

    // Writes: scores, a batch of them, events and a batch of events, a correction.
    let (status, body) = app.post("/v1/boards/cup-2027/scores", &json!({"event_id": "s1", "user_id": "ann", "score": 40})).await;
    assert_eq!((status, body["periods"][0]["rank"].as_u64()), (StatusCode::OK, Some(1)), "{body}");
    let batch = json!({"scores": [{"event_id": "s2", "user_id": "bo", "score": 50}, {"event_id": "s3", "user_id": "ann", "score": 45}]});
    let (status, body) = app.post("/v1/boards/cup-2027/scores:batch", &batch).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app.event(json!({"event_id": "q1", "user_id": "ann", "action": "quiz_passed"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let events = json!({"events": [{"event_id": "q2", "user_id": "bo", "action": "quiz_passed"}, {"event_id": "q3", "user_id": "bo", "action": "quiz_passed"}]});
    assert_eq!(app.post("/v1/events:batch", &events).await.0, StatusCode::OK);
    let correction = json!({"correction_id": "c1", "reason": "a judge's call", "delta": 3});
    let (status, body) = app.call(Method::POST, "/v1/admin/boards/quiz/users/ann/corrections", correction.to_string(), ADMIN).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // State: the sorted sets hold exactly what was written.
    let week = Period::containing(PeriodKind::Week(chrono::Weekday::Mon), app.now(), chrono_tz::UTC);
    assert_eq!(app.ranking("cup-2027", &week).await, vec!["bo", "ann"]);
    let all = Period::containing(PeriodKind::All, app.now(), chrono_tz::UTC);
    assert_eq!((app.points("quiz", all.clone(), "ann").await, app.points("quiz", all, "bo").await), (Some(10), Some(14)));

    // Reads.
    let (status, top) = app.get("/v1/boards/cup-2027/top?period=week").await;
    assert_eq!(status, StatusCode::OK, "{top}");
    let entries: Vec<(&str, i64)> =
        top["entries"].as_array().unwrap().iter().map(|e| (e["user_id"].as_str().unwrap(), e["score"].as_i64().unwrap())).collect();
    assert_eq!(entries, vec![("bo", 50), ("ann", 45)]);
    let (status, me) = app.get("/v1/boards/quiz/users/ann?period=all").await;
    assert_eq!((status, me["rank"].as_u64(), me["score"].as_i64()), (StatusCode::OK, Some(2), Some(10)), "{me}");
    let (status, statement) = app.get("/v1/boards/cup-2027/users/ann/statement?period=week").await;
    assert_eq!(status, StatusCode::OK, "{statement}");
    let (status, distribution) = app.get("/v1/boards/quiz/distribution?period=all&buckets=2").await;
    assert_eq!((status, distribution["total"].as_u64()), (StatusCode::OK, Some(2)), "{distribution}");
    let (status, ranks) =
        app.call_query(Method::POST, "/v1/boards/quiz/ranks", json!({"user_ids": ["bo", "cy"], "period": "all"}).to_string()).await;
    assert_eq!(status, StatusCode::OK, "{ranks}");
    let (status, catalog) = app.get("/v1/boards").await;
    let names: Vec<&str> = catalog["boards"].as_array().unwrap().iter().filter_map(|b| b["name"].as_str()).collect();
    assert!(status == StatusCode::OK && names.contains(&"cup-2027") && names.contains(&"quiz") && names.contains(&"points"), "{catalog}");
}

#[tokio::test]
async fn a_board_created_on_one_instance_is_served_by_every_warm_instance_within_ten_seconds() {
    let app = spawn_ingest().await;
    // Two warm containers that served requests before the board existed.
    let writer = app.ingest_instance(standings::services::catalog::DEFAULT_REFRESH, 10_000);
    let reader = app.query_instance(standings::services::catalog::DEFAULT_REFRESH);
    let score = |id: &str| json!({"event_id": id, "user_id": "ann", "score": 40});
    let (status, _) = call_on(&writer, Method::POST, "/v1/boards/cup-2027/scores", &score("s0"), WRITER).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "not created yet");
    assert_eq!(call_on(&reader, Method::GET, "/v1/boards/cup-2027/top", &Value::Null, Caller::Anonymous).await.0, StatusCode::NOT_FOUND);

    let created = Instant::now();
    assert_eq!(app.define("cup-2027", &cup()).await.0, StatusCode::CREATED);
    let (mut written, mut read) = (None, None);
    let mut attempt = 0;
    while (written.is_none() || read.is_none()) && created.elapsed() < Duration::from_secs(12) {
        attempt += 1;
        if written.is_none()
            && call_on(&writer, Method::POST, "/v1/boards/cup-2027/scores", &score(&format!("s{attempt}")), WRITER).await.0
                == StatusCode::OK
        {
            written = Some(created.elapsed());
        }
        if read.is_none()
            && call_on(&reader, Method::GET, "/v1/boards/cup-2027/top", &Value::Null, Caller::Anonymous).await.0 == StatusCode::OK
        {
            read = Some(created.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (written, read) = (written.expect("the writer serves the board"), read.expect("the reader serves the board"));
    assert!(written < Duration::from_secs(10) && read < Duration::from_secs(10), "served after {written:?} and {read:?}");
}

/// A request naming a board the catalog defines and a warm function's boards lack (created
/// since it read them, or the catalog restored since it read it lost) is served at once, not a
/// 404 until the refresh (found by the simulation: a function started while Redis was lost).
/// (A name it was itself answered 404 for is remembered for the refresh: the test above.)
#[tokio::test]
async fn a_board_the_catalog_defines_is_served_by_a_warm_instance_before_its_refresh() {
    let app = spawn_ingest().await;
    let writer = app.ingest_instance(Duration::from_secs(3600), 10_000);
    let reader = app.query_instance(Duration::from_secs(3600));
    let score = json!({"event_id": "s1", "user_id": "ann", "score": 40});
    assert_eq!(call_on(&writer, Method::POST, "/v1/boards/high-scores/scores", &score, WRITER).await.0, StatusCode::OK, "warm");
    assert_eq!(call_on(&reader, Method::GET, "/v1/boards/high-scores/top", &Value::Null, Caller::Anonymous).await.0, StatusCode::OK);
    assert_eq!(app.define("cup-2027", &cup()).await.0, StatusCode::CREATED);
    let (status, body) = call_on(&writer, Method::POST, "/v1/boards/cup-2027/scores", &score, WRITER).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, top) = call_on(&reader, Method::GET, "/v1/boards/cup-2027/top", &Value::Null, Caller::Anonymous).await;
    assert_eq!((status, top["entries"][0]["score"].as_i64()), (StatusCode::OK, Some(40)), "{top}");
}

#[tokio::test]
async fn a_warm_instance_asks_nothing_for_the_catalog_between_refreshes() {
    let app = spawn_ingest().await;
    assert_eq!(app.define("cup-2027", &cup()).await.0, StatusCode::CREATED);
    let writer = app.ingest_instance(Duration::from_secs(3600), 10_000);
    let score = |id: &str| json!({"event_id": id, "user_id": "ann", "score": 40});
    assert_eq!(call_on(&writer, Method::POST, "/v1/boards/cup-2027/scores", &score("warm"), WRITER).await.0, StatusCode::OK);
    let before = app.store.round_trips();
    for i in 0..5 {
        assert_eq!(call_on(&writer, Method::POST, "/v1/boards/cup-2027/scores", &score(&format!("s{i}")), WRITER).await.0, StatusCode::OK);
    }
    assert_eq!(app.store.round_trips() - before, 5, "one round trip per write: the definition comes from the cache");
}

#[tokio::test]
async fn the_deployment_holds_at_most_its_limit_of_runtime_boards_even_when_created_at_once() {
    let app = spawn_ingest().await;
    let instance = app.ingest_instance(Duration::ZERO, 10);
    let puts = (0..40).map(|i| {
        let instance = instance.clone();
        async move { call_on(&instance, Method::PUT, &format!("/v1/admin/boards/cup-{i}"), &cup(), ADMIN).await }
    });
    let answers = futures::future::join_all(puts).await;
    let created = answers.iter().filter(|(status, _)| *status == StatusCode::CREATED).count();
    let refused: Vec<&Value> =
        answers.iter().filter(|(status, _)| *status == StatusCode::UNPROCESSABLE_ENTITY).map(|(_, body)| body).collect();
    assert_eq!((created, refused.len()), (10, 30), "{answers:?}");
    assert!(refused.iter().all(|body| body["error"]["code"] == "board_limit"), "{refused:?}");
    assert_eq!(definitions(&app).await.len(), 10);
    // The same definition sent by many at once is created once.
    let same = (0..20).map(|_| {
        let instance = app.ingest_instance(Duration::ZERO, 100);
        async move { call_on(&instance, Method::PUT, "/v1/admin/boards/final", &cup(), ADMIN).await.0 }
    });
    let statuses = futures::future::join_all(same).await;
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::CREATED).count(), 1, "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == StatusCode::CREATED || *s == StatusCode::OK), "{statuses:?}");
}

#[tokio::test]
async fn a_catalog_key_of_the_wrong_type_fails_the_change_with_nothing_written() {
    let app = spawn_ingest().await;
    let catalog = app.keys.catalog();
    for (key, kind) in [(catalog.ending(), "hash"), (catalog.catalog_version(), "string"), (catalog.journal(), "stream")] {
        let _: () = redis::cmd("SADD").arg(&key).arg("x").query_async(&mut app.redis.clone()).await.unwrap();
        let before = app.keyspace().await;
        let (status, body) = app.define("cup-2027", &cup()).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::INTERNAL_SERVER_ERROR, Some("internal")), "{key} not a {kind}");
        assert_eq!(app.keyspace().await, before, "{key}: nothing written");
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut app.redis.clone()).await.unwrap();
    }
    assert_eq!(app.define("cup-2027", &cup()).await.0, StatusCode::CREATED);
}

async fn audit(app: &TestApp, board: String) -> Vec<(String, String)> {
    let (status, audit) = app.call(Method::GET, &format!("/v1/admin/audit?board={board}&limit=10"), "", ADMIN).await;
    assert_eq!(status, StatusCode::OK, "{audit}");
    let entries = audit["entries"].as_array().unwrap().clone();
    entries.iter().map(|e| (e["kind"].as_str().unwrap().to_owned(), e["user_id"].as_str().unwrap().to_owned())).collect()
}

/// A user banned before a board was defined is banned on it too (docs/moderation.md): a
/// runtime board and a tournament refuse their writes and joins, carried as one ban each (the
/// audit names it), and defining the same again carries nothing more. Found by the simulation
/// (a banned player scored in a tournament created after the ban).
#[tokio::test]
async fn bans_made_before_a_board_was_defined_hold_on_it() {
    let app = spawn_ingest().await;
    let (status, _) = app.call(Method::POST, "/v1/admin/users/mallory/ban", "", ADMIN).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(app.define("cup-2027", &cup()).await.0, StatusCode::CREATED);
    let start = app.now() - chrono::Duration::minutes(1);
    let tournament = standings_tests::tournament::cup(start, 2, json!({"join_required": false}));
    let (status, body) = app.call(Method::PUT, "/v1/admin/tournaments/friday", tournament.to_string(), ADMIN).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let (status, body) = app.post("/v1/boards/cup-2027/scores", &json!({"event_id": "s1", "user_id": "mallory", "score": 9})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("user_banned")), "{body}");
    let play = json!({"event_id": "s2", "user_id": "mallory", "score": 9});
    let (status, body) = app.post("/v1/tournaments/friday/scores", &play).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("user_banned")), "{body}");
    let (status, body) = app.post("/v1/tournaments/friday/join", &json!({"user_id": "mallory"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("user_banned")), "{body}");
    assert_eq!(app.post("/v1/tournaments/friday/join", &json!({"user_id": "ann"})).await.0, StatusCode::OK, "others play");

    let carried = |board: &str| audit(&app, board.to_owned());
    for board in ["cup-2027", "friday"] {
        assert_eq!(carried(board).await, vec![("ban".to_owned(), "mallory".to_owned())], "{board}: one ban, carried");
    }
    assert_eq!(app.define("cup-2027", &cup()).await.0, StatusCode::OK);
    assert_eq!(app.call(Method::PUT, "/v1/admin/tournaments/friday", tournament.to_string(), ADMIN).await.0, StatusCode::OK);
    assert_eq!(carried("cup-2027").await.len(), 1, "defined again: nothing carried twice");
    assert_eq!(carried("friday").await.len(), 1, "defined again: nothing carried twice");
    // An unban lifts it there too.
    assert_eq!(app.call(Method::DELETE, "/v1/admin/users/mallory/ban", "", ADMIN).await.0, StatusCode::OK);
    let (status, body) = app.post("/v1/boards/cup-2027/scores", &json!({"event_id": "s3", "user_id": "mallory", "score": 9})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// A ban taken by a warm function whose catalog predates a board reaches that board too: the
/// ban is recorded for the deployment, then applied to every board as of a fresh catalog. And a
/// deployment whose bans predate the record (an upgrade) carries them all the same: the first
/// carry records what the boards' guards hold.
#[tokio::test]
async fn a_ban_through_a_stale_function_and_bans_from_before_the_record_hold_on_new_boards() {
    let app = spawn_ingest().await;
    let stale = app.ingest_instance(standings::services::catalog::DEFAULT_REFRESH, 10_000);
    let (status, _) = call_on(&stale, Method::GET, "/v1/admin/audit?board=points", &Value::Null, ADMIN).await;
    assert_eq!(status, StatusCode::OK, "warm before the board exists");
    assert_eq!(app.define("cup-2027", &cup()).await.0, StatusCode::CREATED);
    let (status, body) = call_on(&stale, Method::POST, "/v1/admin/users/mallory/ban", &Value::Null, ADMIN).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["boards"].as_array().unwrap().iter().any(|b| b == "cup-2027"), "the new board is among the banned: {body}");
    let (status, body) = app.post("/v1/boards/cup-2027/scores", &json!({"event_id": "s1", "user_id": "mallory", "score": 9})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("user_banned")), "{body}");

    // An upgraded deployment: its bans are on the boards, its record of them not written yet.
    assert_eq!(app.call(Method::POST, "/v1/admin/users/trudy/ban", "", ADMIN).await.0, StatusCode::OK);
    let _: () = redis::cmd("DEL").arg(app.keys.catalog().banned_users()).query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(app.define("cup-2028", &cup()).await.0, StatusCode::CREATED);
    for user in ["mallory", "trudy"] {
        let (status, body) =
            app.post("/v1/boards/cup-2028/scores", &json!({"event_id": format!("s-{user}"), "user_id": user, "score": 9})).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("user_banned")), "{user}: {body}");
    }
}

/// While the catalog is lost (every key gone, its guard too), a ban records nothing: 503
/// `board_restoring`, no record of bans and no journal line written (its restore would take a
/// new record for the whole one).
#[tokio::test]
async fn a_ban_on_a_lost_catalog_records_nothing() {
    let app = standings_tests::journal::spawn_journaled(standings::domain::config::Config::default_boards()).await;
    let mut keys = app.written_keys().await;
    keys.push(app.keys.catalog().guard());
    for key in keys {
        let _: () = redis::cmd("DEL").arg(key).query_async(&mut app.redis.clone()).await.unwrap();
    }
    let (status, body) = app.call(Method::POST, "/v1/admin/users/mallory/ban", "", ADMIN).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{body}");
    let catalog = app.keys.catalog();
    let written: Vec<String> =
        app.written_keys().await.into_iter().filter(|k| *k == catalog.banned_users() || *k == catalog.journal()).collect();
    assert!(written.is_empty(), "nothing recorded: {written:?}");
}

/// A deployment without a board of users (only decaying boards) has no ban to record: a ban
/// answers 200 on no board, as before the record existed (not 503 for want of an intact guard).
#[tokio::test]
async fn a_ban_on_a_deployment_without_boards_of_users_answers_200() {
    let config = "[[boards]]\nname = \"hot-only\"\nkind = \"decaying\"\ntimezone = \"UTC\"\ntop = 10\ndecay = { mode = \"window\", window_hours = 24, weights = \"exponential\", half_life_hours = 6 }\n";
    let app = standings_tests::journal::spawn_journaled(standings::domain::config::Config::parse(config).unwrap()).await;
    let (status, body) = app.call(Method::POST, "/v1/admin/users/mallory/ban", "", ADMIN).await;
    assert_eq!((status, &body["boards"]), (StatusCode::OK, &json!([])), "{body}");
}
