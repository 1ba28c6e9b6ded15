//! A restore's call that fails applies nothing (docs/journal.md#restore): Redis keeps the writes
//! a script made before an error, so `restore_lines.lua` checks every key it is about to write
//! before the first write, and a line whose record cannot be applied is refused before it is
//! sent.

use std::sync::Arc;

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use journal::{Restorer, S3Objects, Status};
use serde_json::json;
use standings::domain::config::Config;
use standings_tests::journal::drain_to_new_bucket;
use standings_tests::{TestApp, spawn_journaled};

fn forum() -> Config {
    Config::parse(
        r#"
        [[boards]]
        name = "forum"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all", "week"]
        top = 10
        statements = true
        rules = [{ action = "comment", points = 3, scope = "none" }]
        "#,
    )
    .unwrap()
}

async fn comments(app: &TestApp, n: usize) {
    app.set_now(Utc::now());
    for i in 0..n {
        assert_eq!(app.event(json!({"event_id": format!("c{i}"), "user_id": "ann", "action": "comment"})).await.0, StatusCode::OK);
    }
}

async fn delete_all(app: &TestApp) {
    let mut conn = app.redis.clone();
    for key in app.written_keys().await {
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.unwrap();
    }
}

/// The first restore call claims the statement key of ann (and brings back one line); then
/// something writes that key as another type. The next call, whose lines write the board's
/// sets before that statement, fails and writes nothing at all: no set gains points a retry
/// would add again, and the checkpoint stays where it was.
#[tokio::test]
async fn a_restore_call_that_meets_a_key_of_another_type_writes_nothing() {
    let app = spawn_journaled(forum()).await;
    comments(&app, 6).await;
    let (client, bucket) = drain_to_new_bucket(&app, 4).await;
    delete_all(&app).await;
    let restorer = Restorer::new(Arc::new(forum()), app.keys.clone(), app.store.clone(), S3Objects::new(client, &bucket));
    let first = restorer.restore(Some("forum"), Utc::now() - Duration::seconds(1)).await.unwrap();
    assert_eq!((first.status, first.boards[0].replayed), (Status::InProgress, 1), "{first:?}");

    let statement = app.written_keys().await.into_iter().find(|key| key.contains(":stmt:all:")).expect("the statement restored");
    let _: () = redis::cmd("DEL").arg(&statement).query_async(&mut app.redis.clone()).await.unwrap();
    let _: () = redis::cmd("SET").arg(&statement).arg("not a hash").query_async(&mut app.redis.clone()).await.unwrap();
    let before = app.keyspace().await;
    let failed = restorer.restore(Some("forum"), Utc::now() + Duration::minutes(5)).await;
    assert!(failed.is_err(), "{failed:?}");
    assert!(before == app.keyspace().await, "the failed call wrote nothing (sets, markers, checkpoint, claims)");
}

/// A restore sends its next run before the one before it has answered. When that one fails,
/// the next applies nothing either (it goes on only from the checkpoint the one before it left):
/// ann's 200 lines after the first fail on her statement, and bob's 200 after them, which touch
/// no key of another type, are not applied past them.
#[tokio::test]
async fn the_run_sent_after_a_call_that_fails_applies_nothing() {
    let app = spawn_journaled(forum()).await;
    comments(&app, 201).await;
    for i in 0..200 {
        assert_eq!(app.event(json!({"event_id": format!("b{i}"), "user_id": "bob", "action": "comment"})).await.0, StatusCode::OK);
    }
    let (client, bucket) = drain_to_new_bucket(&app, 1000).await;
    delete_all(&app).await;
    let restorer = Restorer::new(Arc::new(forum()), app.keys.clone(), app.store.clone(), S3Objects::new(client, &bucket));
    let first = restorer.restore(Some("forum"), Utc::now() - Duration::seconds(1)).await.unwrap();
    assert_eq!((first.status, first.boards[0].replayed), (Status::InProgress, 1), "{first:?}");

    let statement = app.written_keys().await.into_iter().find(|key| key.contains(":stmt:all:")).expect("the statement restored");
    let _: () = redis::cmd("DEL").arg(&statement).query_async(&mut app.redis.clone()).await.unwrap();
    let _: () = redis::cmd("SET").arg(&statement).arg("not a hash").query_async(&mut app.redis.clone()).await.unwrap();
    let before = app.keyspace().await;
    let failed = restorer.restore(Some("forum"), Utc::now() + Duration::minutes(5)).await;
    assert!(failed.is_err(), "{failed:?}");
    assert!(before == app.keyspace().await, "neither call wrote anything (bob's points, markers, checkpoint, claims)");
}

