//! The journal of a sharded board (docs/scaling.md#the-journal): each shard journals into a
//! stream in its own slot, drained to objects of its own; verify replays and compares shard by
//! shard; after every key is lost the board answers `board_restoring` until a restore brings
//! every shard back byte for byte, then a retry is a duplicate.

use std::sync::{Arc, Mutex};

use axum::http::{Method, StatusCode};
use chrono::{Duration, Utc};
use journal::{Restorer, S3Objects, Status};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings_tests::journal::{new_bucket, s3};
use standings_tests::{ADMIN, TestApp, spawn_journaled};

const SHARDS: u32 = 4;

fn far() -> chrono::DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

fn config() -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"wide\"\nkind = \"scores\"\nkeep = \"sum\"\ntimezone = \"UTC\"\nperiods = [\"day\", \"all\"]\ntop = 10\nstatements = true\nshards = {SHARDS}\n"
    ))
    .unwrap()
}

async fn submit(app: &TestApp, id: &str, user: &str, score: i64) -> (StatusCode, Value) {
    app.set_now(Utc::now());
    app.post("/v1/boards/wide/scores", &json!({"event_id": id, "user_id": user, "score": score})).await
}

/// Every key of the board but the journal streams and the restore's own, with value and expiry (and the
/// layout record: derived, recorded again by the first probe after a loss).
async fn state(app: &TestApp) -> Vec<(String, Vec<u8>, i64)> {
    // The catalog's keys (its record of bans among them) are the catalog's restore, not the board's
    // (a record lost while the catalog's guard survives is seeded again from the boards' guards).
    let kept = |key: &str| ![":journal", ":restore", ":layout"].iter().any(|own| key.ends_with(own)) && !key.contains("{_catalog}");
    app.keyspace().await.into_iter().filter(|(key, ..)| kept(key)).collect()
}

async fn reads(app: &TestApp) -> Vec<Value> {
    let mut reads = Vec::new();
    for path in ["top?period=all", "top?period=day&rank_mode=competition", "users/u3?period=all&around=2", "distribution?period=all"] {
        let (status, body) = app.get(&format!("/v1/boards/wide/{path}")).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        reads.push(body);
    }
    reads
}

#[tokio::test]
async fn a_sharded_board_journals_verifies_and_restores_shard_by_shard() {
    journals_verifies_and_restores(false).await;
}

/// The same restore in invocations that each stop at once (their deadline past), each passing on
/// the campaign the one before answered: each goes on from where the last stopped, a shard
/// completed by an earlier one not read again, so the restore completes. Before, every
/// invocation read the first shard again from its start and the others never had their turn
/// (docs/journal.md#restore).
#[tokio::test]
async fn a_restore_longer_than_an_invocation_goes_on_shard_by_shard_to_completion() {
    journals_verifies_and_restores(true).await;
}

