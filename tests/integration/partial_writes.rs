//! A write script that fails part-way leaves nothing behind (docs/concepts.md#atomic-writes).
//! Redis does not roll a script back: whatever it wrote before an error stays. So every write
//! is run once to learn the keys it writes, then again, once per such key, with that key made
//! a key of another type beforehand: the write must fail with nothing of its board changed (no
//! points without their marker and journal line), and once the key is repaired its retry must
//! apply once, ending where the clean run ended.

use axum::http::Method;
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::journal::spawn_recording;
use standings_tests::{ADMIN, TestApp, WRITER};

fn config() -> Config {
    Config::parse(
        r#"
        [[boards]]
        name = "lg"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["week", "day"]
        top = 10
        rules = [
          { action = "drill", points = 2, max_points = 100, scope = "none", daily_cap = 50, rate_limit = { max = 100, per_secs = 60 } },
          { action = "like", points = 5, scope = "user_target_day", reversible = true },
        ]
        league = { period = "week", cohort_size = 4, tiers = ["bronze", "silver"], promote = 1, demote = 1 }
        notify = { top = 10 }
        statements = true

        [[boards]]
        name = "cal"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["month", "all"]
        top = 10
        rules = [{ action = "read", points = 1, scope = "none" }]
        statements = true
        sign_in = { points = 1, streak_bonuses = [[2, 5]] }

        [[boards]]
        name = "laps"
        kind = "scores"
        keep = "best"
        order = "asc"
        timezone = "UTC"
        periods = ["week", "all"]
        rate_limit = { max = 100, per_secs = 60 }
        top = 10
        league = { period = "week", cohort_size = 4, tiers = ["slow", "fast"], promote = 1, demote = 1 }
        notify = { top = 10 }
        statements = true
        "#,
    )
    .expect("a valid configuration")
}

/// A write as a client sends it.
struct Write {
    method: Method,
    path: &'static str,
    body: Value,
    admin: bool,
}

fn write(path: &'static str, body: Value) -> Write {
    Write { method: Method::POST, path, body, admin: path.starts_with("/v1/admin") }
}

async fn send(app: &TestApp, write: &Write) -> (u16, Value) {
    let (status, reply) =
        app.call(write.method.clone(), write.path, write.body.to_string(), if write.admin { ADMIN } else { WRITER }).await;
    (status.as_u16(), reply)
}

/// Others on the boards, and the user's earlier writes, so every key exists or is created.
async fn setup(app: &TestApp) {
    for (id, user, points) in [("s1", "ann", 6), ("s2", "bob", 4), ("s3", "u1", 2)] {
        let (status, body) = app.event(json!({"event_id": id, "user_id": user, "action": "drill", "points": points})).await;
        assert_eq!(status, 200, "{body}");
    }
    for (id, user) in [("c1", "ann"), ("c2", "u1")] {
        let (status, body) = app.post("/v1/sign-ins", &json!({"event_id": id, "user_id": user})).await;
        assert_eq!(status, 200, "{body}");
    }
    for (id, user, score) in [("l1", "ann", 5000), ("l2", "u1", 7000)] {
        let (status, body) = app.post("/v1/boards/laps/scores", &json!({"event_id": id, "user_id": user, "score": score})).await;
        assert_eq!(status, 200, "{body}");
    }
}

/// Every key of the app with its type and value (`DUMP`), by its name after the app's prefix.
/// Streams are compared by length: their ids are Redis's clock.
async fn state(app: &TestApp) -> Vec<(String, String, Vec<u8>)> {
    let mut conn = app.redis.clone();
    let mut state = Vec::new();
    for key in app.written_keys().await {
        let kind: String = redis::cmd("TYPE").arg(&key).query_async(&mut conn).await.unwrap();
        let value: Vec<u8> = if kind == "stream" {
            let len: u64 = redis::cmd("XLEN").arg(&key).query_async(&mut conn).await.unwrap();
            len.to_string().into_bytes()
        } else if kind == "hash" && key.ends_with(":guard") {
            // Field by field: a record of marker buckets holds their expiry on Redis's clock, which
            // differs from run to run by the moment each ran.
            let mut fields: Vec<(String, String)> = redis::cmd("HGETALL").arg(&key).query_async(&mut conn).await.unwrap();
            for (field, value) in &mut fields {
                if field.starts_with(standings::domain::guard::MARKS) {
                    let parts: Vec<&str> = value.split('|').collect();
                    *value = format!("{}|{}", parts[0], parts[2]);
                }
            }
            fields.sort();
            format!("{fields:?}").into_bytes()
        } else {
            let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(&key).query_async(&mut conn).await.unwrap();
            dump.unwrap_or_default()
        };
        state.push((key[app.keys.prefix().len()..].to_owned(), kind, value));
    }
    state
}