/// A journal line whose recorded command cannot run (a score that is no number: a damaged
/// object, or a hand-edited stream) is refused and reported; the lines around it are restored.
#[tokio::test]
async fn a_line_whose_record_cannot_be_applied_is_refused_and_the_rest_restored() {
    let app = spawn_journaled(forum()).await;
    comments(&app, 2).await;
    let journal = app.keys.board("forum").journal();
    let effects = json!([[["ZADD", ":z:all:all", "not-a-number", "bob"]], []]);
    let entry = json!({"kind": "event", "at": "2026-11-22T12:00:00.000Z", "event_id": "bad", "user_id": "bob", "action": "comment"});
    let _: String = redis::cmd("XADD")
        .arg(&journal)
        .arg("*")
        .arg("e")
        .arg(entry.to_string())
        .arg("o")
        .arg("a3")
        .arg("x")
        .arg(effects.to_string())
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    comments_from(&app, 2, 4).await;
    let (client, bucket) = drain_to_new_bucket(&app, 100).await;
    delete_all(&app).await;
    let restorer = Restorer::new(Arc::new(forum()), app.keys.clone(), app.store.clone(), S3Objects::new(client, &bucket));
    let report = restorer.restore(Some("forum"), Utc::now() + Duration::minutes(5)).await.unwrap();
    assert_eq!((report.status, report.boards[0].refused), (Status::Complete, 1), "{report:?}");
    let (_, top) = app.get("/v1/boards/forum/top?period=all").await;
    assert_eq!(top["entries"][0]["score"], 12, "{top}");
    assert_eq!(top["total"], 1, "{top}");
}

async fn comments_from(app: &TestApp, from: usize, to: usize) {
    for i in from..to {
        assert_eq!(app.event(json!({"event_id": format!("c{i}"), "user_id": "ann", "action": "comment"})).await.0, StatusCode::OK);
    }
}

/// Runs sent from two tasks may reach Redis in either order: the later one, come first, applies
/// nothing (the checkpoint is not where it goes on from), and applies once the earlier one has.
#[tokio::test]
async fn a_run_that_reaches_redis_before_the_one_it_follows_waits_for_it() {
    use standings::domain::journal::{Command, Effects};
    use standings::redis::restore::{self, Applied, Run};
    let app = spawn_journaled(forum()).await;
    let keys = app.keys.board("forum");
    let mut conn = app.store.write_connection().await.unwrap();
    assert!(restore::lock(&mut conn, &keys, "t", 30_000).await.unwrap());
    let line = |member: &str| Effects {
        commands: vec![Command { name: "ZADD".into(), key: ":z:all:all".into(), args: vec![b"1".to_vec(), member.as_bytes().to_vec()] }],
        expiries: vec![(":z:all:all".into(), -1)],
    };
    let (mut first, mut second) = (Run::default(), Run::default());
    first.push(&keys, "1-0", &line("ann"), 0);
    second.push(&keys, "2-0", &line("bob"), 0);
    let board = keys.relative(":z:all:all");
    let members = |mut conn: standings::redis::store::Connection| {
        let board = board.clone();
        async move { redis::cmd("ZRANGE").arg(&board).arg(0).arg(-1).query_async::<Vec<String>>(&mut conn).await.unwrap() }
    };
    assert_eq!(restore::apply(&mut conn, &keys, "t", 30_000, Some("1-0"), &second).await.unwrap(), Applied::OutOfOrder);
    assert!(members(conn.clone()).await.is_empty(), "nothing applied out of order");
    assert_eq!(restore::apply(&mut conn, &keys, "t", 30_000, None, &first).await.unwrap(), Applied::Applied);
    assert_eq!(restore::apply(&mut conn, &keys, "t", 30_000, Some("1-0"), &second).await.unwrap(), Applied::Applied);
    assert_eq!(members(conn.clone()).await, ["ann", "bob"]);
    assert_eq!(restore::through(&mut conn, &keys).await.unwrap().as_deref(), Some("2-0"));
}

fn far() -> chrono::DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

/// The journal's objects; the first listing of the board's journal runs `hook` once, after
/// it (what happens to Redis while a restore runs).
struct HookedOnList {
    inner: S3Objects,
    hook: tokio::sync::Mutex<Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>>,
}

impl HookedOnList {
    fn new(inner: S3Objects, hook: impl std::future::Future<Output = ()> + Send + 'static) -> Self {
        Self { inner, hook: tokio::sync::Mutex::new(Some(Box::pin(hook))) }
    }
}