async fn journals_verifies_and_restores(in_steps: bool) {
    let app = spawn_journaled(config()).await;
    for i in 0..24 {
        let (status, body) = submit(&app, &format!("s{i}"), &format!("u{}", i % 9), 1 + i % 5).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let correction = json!({"correction_id": "c1", "delta": -1, "reason": "r", "period": "all", "period_id": "all"});
    let (status, body) = app.call(Method::POST, "/v1/admin/boards/wide/users/u2/corrections", correction.to_string(), ADMIN).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(app.call(Method::POST, "/v1/admin/users/u5/ban", "{}", ADMIN).await.0, StatusCode::OK);

    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let jobs = app.journal_jobs(&client, &bucket, Arc::new(Mutex::new(Vec::new())));
    let drained = jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    // Every shard drained its own stream (none is the whole board's).
    let names: Vec<String> = drained["boards"].as_array().unwrap().iter().map(|b| b["board"].as_str().unwrap().to_owned()).collect();
    for shard in app.keys.layout("wide", SHARDS).journals() {
        assert!(names.contains(&shard), "{shard} in {names:?}");
    }
    assert!(!names.contains(&"wide".to_owned()), "{names:?}");
    // Written after the drain: verify reads them from each shard's stream.
    assert_eq!(submit(&app, "late", "u7", 3).await.0, StatusCode::OK);
    let verified = jobs.run(json!({"verify": {"board": "wide"}}), far()).await.expect("a verify");
    assert_eq!(verified["mismatches"], 0, "{verified}");
    assert_eq!(verified["boards"][0]["replayed"], 24 + 1 + 1 + 1, "{verified}");
    jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    let (before, read_before) = (state(&app).await, reads(&app).await);

    // Redis lost: reads and writes answer board_restoring until the restore.
    let mut conn = app.redis.clone();
    for key in app.written_keys().await {
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.unwrap();
    }
    let drained = jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    assert!(drained["boards"].as_array().unwrap().iter().any(|b| b["lost"] == true), "{drained}");
    let (status, body) = submit(&app, "during", "u1", 1).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{body}");
    let (status, _) = app.get("/v1/boards/wide/top?period=all").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);

    let restorer = Restorer::new(app.config.clone(), app.keys.clone(), app.store.clone(), S3Objects::new(client.clone(), &bucket));
    if in_steps {
        // A campaign no restore answered: refused, nothing written (it never reaches a key's name).
        let kept = app.keyspace().await;
        for token in ["../x", "0123456789ABCDEF", "", "0123456789abcdef0"] {
            let refused = restorer.resume(Some("wide"), Some(token), Utc::now()).await.expect_err("refused");
            assert_eq!(refused.code(), "bad_request", "{token:?}: {refused}");
        }
        assert_eq!(app.keyspace().await, kept);
    }
    let mut report = restorer.restore(Some("wide"), if in_steps { Utc::now() } else { far() }).await.expect("the restore runs");
    let mut calls = 1;
    while in_steps && report.status != Status::Complete && calls < 200 {
        report = restorer.resume(Some("wide"), report.campaign.as_deref(), Utc::now()).await.expect("the restore goes on");
        calls += 1;
    }
    assert_eq!(report.status, Status::Complete, "after {calls} calls: {report:?}");
    assert!(!in_steps || calls > SHARDS, "one shard at a time at least: {calls} calls");
    assert_eq!(report.boards.len(), SHARDS as usize, "one restore per shard: {report:?}");
    let after = state(&app).await;
    let names = |state: &[(String, Vec<u8>, i64)]| state.iter().map(|(key, ..)| key.clone()).collect::<Vec<_>>();
    assert_eq!(names(&before), names(&after));
    for ((key, dump, _), (_, dump_after, _)) in before.iter().zip(&after) {
        assert!(dump == dump_after, "{key} differs after the restore");
    }
    assert_eq!(read_before, reads(&app).await);
    // Exactly once holds across the loss: a retry is a duplicate, in the user's shard.
    let (status, retry) = submit(&app, "s4", "u4", 5).await;
    assert_eq!((status, retry["duplicate"].as_bool()), (StatusCode::OK, Some(true)), "{retry}");
}

fn game(shards: u32) -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"best\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nshards = {shards}\n"
    ))
    .unwrap()
}

/// A deploy that changes `shards` of a board holding data writes and reads where the data is
/// (the recorded layout) until a move's switch: what it writes, the old deploy reads, and
/// nothing lands in the layout it is configured with (docs/scaling.md#changing-shards).
async fn assert_written_where_the_data_is(old: &TestApp, new: &TestApp, configured: u32) {
    let (status, body) = new.post("/v1/boards/game/scores", &json!({"event_id": "n1", "user_id": "u1", "score": 99})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let correction = json!({"correction_id": "c9", "set": 1, "reason": "r", "period": "all", "period_id": "all"});
    let (status, body) = new.call(Method::POST, "/v1/admin/boards/game/users/u1/corrections", correction.to_string(), ADMIN).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, top) = old.get("/v1/boards/game/top?period=all").await;
    let score =
        |top: &Value, user: &str| top["entries"].as_array().unwrap().iter().find(|e| e["user_id"] == user).map(|e| e["score"].clone());
    assert_eq!(score(&top, "u1"), Some(json!(1)), "the old deploy reads the new one's writes: {top}");
    assert_eq!(new.get("/v1/boards/game/top?period=all").await, (StatusCode::OK, top.clone()));
    let (status, user) = new.get("/v1/boards/game/users/u3?period=all").await;
    assert_eq!(
        (status, user["rank"].as_u64()),
        (StatusCode::OK, top["entries"].as_array().unwrap().iter().position(|e| e["user_id"] == "u3").map(|p| p as u64 + 1))
    );
    let tags: Vec<String> =
        new.keys.layout("game", configured).all().iter().map(|shard| shard.guard().split('}').next().unwrap().to_owned() + "}").collect();
    let landed: Vec<String> = new
        .written_keys()
        .await
        .into_iter()
        .filter(|key| key.contains(":z:") && tags.iter().any(|tag| key.contains(tag.as_str())))
        .collect();
    assert!(landed.is_empty(), "nothing in the configured layout: {landed:?}");
}

