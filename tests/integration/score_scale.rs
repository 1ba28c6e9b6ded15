//! A score board's scale (docs/boards.md#score-boards): the shipped `high-scores` orders all-time ties
//! to the second, and a board whose `max_score` changed while it holds scores is written and read
//! at the scale it holds until a move re-encodes it, never misread; a restore after a loss records
//! the scale its data was written in.

use axum::http::Method;
use chrono::{Duration, Utc};
use journal::{Restorer, S3Objects};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::journal::{drain_to_new_bucket, spawn_journaled, spawn_journaled_on};
use standings_tests::{ADMIN, TestApp, at, spawn_ingest_with};

fn game(extra: &str) -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"best\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\n{extra}"
    ))
    .unwrap()
}

async fn submit(app: &TestApp, board: &str, event: &str, user: &str, score: i64) -> (u16, Value) {
    let (status, reply) =
        app.post(&format!("/v1/boards/{board}/scores"), &json!({"event_id": event, "user_id": user, "score": score})).await;
    (status.as_u16(), reply)
}

fn top_ids(top: &Value) -> Vec<String> {
    top["entries"].as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn the_shipped_high_scores_orders_all_time_ties_to_the_second() {
    let app = spawn_ingest_with(Config::default_boards()).await;
    // 2026-11-22T09:55:12Z starts a 256-second step from 2020: within it the old layout tied.
    app.set_now(at("2026-11-22T09:55:12Z"));
    assert_eq!(submit(&app, "high-scores", "a", "amy", 100).await.0, 200);
    app.set_now(at("2026-11-22T09:55:13Z"));
    assert_eq!(submit(&app, "high-scores", "z", "zed", 100).await.0, 200);
    let (_, top) = app.get("/v1/boards/high-scores/top?period=all").await;
    assert_eq!(top_ids(&top), ["amy", "zed"], "amy reached 100 a second before zed: {top}");
}

/// A deploy on another `max_score` than the board's scores are held at: a score within the held
/// one is written at it (read back by this deploy and by one on the held scale, beside amy's
/// 100); a score only the configured one takes waits (503 `board_scale_changed`, naming both
/// values, nothing written) for the move that re-encodes the board (issue 58).
async fn assert_held(app: &TestApp, other: &TestApp, recorded: i64, configured: i64) {
    assert_eq!(submit(app, "game", "late", "bob", 5).await.0, 200);
    if configured > recorded {
        let state = app.keyspace().await;
        let (status, reply) = submit(app, "game", "high", "cyd", recorded + 1).await;
        assert_eq!((status, reply["error"]["code"].as_str()), (503, Some("board_scale_changed")), "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains(&recorded.to_string()) && message.contains(&configured.to_string()), "{message}");
        assert_eq!(app.keyspace().await, state, "a write that waits wrote nothing");
    }
    // Neither the deployment's first ban (its record seeded from every board's guard) nor the
    // audit log reads a composite: both answer as on any board (the simulation found the
    // seed's 503 refusing a tournament's definition).
    let (status, reply) = app.call(Method::POST, "/v1/admin/users/eve/ban", "{}".to_owned(), ADMIN).await;
    assert_eq!(status, 200, "{reply}");
    let (status, audit) = app.call(Method::GET, "/v1/admin/audit?board=game", String::new(), ADMIN).await;
    assert_eq!((status.as_u16(), &audit["entries"][0]["user_id"]), (200, &json!("eve")), "{audit}");
    for reader in [app, other] {
        let (status, read) = reader.get("/v1/boards/game/top?period=all").await;
        let scores: Vec<(&Value, &Value)> = read["entries"].as_array().unwrap().iter().map(|e| (&e["user_id"], &e["score"])).collect();
        assert_eq!((status.as_u16(), scores), (200, vec![(&json!("amy"), &json!(100)), (&json!("bob"), &json!(5))]), "{read}");
        let (status, read) = reader.get("/v1/boards/game/users/amy?period=all").await;
        assert_eq!((status.as_u16(), &read["rank"], &read["score"]), (200, &json!(1), &json!(100)), "{read}");
    }
}

#[tokio::test]
async fn a_max_score_changed_on_a_board_holding_scores_writes_at_the_held_one() {
    for (before, after, recorded, configured) in
        [("", "max_score = 4194303", 1_073_741_823, 4_194_303), ("max_score = 4194303", "", 4_194_303, 1_073_741_823)]
    {
        let old = spawn_journaled(game(before)).await;
        assert_eq!(submit(&old, "game", "a", "amy", 100).await.0, 200);
        let new = spawn_journaled_on(game(after), old.keys.clone()).await;
        assert_held(&new, &old, recorded, configured).await;
        let mut conn = old.redis.clone();
        let scale: Option<i64> = redis::cmd("GET").arg(old.keys.board_scale("game")).query_async(&mut conn).await.unwrap();
        assert!(scale.is_none_or(|scale| scale == recorded), "the held scale stays recorded: {scale:?}");
        // The old configuration reads and writes as before.
        assert_eq!(submit(&old, "game", "b", "dan", 3).await.0, 200);
    }
}

#[tokio::test]
async fn a_new_board_takes_its_configured_scale_and_a_restore_keeps_it() {
    let app = spawn_journaled(game("max_score = 4194303")).await;
    assert_eq!(submit(&app, "game", "a", "amy", 100).await.0, 200);
    let state = app.keyspace().await;
    let (client, bucket) = drain_to_new_bucket(&app, 4).await;
    // Every key of the prefix lost, the scale's record with the rest.
    let mut conn = app.redis.clone();
    for (key, ..) in app.keyspace().await {
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.unwrap();
    }
    let restorer = Restorer::new(app.config.clone(), app.keys.clone(), app.store.clone(), S3Objects::new(client, &bucket));
    restorer.restore(None, Utc::now() + Duration::minutes(5)).await.expect("the restore runs");
    let names = |state: Vec<(String, Vec<u8>, i64)>| -> Vec<String> {
        state.into_iter().map(|(key, ..)| key).filter(|key| !key.ends_with(":journal")).collect()
    };
    let (restored, before) = (names(app.keyspace().await), names(state));
    assert_eq!(restored, before, "the same keys, the scale's record included");
    assert_eq!(submit(&app, "game", "b", "bob", 5).await.0, 200, "the restored board takes writes in its scale");
    let other = spawn_journaled_on(game(""), app.keys.clone()).await;
    let (status, reply) = submit(&other, "game", "high", "cyd", 4_194_304).await;
    assert_eq!((status, reply["error"]["code"].as_str()), (503, Some("board_scale_changed")), "held at the restored scale: {reply}");
}

#[tokio::test]
async fn a_sharded_board_writes_at_its_held_max_score_too() {
    let sharded = |extra: &str| game(&format!("shards = 4\n{extra}"));
    let old = spawn_journaled(sharded("max_score = 4194303")).await;
    for (i, user) in ["amy", "bob", "cyd", "dan"].iter().enumerate() {
        assert_eq!(submit(&old, "game", &format!("e{i}"), user, 100).await.0, 200);
    }
    let new = spawn_journaled_on(sharded(""), old.keys.clone()).await;
    assert_eq!(submit(&new, "game", "late", "eve", 5).await.0, 200);
    let (status, reply) = submit(&new, "game", "high", "fay", 4_194_304).await;
    assert_eq!((status, reply["error"]["code"].as_str()), (503, Some("board_scale_changed")), "{reply}");
    let (status, top) = new.get("/v1/boards/game/top?period=all").await;
    let scores: Vec<&Value> = top["entries"].as_array().into_iter().flatten().map(|e| &e["score"]).collect();
    assert_eq!(
        (status.as_u16(), scores),
        (200, [vec![&json!(100); 4], vec![&json!(5)]].concat()),
        "read at the scale held, every shard: {top}"
    );
}

/// A restore brings back the scale the lines were written in, not the configuration's: a
/// board written at the default and restored under `max_score = 4194303` is read and written at
/// the default, and the other way round (where a score above 4,194,303 waits).
#[tokio::test]
async fn a_restore_records_the_scale_the_lines_were_written_in() {
    for (written, restored) in [("", "max_score = 4194303"), ("max_score = 4194303", "")] {
        let app = spawn_journaled(game(written)).await;
        assert_eq!(submit(&app, "game", "a", "amy", 100).await.0, 200);
        let (client, bucket) = drain_to_new_bucket(&app, 4).await;
        let mut conn = app.redis.clone();
        for (key, ..) in app.keyspace().await {
            let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.unwrap();
        }
        let other = spawn_journaled_on(game(restored), app.keys.clone()).await;
        let restorer = Restorer::new(other.config.clone(), other.keys.clone(), other.store.clone(), S3Objects::new(client, &bucket));
        restorer.restore(None, Utc::now() + Duration::minutes(5)).await.expect("the restore runs");
        let mut conn = other.redis.clone();
        let scale: Option<i64> = redis::cmd("GET").arg(other.keys.board_scale("game")).query_async(&mut conn).await.unwrap();
        let held = if written.is_empty() { 1_073_741_823 } else { 4_194_303 };
        assert!(scale.is_none_or(|scale| scale == held), "{written:?}: the lines' scale recorded: {scale:?}");
        assert_eq!(submit(&other, "game", "b", "bob", 5).await.0, 200, "{written:?}");
        for reader in [&app, &other] {
            let (_, top) = reader.get("/v1/boards/game/top?period=all").await;
            let scores: Vec<&Value> = top["entries"].as_array().unwrap().iter().map(|e| &e["score"]).collect();
            assert_eq!(scores, [&json!(100), &json!(5)], "{written:?}: read as written: {top}");
        }
    }
}

/// A board's scale record lost alone (a bad `DEL`, an eviction the operator allowed: the record
/// is read once a probe, the guard by every write) while its scores stay: the guard's copy of it
/// (`scale`) says the scale they are in, so a deploy that probes it next writes and reads them
/// at it and records it again, never at the default as a board that never recorded one.
#[tokio::test]
async fn a_scale_record_lost_alone_is_recorded_again_from_the_guards_copy() {
    let app = spawn_journaled(game("max_score = 4194303")).await;
    assert_eq!(submit(&app, "game", "a", "amy", 100).await.0, 200);
    let mut conn = app.redis.clone();
    let guard = app.keys.board("game").guard();
    let copy: Option<i64> = redis::cmd("HGET").arg(&guard).arg("scale").query_async(&mut conn).await.unwrap();
    assert_eq!(copy, Some(4_194_303), "the guard's copy, written with the record");
    let _: () = redis::cmd("DEL").arg(app.keys.board_scale("game")).query_async(&mut conn).await.unwrap();
    // What a move or a verify takes for the held scale (`held_scale`) reads the copy too.
    let board = app.config.board("game").unwrap();
    let held = standings::redis::layout::held_scale(&mut conn, &app.keys, board, app.now()).await.unwrap();
    assert_eq!(held, Some(4_194_303));
    // Deploys started after the loss (their probes fresh): one on the board's scale, one on
    // the default. A read records nothing, and reads the scores as held.
    let other = spawn_journaled_on(game(""), app.keys.clone()).await;
    let (status, read) = other.get("/v1/boards/game/users/amy?period=all").await;
    assert_eq!((status.as_u16(), &read["score"]), (200, &json!(100)), "{read}");
    let same = spawn_journaled_on(game("max_score = 4194303"), app.keys.clone()).await;
    assert_eq!(submit(&same, "game", "b", "bob", 5).await.0, 200);
    let scale: Option<i64> = redis::cmd("GET").arg(app.keys.board_scale("game")).query_async(&mut conn).await.unwrap();
    assert_eq!(scale, Some(4_194_303), "recorded again by the write");
    let (status, reply) = submit(&other, "game", "high", "cyd", 4_194_304).await;
    assert_eq!((status, reply["error"]["code"].as_str()), (503, Some("board_scale_changed")), "{reply}");
    for reader in [&app, &other, &same] {
        let (_, top) = reader.get("/v1/boards/game/top?period=all").await;
        let scores: Vec<(&Value, &Value)> = top["entries"].as_array().unwrap().iter().map(|e| (&e["user_id"], &e["score"])).collect();
        assert_eq!(scores, [(&json!("amy"), &json!(100)), (&json!("bob"), &json!(5))], "{top}");
    }
}
