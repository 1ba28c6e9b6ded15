//! Profiles in the journal (docs/journal.md#profiles): a profile change is journaled in the
//! call that makes it, so a change that fails journals nothing, and concurrent changes are
//! journaled in the order Redis applied them; a restore brings back the profile Redis held.
//! Profiles of the layout before profile shards are read until the drain moves them, moved
//! with a journal line each, and restored.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use chrono::{Duration, Utc};
use futures::future::join_all;
use journal::{Restorer, S3Objects, Status};
use serde_json::json;
use standings::domain::config::Config;
use standings_tests::journal::drain_to_new_bucket;
use standings_tests::{TestApp, WRITER, spawn_journaled};

fn far() -> chrono::DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

async fn put(app: &TestApp, user: &str, nickname: impl Into<String>) -> StatusCode {
    let profile = json!({"nickname": nickname.into()});
    app.call(Method::PUT, &format!("/v1/users/{user}/profile"), profile.to_string(), WRITER).await.0
}

/// Every journal line of the deployment still in Redis (any stream) that names `needle`.
async fn journaled_lines_naming(app: &TestApp, needle: &str) -> usize {
    let mut conn = app.redis.clone();
    let mut found = 0;
    for key in app.written_keys().await.into_iter().filter(|key| key.ends_with(":journal")) {
        let entries: Vec<(String, Vec<(String, String)>)> =
            redis::cmd("XRANGE").arg(&key).arg("-").arg("+").query_async(&mut conn).await.unwrap();
        found += entries.iter().filter(|(_, fields)| fields.iter().any(|(_, value)| value.contains(needle))).count();
    }
    found
}

async fn drain(app: &TestApp) -> (aws_sdk_s3::Client, String) {
    drain_to_new_bucket(app, 3).await
}

async fn lose_and_restore(app: &TestApp, (client, bucket): (aws_sdk_s3::Client, String)) {
    app.lose_written_keys().await;
    let restorer =
        Restorer::new(Arc::new(app.config.as_ref().clone()), app.keys.clone(), app.store.clone(), S3Objects::new(client, &bucket));
    let report = restorer.restore(None, far()).await.unwrap();
    assert_eq!(report.status, Status::Complete, "{report:?}");
}

fn forum() -> Config {
    Config::parse(
        r#"
        [[boards]]
        name = "forum"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all"]
        top = 10
        rules = [{ action = "comment", points = 3, scope = "none" }]
        "#,
    )
    .unwrap()
}