async fn seed(app: &TestApp) {
    for user in 0..8 {
        let (status, body) = app
            .post("/v1/boards/game/scores", &json!({"event_id": format!("s{user}"), "user_id": format!("u{user}"), "score": 10 + user}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

#[tokio::test]
async fn changing_shards_of_a_board_that_holds_data_writes_and_reads_where_the_data_is() {
    // One slot, then four.
    let one = spawn_journaled(game(1)).await;
    seed(&one).await;
    let four = standings_tests::journal::spawn_journaled_on(game(4), one.keys.clone()).await;
    assert_written_where_the_data_is(&one, &four, 4).await;

    // Written before layouts were recorded: the data found in the one slot is its layout.
    let old = spawn_journaled(game(1)).await;
    seed(&old).await;
    let _: () = redis::cmd("DEL").arg(old.keys.board_layout("game")).query_async(&mut old.redis.clone()).await.unwrap();
    let four = standings_tests::journal::spawn_journaled_on(game(4), old.keys.clone()).await;
    assert_written_where_the_data_is(&old, &four, 4).await;

    // Four shards, then back to one.
    let four = spawn_journaled(game(4)).await;
    seed(&four).await;
    let one = standings_tests::journal::spawn_journaled_on(game(1), four.keys.clone()).await;
    assert_written_where_the_data_is(&four, &one, 1).await;
}

/// One shard's period set lost while its guard survived (a bad `DEL`, an eviction): every read of
/// that period on the sharded board answers 503 `board_restoring`, as the one slot's does, not
/// the other shards' members as the whole board (docs/journal.md#losses); the other period reads
/// on, and the restore brings the set back, reads answering as before.
#[tokio::test]
async fn a_shard_whose_period_set_was_lost_is_refused_on_every_read_of_that_period() {
    let app = spawn_journaled(config()).await;
    for i in 0..16 {
        assert_eq!(submit(&app, &format!("s{i}"), &format!("u{i}"), 1 + i % 5).await.0, StatusCode::OK);
    }
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let jobs = app.journal_jobs(&client, &bucket, Arc::new(Mutex::new(Vec::new())));
    jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    let before = reads(&app).await;
    let all = Period::containing(PeriodKind::All, Utc::now(), chrono_tz::UTC);
    let lost = app.keys.layout("wide", SHARDS).shard(1).period(&all);
    let members: Vec<String> = redis::cmd("ZRANGE").arg(&lost).arg(0).arg(-1).query_async(&mut app.redis.clone()).await.unwrap();
    let other = (0..16).map(|i| format!("u{i}")).find(|user| !members.contains(user)).unwrap();
    assert!(!members.is_empty(), "the shard holds members");
    let _: () = redis::cmd("DEL").arg(&lost).query_async(&mut app.redis.clone()).await.unwrap();

    let ranks = json!({"period": "all", "user_ids": [other, members[0]]}).to_string();
    for (method, path, body) in [
        (Method::GET, "/v1/boards/wide/top?period=all".to_owned(), String::new()),
        (Method::GET, "/v1/boards/wide/top?period=all&rank_mode=competition&offset=3".to_owned(), String::new()),
        (Method::GET, format!("/v1/boards/wide/users/{other}?period=all"), String::new()),
        (Method::GET, format!("/v1/boards/wide/users/{other}?period=all&around=2"), String::new()),
        (Method::GET, "/v1/boards/wide/distribution?period=all".to_owned(), String::new()),
        (Method::POST, "/v1/boards/wide/ranks".to_owned(), ranks),
        (Method::GET, format!("/v1/boards/wide/users/{}/statement?period=all", members[0]), String::new()),
    ] {
        let (status, read) = app.call_query(method, &path, body).await;
        assert_eq!((status, read["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{path}: {read}");
    }
    // Another period, its sets all there, reads on.
    assert_eq!(app.get("/v1/boards/wide/top?period=day&rank_mode=competition").await, (StatusCode::OK, before[1].clone()));

    let restorer = Restorer::new(app.config.clone(), app.keys.clone(), app.store.clone(), S3Objects::new(client.clone(), &bucket));
    let report = restorer.restore(Some("wide"), far()).await.expect("the restore runs");
    assert_eq!(report.status, Status::Complete, "{report:?}");
    assert_eq!(reads(&app).await, before);
}