/// The hash tag (`{…}`) of a key: which board's slot it is in.
fn tag(key: &str) -> &str {
    key.split_once('{').and_then(|(_, rest)| rest.split_once('}')).map_or("", |(tag, _)| tag)
}

async fn writes_nothing_when_any_key_it_writes_is_of_another_type(name: &str, prepare: &[Write], write: Write) {
    let prepared = |app: TestApp| async move {
        setup(&app).await;
        for earlier in prepare {
            let (status, body) = send(&app, earlier).await;
            assert_eq!(status, 200, "{body}");
        }
        app
    };
    let reference = prepared(spawn_recording(config()).await).await;
    let before = state(&reference).await;
    let (status, first) = send(&reference, &write).await;
    assert_eq!(status, 200, "{name}: {first}");
    let after = state(&reference).await;
    let written: Vec<(String, String)> =
        after.iter().filter(|entry| !before.contains(entry)).map(|(key, kind, _)| (key.clone(), kind.clone())).collect();
    assert!(!written.is_empty(), "{name} writes something");

    let mut failures = Vec::new();
    for (key, kind) in &written {
        let app = prepared(spawn_recording(config()).await).await;
        let full = format!("{}{key}", app.keys.prefix());
        let mut conn = app.redis.clone();
        let original: Option<Vec<u8>> = redis::cmd("DUMP").arg(&full).query_async(&mut conn).await.unwrap();
        let _: () = redis::cmd("DEL").arg(&full).query_async(&mut conn).await.unwrap();
        // Another type than the key's: a set where a set is never kept, a list otherwise.
        let wrong =
            if kind == "set" { redis::cmd("RPUSH").arg(&full).arg("x").clone() } else { redis::cmd("SADD").arg(&full).arg("x").clone() };
        let _: i64 = wrong.query_async(&mut conn).await.unwrap();
        let broken = state(&app).await;
        let (status, reply) = send(&app, &write).await;
        let now = state(&app).await;
        let board_of = |entries: &[(String, String, Vec<u8>)]| -> Vec<(String, String, Vec<u8>)> {
            entries.iter().filter(|(k, _, _)| tag(k) == tag(key)).cloned().collect()
        };
        // A marker bucket of another type is what an earlier release left at its name: it is
        // cleared and the write goes ahead (keyspace.rs), whole.
        let cleared = key.contains(":evt:") && status == 200 && {
            let without = |entries: Vec<(String, String, Vec<u8>)>| -> Vec<(String, String, Vec<u8>)> {
                entries.into_iter().filter(|(k, _, _)| k != key).collect()
            };
            without(board_of(&now)) == without(board_of(&after))
        };
        if cleared {
            continue;
        }
        if status == 200 || board_of(&broken) != board_of(&now) {
            let changed: Vec<&String> = now.iter().filter(|e| tag(&e.0) == tag(key) && !broken.contains(e)).map(|(k, _, _)| k).collect();
            failures.push(format!("{key} ({kind}): {status} {reply}, changed {changed:?}"));
            continue;
        }
        // Repaired, the retry applies once: the board as the clean run left it.
        let _: () = redis::cmd("DEL").arg(&full).query_async(&mut conn).await.unwrap();
        if let Some(dump) = original {
            let _: () = redis::cmd("RESTORE").arg(&full).arg(0).arg(dump).query_async(&mut conn).await.unwrap();
        }
        let (status, retry) = send(&app, &write).await;
        if status != 200 || board_of(&state(&app).await) != board_of(&after) {
            failures.push(format!("{key} ({kind}): the retry after repair answered {status} {retry} and ended elsewhere"));
        }
    }
    assert!(failures.is_empty(), "{name}, a key of another type at:\n{}", failures.join("\n"));
}

#[tokio::test]
async fn an_event_writes_nothing_when_a_key_it_writes_is_of_another_type() {
    let event = write("/v1/events", json!({"event_id": "w1", "user_id": "u1", "action": "drill", "points": 9}));
    writes_nothing_when_any_key_it_writes_is_of_another_type("an event", &[], event).await;
}

#[tokio::test]
async fn a_take_back_writes_nothing_when_a_key_it_writes_is_of_another_type() {
    let give = write("/v1/events", json!({"event_id": "g1", "user_id": "u1", "action": "like", "target": "t1"}));
    let take = write("/v1/events", json!({"event_id": "w2", "user_id": "u1", "action": "like", "target": "t1", "active": false}));
    writes_nothing_when_any_key_it_writes_is_of_another_type("a take-back", &[give], take).await;
}

#[tokio::test]
async fn a_score_writes_nothing_when_a_key_it_writes_is_of_another_type() {
    let score = write("/v1/boards/laps/scores", json!({"event_id": "w3", "user_id": "u1", "score": 4000}));
    writes_nothing_when_any_key_it_writes_is_of_another_type("a score", &[], score).await;
}