/// The profile key holds another type: the replace fails (500) and no journal line says it
/// happened, so no restore can bring back a profile nobody ever had.
#[tokio::test]
async fn a_profile_change_that_fails_journals_nothing() {
    let app = spawn_journaled(forum()).await;
    let _: () = redis::cmd("SET").arg(app.keys.profile("ann")).arg("x").query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(put(&app, "ann", "Phantom").await, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(journaled_lines_naming(&app, "Phantom").await, 0, "a failed change is not journaled");
}

/// Rounds of concurrent changes to one profile: after a loss, the restore brings back the
/// profile Redis held, whichever change landed last.
#[tokio::test]
async fn concurrent_profile_changes_restore_to_the_profile_redis_held() {
    let app = spawn_journaled(forum()).await;
    app.set_now(Utc::now());
    for round in 0..6 {
        let puts = (0..8).map(|i| put(&app, "ann", format!("Ann {round}.{i}")));
        assert!(join_all(puts).await.into_iter().all(|status| status == StatusCode::OK));
    }
    let (_, before) = app.get("/v1/boards/forum/users/ann?period=all").await;
    let live: Option<String> =
        redis::cmd("HGET").arg(app.keys.profile("ann")).arg("nickname").query_async(&mut app.redis.clone()).await.unwrap();
    let live = live.expect("a profile");
    lose_and_restore(&app, drain(&app).await).await;
    let restored: Option<String> =
        redis::cmd("HGET").arg(app.keys.profile("ann")).arg("nickname").query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(restored.as_deref(), Some(live.as_str()), "before: {before}");
}

/// A profile stored before profile shards (its own slot, journaled in `_profiles`) is read as
/// it was; the drain moves it (journaled in its shard) and the old key goes; a change made
/// before the move wins over the move; a restore brings both back.
#[tokio::test]
async fn profiles_of_the_old_layout_are_read_then_moved_by_the_drain_and_restored() {
    let app = spawn_journaled(forum()).await;
    app.set_now(Utc::now());
    app.unmark_profiles_moved().await;
    let mut conn = app.redis.clone();
    for (user, nickname) in [("ann", "Old Ann"), ("bob", "Old Bob")] {
        let _: () =
            redis::cmd("HSET").arg(app.keys.legacy_profile(user)).arg("nickname").arg(nickname).query_async(&mut conn).await.unwrap();
        assert_eq!(app.event(json!({"event_id": format!("c-{user}"), "user_id": user, "action": "comment"})).await.0, StatusCode::OK);
    }
    // What the old release journaled (in `_profiles`, no effects): bob's old profile, and cid's,
    // whose key the loss below takes before any drain moved it.
    let legacy_journal = app.keys.board(standings::redis::keys::PROFILES_JOURNAL).journal();
    for (user, nickname) in [("bob", "Old Bob"), ("cid", "Journaled Cid")] {
        let entry = json!({"kind": "profile", "at": "2026-11-20T10:00:00.000Z", "user_id": user, "profile": {"nickname": nickname}});
        let _: String = redis::cmd("XADD")
            .arg(&legacy_journal)
            .arg("*")
            .arg("e")
            .arg(entry.to_string())
            .arg("o")
            .arg("")
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    assert_eq!(put(&app, "bob", "New Bob").await, StatusCode::OK);
    let nicknames = |top: serde_json::Value| -> std::collections::BTreeMap<String, Option<String>> {
        let entries = top["entries"].as_array().unwrap().iter();
        entries.map(|e| (e["user_id"].as_str().unwrap().to_owned(), e["profile"]["nickname"].as_str().map(str::to_owned))).collect()
    };
    let expected: std::collections::BTreeMap<String, Option<String>> =
        [("ann".to_owned(), Some("Old Ann".to_owned())), ("bob".to_owned(), Some("New Bob".to_owned()))].into();
    let (_, top) = app.get("/v1/boards/forum/top?period=all").await;
    assert_eq!(nicknames(top), expected);

    let journal = drain(&app).await;
    let old: Vec<String> = standings_tests::cluster::scan_all(&app.redis, &app.keys.legacy_profile("*")).await;
    assert!(old.is_empty(), "moved: {old:?}");
    let (_, top) = app.get("/v1/boards/forum/top?period=all").await;
    assert_eq!(nicknames(top), expected);

    lose_and_restore(&app, journal).await;
    let (_, top) = app.get("/v1/boards/forum/top?period=all").await;
    assert_eq!(nicknames(top), expected);
    let (_, cid) = app.get("/v1/boards/forum/users/cid?period=all").await;
    let cid_profile: Option<String> = redis::cmd("HGET").arg(app.keys.profile("cid")).arg("nickname").query_async(&mut conn).await.unwrap();
    assert_eq!(cid_profile.as_deref(), Some("Journaled Cid"), "{cid}");
}

/// A profile change acknowledged between two invocations of its shard's restore (the first
/// stopped by its deadline after bringing back an older profile) is what the finished restore
/// leaves: no older line is written over it.
#[tokio::test]
async fn a_profile_changed_during_its_shards_restore_keeps_the_change() {
    let app = spawn_journaled(forum()).await;
    app.set_now(Utc::now());
    for nickname in ["Ann 1", "Ann 2", "Ann 3"] {
        assert_eq!(put(&app, "ann", nickname).await, StatusCode::OK);
    }
    let (client, bucket) = drain(&app).await;
    let mut conn = app.redis.clone();
    app.lose_written_keys().await;
    let key = app.keys.profile("ann");
    let shard = key[key.find('{').unwrap() + 1..key.find('}').unwrap()].to_owned();
    let restorer =
        Restorer::new(Arc::new(app.config.as_ref().clone()), app.keys.clone(), app.store.clone(), S3Objects::new(client, &bucket));
    let first = restorer.restore(Some(&shard), Utc::now() - Duration::seconds(1)).await.unwrap();
    assert_eq!(first.status, Status::InProgress, "{first:?}");
    assert_eq!(put(&app, "ann", "Live Ann").await, StatusCode::OK);
    let done = restorer.restore(Some(&shard), far()).await.unwrap();
    assert_eq!(done.status, Status::Complete, "{done:?}");
    let nickname: Option<String> = redis::cmd("HGET").arg(&key).arg("nickname").query_async(&mut conn).await.unwrap();
    assert_eq!(nickname.as_deref(), Some("Live Ann"));
}

/// A profile's text that is not ASCII (64 emoji: 256 bytes) is recorded in hex and comes back
/// byte for byte.
#[tokio::test]
async fn a_profile_that_is_not_ascii_restores_byte_for_byte() {
    let app = spawn_journaled(forum()).await;
    let nickname = "🦀é".repeat(32);
    assert_eq!(put(&app, "ann", nickname.clone()).await, StatusCode::OK);
    lose_and_restore(&app, drain(&app).await).await;
    let restored: Option<String> =
        redis::cmd("HGET").arg(app.keys.profile("ann")).arg("nickname").query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(restored.as_deref(), Some(nickname.as_str()));
}