impl standings::archive::objects::Objects for HookedOnList {
    async fn put_new(
        &self,
        key: &str,
        body: Vec<u8>,
    ) -> Result<standings::archive::objects::Put, standings::archive::objects::ObjectError> {
        self.inner.put_new(key, body).await
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, standings::archive::objects::ObjectError> {
        self.inner.get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, standings::archive::objects::ObjectError> {
        let listed = self.inner.list(prefix).await?;
        // The board's journal (not the drain's record the restore reads first, nor its switches).
        if prefix.starts_with("journal/prefix=") && prefix.contains("board=forum/") {
            let hook = self.hook.lock().await.take();
            if let Some(hook) = hook {
                hook.await;
            }
        }
        Ok(listed)
    }
}

/// A restore that judged the guard intact (only a period set was lost) and whose guard is lost
/// before it ends (found by the simulation, between two attempts): it must not make the empty
/// guard born, which loses the guard's bans (and closed seasons, and records of sets). It stops
/// short of complete; the next attempt starts over and brings the guard back whole.
#[tokio::test]
async fn a_restore_whose_guard_is_lost_while_it_runs_starts_over_and_brings_the_bans_back() {
    let app = spawn_journaled(forum()).await;
    comments(&app, 4).await;
    assert_eq!(app.event(json!({"event_id": "u1c", "user_id": "u1", "action": "comment"})).await.0, StatusCode::OK);
    assert_eq!(app.call(axum::http::Method::POST, "/v1/admin/users/u1/ban", "{}", standings_tests::ADMIN).await.0, StatusCode::OK);
    let (client, bucket) = drain_to_new_bucket(&app, 4).await;
    let board = app.keys.board("forum");
    let _: () = redis::cmd("DEL").arg(board.relative(":z:all:all")).query_async(&mut app.redis.clone()).await.unwrap();
    let (mut redis, guard) = (app.redis.clone(), board.guard());
    let objects = HookedOnList::new(S3Objects::new(client.clone(), &bucket), async move {
        let _: () = redis::cmd("DEL").arg(&guard).query_async(&mut redis).await.unwrap();
    });
    let first = Restorer::new(Arc::new(forum()), app.keys.clone(), app.store.clone(), objects).restore(Some("forum"), far()).await.unwrap();
    assert_eq!(first.status, Status::InProgress, "the guard it judged intact is gone: not complete ({first:?})");
    let restorer = Restorer::new(Arc::new(forum()), app.keys.clone(), app.store.clone(), S3Objects::new(client, &bucket));
    assert_eq!(restorer.restore(Some("forum"), far()).await.unwrap().status, Status::Complete);
    let (status, body) = app.event(json!({"event_id": "after", "user_id": "u1", "action": "comment"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("user_banned")), "{body}");
    let (status, top) = app.get("/v1/boards/forum/top?period=all").await;
    assert_eq!(status, StatusCode::OK, "{top}");
    assert!(top["entries"].as_array().unwrap().iter().all(|e| e["user_id"] != "u1"), "{top}");
}

/// Restore × drain under a stalled Redis (found by the simulation in CI, whose Redis fsyncs
/// every write): the restore's lock lapsed before it read the undrained tail, a drain stored and
/// trimmed that tail meanwhile, and the restore, finding nothing left to apply, answered
/// complete without those lines (the lost set stayed lost, and its next read fenced the board).
/// A restore now finishes only while it still holds its lock: else another attempt reads the
/// tail from where the drain stored it.
#[tokio::test]
async fn a_restore_whose_lock_lapsed_before_it_read_the_tail_does_not_answer_complete() {
    let app = spawn_journaled(forum()).await;
    comments(&app, 5).await;
    let board = app.keys.board("forum");
    let _: () = redis::cmd("DEL").arg(board.relative(":z:all:all")).query_async(&mut app.redis.clone()).await.unwrap();
    let client = standings_tests::journal::s3().await;
    let bucket = standings_tests::journal::new_bucket(&client).await;
    // The lock lapses (as under a Redis stalled past the lease: its renewals late), then a
    // drain, finding no restore under way, stores and trims the tail the restore reads next.
    let (mut redis, lock) = (app.redis.clone(), board.restore_lock());
    let drainer = app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default());
    let objects = HookedOnList::new(S3Objects::new(client.clone(), &bucket), async move {
        let _: () = redis::cmd("DEL").arg(&lock).query_async(&mut redis).await.unwrap();
        drainer.drain(far()).await;
    });
    let first = Restorer::new(Arc::new(forum()), app.keys.clone(), app.store.clone(), objects).restore(Some("forum"), far()).await;
    assert!(!matches!(&first, Ok(report) if report.status == Status::Complete), "the lock lapsed: not complete ({first:?})");
    let restorer = Restorer::new(Arc::new(forum()), app.keys.clone(), app.store.clone(), S3Objects::new(client, &bucket));
    assert_eq!(restorer.restore(Some("forum"), far()).await.unwrap().status, Status::Complete);
    let (status, top) = app.get("/v1/boards/forum/top?period=all").await;
    assert_eq!((status, &top["entries"][0]["score"]), (StatusCode::OK, &json!(15)), "every comment back: {top}");
}