#[tokio::test]
async fn a_sign_in_writes_nothing_when_a_key_it_writes_is_of_another_type() {
    let sign_in = write("/v1/sign-ins", json!({"event_id": "w4", "user_id": "newcomer"}));
    writes_nothing_when_any_key_it_writes_is_of_another_type("a sign-in", &[], sign_in).await;
}

#[tokio::test]
async fn a_correction_writes_nothing_when_a_key_it_writes_is_of_another_type() {
    let points = write("/v1/admin/boards/lg/users/u1/corrections", json!({"delta": 5, "reason": "missed", "correction_id": "c1"}));
    writes_nothing_when_any_key_it_writes_is_of_another_type("a points correction", &[], points).await;
    let score = write("/v1/admin/boards/laps/users/u1/corrections", json!({"set": 3000, "reason": "recount", "correction_id": "c2"}));
    writes_nothing_when_any_key_it_writes_is_of_another_type("a score correction", &[], score).await;
}

#[tokio::test]
async fn a_ban_writes_nothing_when_a_key_it_writes_is_of_another_type() {
    let ban = write("/v1/admin/users/u1/ban", json!({}));
    writes_nothing_when_any_key_it_writes_is_of_another_type("a ban", &[], ban).await;
}

#[tokio::test]
async fn a_first_write_that_places_a_player_writes_nothing_when_a_key_it_writes_is_of_another_type() {
    let event = write("/v1/events", json!({"event_id": "w5", "user_id": "fresh", "action": "drill", "points": 3}));
    writes_nothing_when_any_key_it_writes_is_of_another_type("a new player's event", &[], event).await;
    let score = write("/v1/boards/laps/scores", json!({"event_id": "w6", "user_id": "fresh", "score": 6000}));
    writes_nothing_when_any_key_it_writes_is_of_another_type("a new player's score", &[], score).await;
}

/// A write that ties another member's standing in the same second records its arrival in the
/// period's arrivals (prelude.lua `record_move`), after the board's writes: that key of another
/// type must fail the write before its first write too.
#[tokio::test]
async fn a_write_that_ties_writes_nothing_when_a_key_it_writes_is_of_another_type() {
    // u1 (2) reaches ann's 6, reached in the same second.
    let event = write("/v1/events", json!({"event_id": "w7", "user_id": "u1", "action": "drill", "points": 4}));
    writes_nothing_when_any_key_it_writes_is_of_another_type("an event that ties", &[], event).await;
    // u1 (7000, lower is better) reaches ann's 5000.
    let score = write("/v1/boards/laps/scores", json!({"event_id": "w8", "user_id": "u1", "score": 5000}));
    writes_nothing_when_any_key_it_writes_is_of_another_type("a score that ties", &[], score).await;
}

/// The league's close writes each member's result and next tier, then its journal entry: a
/// tiers hash of another type fails the close before any result is written, and once repaired
/// the close applies once.
#[tokio::test]
async fn a_league_close_writes_nothing_when_a_key_it_writes_is_of_another_type() {
    let app = spawn_recording(config()).await;
    app.set_now(standings_tests::at("2026-11-18T10:00:00Z"));
    for (id, user, points) in [("k1", "ann", 6), ("k2", "bob", 4)] {
        let (status, body) = app.event(json!({"event_id": id, "user_id": user, "action": "drill", "points": points})).await;
        assert_eq!(status, 200, "{body}");
    }
    let board = app.keys.board("lg");
    let tiers = board.league_tiers();
    let results = board.league_results("2026-W47");
    let mut conn = app.redis.clone();
    let _: () = redis::cmd("SET").arg(&tiers).arg("not a hash").query_async(&mut conn).await.unwrap();
    app.set_now(standings_tests::at("2026-11-23T01:00:00Z"));
    let closed = app.closer().close_due(chrono::Utc::now() + chrono::Duration::minutes(5)).await;
    assert!(closed.is_err() || closed.as_ref().is_ok_and(|r| r.iter().all(|r| r.status != "complete")), "{closed:?}");
    let written: bool = redis::cmd("EXISTS").arg(&results).query_async(&mut conn).await.unwrap();
    assert!(!written, "no result written before the failure");

    let _: () = redis::cmd("DEL").arg(&tiers).query_async(&mut conn).await.unwrap();
    let reports = app.closer().close_due(chrono::Utc::now() + chrono::Duration::minutes(5)).await.unwrap();
    assert_eq!(reports.iter().map(|r| r.status).collect::<Vec<_>>(), ["complete"]);
    let stored: std::collections::HashMap<String, String> = redis::cmd("HGETALL").arg(&results).query_async(&mut conn).await.unwrap();
    assert!(stored.contains_key("ann") && stored.contains_key("bob"), "{stored:?}");
}
