//! The journal (docs/journal.md): every applied write appends one entry to its board's stream in
//! the same script call, refusals and duplicates none; the `journal` function's drain moves the
//! entries to S3 (moto_server, through the real SDK) exactly once, whatever stops it where; a
//! reader nobody here wrote (DuckDB) finds every applied event once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::{Method, StatusCode};
use chrono::{Duration, Utc};
use futures::future::join_all;
use journal::S3Objects;
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::journal::{CrashAfterPut, lines, new_bucket, object_names, s3};
use standings_tests::{ADMIN, WRITER, spawn_journaled};

fn far() -> chrono::DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

/// How many lines carry each `event_id`.
fn by_event_id(lines: &[Value]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for line in lines {
        if let Some(id) = line["event_id"].as_str() {
            *counts.entry(id.to_owned()).or_insert(0) += 1;
        }
    }
    counts
}

#[tokio::test]
async fn every_applied_write_is_journaled_once_and_refusals_and_duplicates_are_not() {
    let app = spawn_journaled(Config::default_boards()).await;
    let event = json!({"event_id": "e1", "user_id": "ann", "action": "learning"});
    assert_eq!(app.event(event.clone()).await.0, StatusCode::OK);
    assert_eq!(app.event(event).await.0, StatusCode::OK, "a duplicate");
    let conflict = app.event(json!({"event_id": "e1", "user_id": "ann", "action": "qa"})).await;
    assert_eq!(conflict.0, StatusCode::CONFLICT);
    assert_eq!(app.post("/v1/sign-ins", &json!({"event_id": "s1", "user_id": "ann"})).await.0, StatusCode::OK);
    let score = json!({"event_id": "g1", "user_id": "ann", "score": 40});
    assert_eq!(app.post("/v1/boards/high-scores/scores", &score).await.0, StatusCode::OK);
    assert_eq!(app.post("/v1/boards/high-scores/scores", &score).await.0, StatusCode::OK, "a duplicate");
    let correction = json!({"delta": 5, "reason": "missed a lesson"});
    let (status, _) = app.call(Method::POST, "/v1/admin/boards/points/users/ann/corrections", correction.to_string(), ADMIN).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app.call(Method::POST, "/v1/admin/users/bob/ban", "{}", ADMIN).await;
    assert_eq!(status, StatusCode::OK);
    let refused = app.event(json!({"event_id": "e2", "user_id": "bob", "action": "learning"})).await;
    assert_eq!(refused.0, StatusCode::UNPROCESSABLE_ENTITY, "{refused:?}");
    let profile = json!({"nickname": "Ann"});
    assert_eq!(app.call(Method::PUT, "/v1/users/ann/profile", profile.to_string(), WRITER).await.0, StatusCode::OK);
    let bad = json!({"nickname": "a\nb"});
    assert_eq!(app.call(Method::PUT, "/v1/users/ann/profile", bad.to_string(), WRITER).await.0, StatusCode::BAD_REQUEST);

    // points: the event, the sign-in, the correction, the ban; high-scores: the score and the ban.
    assert_eq!(app.journal_len("points").await, 4);
    assert_eq!(app.journal_len("high-scores").await, 2);
    let profiles = app.keys.profile_shard_journal("ann");
    let profile_lines = standings::redis::journal::len(&mut app.redis.clone(), &profiles).await.unwrap();
    assert_eq!(profile_lines, 1, "the profile, not the refused one (in ann's profile shard)");

    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let report = app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).drain(far()).await;
    assert!(report.boards.iter().all(|b| b.error.is_none()), "{report:?}");
    let lines = lines(&client, &bucket, &app).await;
    let points: Vec<&Value> = lines.iter().filter(|l| l["board"] == "points").collect();
    let kinds: Vec<&str> = points.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["event", "sign_in", "correction", "ban"]);
    let event = points[0];
    assert_eq!(
        (event["event_id"].as_str(), event["user_id"].as_str(), event["action"].as_str()),
        (Some("e1"), Some("ann"), Some("learning"))
    );
    assert_eq!(event["at"], json!(app.now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)));
    assert!(event["outcome"].as_str().is_some_and(|o| !o.is_empty()), "{event}");
    assert!(
        points[1]["outcome"].as_str().unwrap().contains("\"date\":\"2026-11-22\""),
        "a sign-in records the day it signed: {}",
        points[1]
    );
    assert_eq!(points[2]["delta"], 5);
    assert_eq!(points[3]["user_id"], "bob");
    let profile = lines.iter().find(|l| l["kind"] == "profile").unwrap();
    let key = app.keys.profile("ann");
    let ann_shard = key[key.find('{').unwrap() + 1..key.find('}').unwrap()].to_owned();
    assert_eq!((profile["board"].as_str(), profile["user_id"].as_str()), (Some(ann_shard.as_str()), Some("ann")));
    assert_eq!(profile["profile"], json!({"nickname": "Ann"}));
    let score = lines.iter().find(|l| l["kind"] == "score").unwrap();
    assert_eq!((score["board"].as_str(), score["score"].as_i64()), (Some("high-scores"), Some(40)));
}

/// The batch routes and the queue apply through the same script calls as single writes: each
/// applied item is journaled once, duplicates (inside a batch, or redelivered) and refusals not.
#[tokio::test]
async fn batches_and_queue_messages_are_journaled_once_per_applied_item() {
    let app = spawn_journaled(Config::default_boards()).await;
    let events = json!({"events": [
        {"event_id": "b1", "user_id": "ann", "action": "learning"},
        {"event_id": "b2", "user_id": "bob", "action": "learning"},
        {"event_id": "b1", "user_id": "ann", "action": "learning"},
        {"event_id": "b1", "user_id": "ann", "action": "qa"},
    ]});
    let (status, reply) = app.post("/v1/events:batch", &events).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let scores = json!({"scores": [
        {"event_id": "g1", "user_id": "ann", "score": 40},
        {"event_id": "g1", "user_id": "ann", "score": 40},
        {"event_id": "g1", "user_id": "ann", "score": 41},
    ]});
    let (status, reply) = app.post("/v1/boards/high-scores/scores:batch", &scores).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(app.journal_len("points").await, 2, "b1 and b2: not b1 again, not b1's conflicting payload");
    assert_eq!(app.journal_len("high-scores").await, 1, "g1 once, not again nor with another score");

    let client = standings_tests::queue::sqs().await;
    let dlq = standings_tests::queue::new_queue(&client, "dlq").await;
    let queue = app.queue(queue::DeadLetters::new(client.clone(), dlq));
    let message = json!({"event_id": "q1", "user_id": "dee", "action": "learning"}).to_string();
    let score = json!({"kind": "score", "board": "high-scores", "event_id": "q2", "user_id": "dee", "score": 7}).to_string();
    let records = vec![
        standings_tests::queue::record("m1", &message, 1),
        standings_tests::queue::record("m2", &message, 2),
        standings_tests::queue::record("m3", &score, 1),
        standings_tests::queue::record("m4", "{not json", 1),
    ];
    let response = queue.handle(standings_tests::queue::sqs_event(records)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(app.journal_len("points").await, 3, "q1 once, though delivered twice");
    assert_eq!(app.journal_len("high-scores").await, 2);

    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let report = app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).drain(far()).await;
    assert!(report.boards.iter().all(|b| b.error.is_none()), "{report:?}");
    let counts = by_event_id(&lines(&client, &bucket, &app).await);
    let expected: HashMap<String, usize> = ["b1", "b2", "g1", "q1", "q2"].iter().map(|id| (id.to_string(), 1)).collect();
    assert_eq!(counts, expected);
}

#[tokio::test]
async fn a_drain_moves_every_entry_to_s3_by_board_and_date_and_trims_only_what_it_stored() {
    let app = spawn_journaled(Config::default_boards()).await;
    for i in 0..23 {
        let (status, _) = app
            .event(json!({"event_id": format!("e{i}"), "user_id": format!("u{}", i % 5), "action": "page_view", "target": format!("p{i}")}))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(app.journal_len("activity").await, 23);
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let metrics = Arc::new(Mutex::new(Vec::new()));
    let drainer = app.drainer(S3Objects::new(client.clone(), &bucket), metrics.clone()).with_chunk(7);
    // A run past its deadline stores nothing and says it did not complete (the CLI invokes it again).
    let stopped = app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).drain(Utc::now() - Duration::seconds(1)).await;
    assert!(!stopped.complete && stopped.entries == 0, "{stopped:?}");
    assert_eq!(app.journal_len("activity").await, 23);
    let report = drainer.drain(far()).await;
    assert!(report.complete, "{report:?}");
    assert_eq!(report.entries, 23);
    assert_eq!(report.lag_seconds, 0.0);
    assert_eq!(app.journal_len("activity").await, 0, "trimmed once stored");

    let names = object_names(&client, &bucket, &app).await;
    assert_eq!(names.len(), 4, "chunks of 7: {names:?}");
    let today = Utc::now().date_naive();
    let partition = format!("journal/prefix={}/board=activity/dt=", app.keys.prefix());
    assert!(names.iter().all(|n| n.starts_with(&partition) && n.ends_with(".jsonl")), "{names:?}");
    assert!(names.iter().any(|n| n.contains(&format!("dt={today}/")) || n.contains(&format!("dt={}/", today.pred_opt().unwrap()))));
    let lines = lines(&client, &bucket, &app).await;
    let counts = by_event_id(&lines);
    assert_eq!(counts.len(), 23);
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    let ids: Vec<&str> = lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] != w[1]));

    let lag = metrics.lock().unwrap().iter().find(|m| m.get("JournalLagSeconds").is_some()).cloned().expect("the lag metric");
    assert_eq!(lag["JournalLagSeconds"], 0.0);
    // Nothing new: a second drain stores nothing.
    assert_eq!(drainer.drain(far()).await.entries, 0);
    assert_eq!(object_names(&client, &bucket, &app).await.len(), 4);
}

#[tokio::test]
async fn a_drain_killed_between_the_s3_write_and_the_trim_loses_nothing_and_duplicates_nothing() {
    let app = spawn_journaled(Config::default_boards()).await;
    let send = |from: usize, to: usize| {
        let app = &app;
        async move {
            for i in from..to {
                let event = json!({"event_id": format!("e{i}"), "user_id": "ann", "action": "page_view", "target": format!("p{i}")});
                assert_eq!(app.event(event).await.0, StatusCode::OK);
            }
        }
    };
    send(0, 10).await;
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let crashing = CrashAfterPut { inner: S3Objects::new(client.clone(), &bucket), puts: Mutex::new(0) };
    let killed = app.drainer(crashing, Arc::default()).with_chunk(4).drain(far()).await;
    assert!(killed.boards.iter().any(|b| b.error.is_some()), "{killed:?}");
    assert_eq!(app.journal_len("activity").await, 10, "nothing trimmed: the drain died after storing");
    assert_eq!(object_names(&client, &bucket, &app).await.len(), 1);

    // More writes arrive before the next run, which finds the stored chunk and goes on. It
    // reads larger chunks: the object, not what it reads now, says what is stored.
    send(10, 15).await;
    let report = app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).with_chunk(6).drain(far()).await;
    assert!(report.boards.iter().all(|b| b.error.is_none()), "{report:?}");
    assert_eq!(app.journal_len("activity").await, 0);
    let counts = by_event_id(&lines(&client, &bucket, &app).await);
    assert_eq!(counts.len(), 15, "{counts:?}");
    assert!(counts.values().all(|&n| n == 1), "every event once: {counts:?}");
}

#[tokio::test]
async fn concurrent_writes_and_racing_drains_store_every_entry_exactly_once() {
    let app = spawn_journaled(Config::default_boards()).await;
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let writers = (0..8).map(|w| {
        let app = &app;
        async move {
            for i in 0..40 {
                let event =
                    json!({"event_id": format!("w{w}-{i}"), "user_id": format!("u{w}"), "action": "page_view", "target": format!("p{i}")});
                assert_eq!(app.event(event).await.0, StatusCode::OK);
            }
        }
    });
    let drains = (0..3).map(|_| {
        let drainer = app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).with_chunk(9);
        async move {
            for _ in 0..5 {
                let report = drainer.drain(far()).await;
                assert!(report.boards.iter().all(|b| b.error.is_none()), "{report:?}");
            }
        }
    });
    futures::join!(join_all(writers), join_all(drains));
    let last = app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).drain(far()).await;
    assert!(last.boards.iter().all(|b| b.error.is_none()));
    assert_eq!(app.journal_len("activity").await, 0);
    let counts = by_event_id(&lines(&client, &bucket, &app).await);
    assert_eq!(counts.len(), 320);
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
}

#[tokio::test]
async fn duckdb_reads_every_applied_event_once() {
    let app = spawn_journaled(Config::default_boards()).await;
    let mut applied = Vec::new();
    for i in 0..30 {
        let id = format!("e{i}");
        let (status, _) = app.event(json!({"event_id": id, "user_id": format!("u{}", i % 4), "action": "learning"})).await;
        assert_eq!(status, StatusCode::OK);
        applied.push(id);
    }
    // Duplicates and a refusal add nothing.
    app.event(json!({"event_id": "e3", "user_id": "u3", "action": "learning"})).await;
    app.event(json!({"event_id": "e3", "user_id": "u3", "action": "qa"})).await;
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).with_chunk(8).drain(far()).await;

    // The objects as a bucket listing holds them, under their own names, for DuckDB to read
    // with its Hive partitioning (board=…/dt=… become columns).
    let dir = std::env::temp_dir().join(format!("journal-{}", app.keys.prefix()));
    let objects = S3Objects::new(client.clone(), &bucket);
    for name in object_names(&client, &bucket, &app).await {
        let path = dir.join(&name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, journal::Objects::get(&objects, &name).await.unwrap()).unwrap();
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/journal/read.py");
    let out = std::process::Command::new("python3").arg(script).arg(dir.join("journal")).output().expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<(String, String, i64)> = serde_json::from_slice(&out.stdout).expect("read.py prints JSON");
    let mut ids: Vec<String> = rows
        .iter()
        .map(|(id, _, n)| {
            assert_eq!(*n, 1, "{id} appears {n} times");
            id.clone()
        })
        .collect();
    ids.sort();
    applied.sort();
    assert_eq!(ids, applied);
    assert!(rows.iter().all(|(_, board, _)| board == "points"));
    std::fs::remove_dir_all(&dir).ok();
}

/// A board's writes record their effects as JSON until a drain trims its journal (the guard's
/// `compact`: a drain of an older release, part-way through a deploy, reads only JSON or compact
/// text), then compact text, then packed (MessagePack) once `PACKED_AFTER_MS` have passed since
/// this release's first trim (a drain run of the release before has ended by then); compact text
/// again while a drain of the release before trims it (`1`). The drain stores each in S3 as the
/// JSON a line carries (docs/journal.md#effects).
#[tokio::test]
async fn effects_are_packed_in_the_stream_once_no_older_drain_can_read_them_and_json_in_s3() {
    use standings::domain::guard::{COMPACT, PACKED, PACKED_AFTER_MS};
    use standings::domain::journal::Effects;
    let app = spawn_journaled(Config::default_boards()).await;
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let board = app.keys.board("activity");
    let key = board.journal();
    let mut conn = app.redis.clone();
    let drain = || async {
        let drainer = app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).with_packed_after_ms(PACKED_AFTER_MS);
        let report = drainer.drain(far()).await;
        assert!(report.complete && report.boards.iter().all(|b| b.error.is_none()), "{report:?}");
    };
    let set = |value: &str| {
        let mut conn = app.redis.clone();
        let (guard, value) = (board.guard(), value.to_owned());
        async move {
            let _: () = redis::cmd("HSET").arg(guard).arg(COMPACT).arg(value).query_async(&mut conn).await.unwrap();
        }
    };
    let mut recorded = Vec::new();
    let mut waiting = String::new();
    for i in 0..5 {
        let event = json!({"event_id": format!("e{i}"), "user_id": "u1", "action": "comment", "target": format!("p{i}")});
        assert_eq!(app.event(event).await.0, StatusCode::OK);
        let entries: Vec<(String, HashMap<String, Vec<u8>>)> =
            redis::cmd("XRANGE").arg(&key).arg("-").arg("+").query_async(&mut conn).await.unwrap();
        let [(_, fields)] = entries.as_slice() else { panic!("one entry: {entries:?}") };
        recorded.push(fields["x"].clone());
        if i == 2 {
            // As if the wait had begun long ago: this trim ends it.
            set(&format!("{PACKED}:0")).await;
        }
        drain().await;
        let held: String = redis::cmd("HGET").arg(board.guard()).arg(COMPACT).query_async(&mut conn).await.unwrap();
        match i {
            // The wait begins at this release's first trim, and a trim within it leaves it as it
            // is; one of the release before begins it again.
            0 | 4 => {
                assert!(held.starts_with(&format!("{PACKED}:")), "{held}");
                waiting = held;
            }
            1 => assert_eq!(held, waiting, "a trim within the wait"),
            _ => assert_eq!(held, PACKED),
        }
        if i == 3 {
            // A drain of the release before trimmed it.
            set("1").await;
        }
    }
    let text = |bytes: &Vec<u8>| String::from_utf8(bytes.clone()).unwrap();
    assert!(text(&recorded[0]).starts_with('['), "JSON before the first drain: {:?}", recorded[0]);
    let compact = [text(&recorded[1]), text(&recorded[2]), text(&recorded[4])];
    for compact in &compact {
        assert!(!compact.starts_with('[') && !compact.contains('"') && Effects::parse_compact(compact).is_ok(), "{compact:?}");
    }
    let packed = &recorded[3];
    assert_eq!(packed[0], standings::domain::effects::PACKED, "{packed:?}");
    let effects = Effects::parse_packed(packed).unwrap();
    assert!(effects.commands.iter().any(|c| c.name == "ZADD" && c.key.starts_with(":z:")), "{effects:?}");
    assert!(packed.len() < compact[0].len(), "packed {} bytes, compact {}", packed.len(), compact[0].len());

    let lines = lines(&client, &bucket, &app).await;
    assert_eq!(lines.len(), 5, "{lines:?}");
    let json: serde_json::Value = serde_json::from_str(&text(&recorded[0])).unwrap();
    assert_eq!(Effects::parse(&lines[0]["effects"]).unwrap(), Effects::parse(&json).unwrap());
    for (line, compact) in [(1, &compact[0]), (2, &compact[1]), (4, &compact[2])] {
        assert_eq!(Effects::parse(&lines[line]["effects"]).unwrap(), Effects::parse_compact(compact).unwrap());
    }
    assert_eq!(Effects::parse(&lines[3]["effects"]).unwrap(), effects);
}

/// The same write on the same state records the same commands, words included (binary digests,
/// composites, counts), packed as in compact text: two deployments side by side, one whose
/// guard says packed and one compact.
#[tokio::test]
async fn the_same_write_records_the_same_effects_packed_and_as_compact_text() {
    use standings::domain::guard::{COMPACT, PACKED};
    use standings::domain::journal::Effects;
    let mut recorded = Vec::new();
    let now = chrono::DateTime::parse_from_rfc3339("2026-03-04T05:06:07.089Z").unwrap().with_timezone(&chrono::Utc);
    for form in [PACKED, "1"] {
        let app = spawn_journaled(Config::default_boards()).await;
        app.set_now(now);
        let board = app.keys.board("points");
        let mut conn = app.redis.clone();
        let _: () = redis::cmd("HSET").arg(board.guard()).arg(COMPACT).arg(form).query_async(&mut conn).await.unwrap();
        for (i, action) in ["learning", "qa", "learning"].into_iter().enumerate() {
            let event = json!({"event_id": format!("e{i}"), "user_id": "u1", "action": action});
            assert_eq!(app.event(event).await.0, StatusCode::OK);
        }
        let entries: Vec<(String, HashMap<String, Vec<u8>>)> =
            redis::cmd("XRANGE").arg(board.journal()).arg("-").arg("+").query_async(&mut conn).await.unwrap();
        let read: Vec<Effects> = entries
            .iter()
            .map(|(_, fields)| match form {
                PACKED => Effects::parse_packed(&fields["x"]).unwrap(),
                _ => Effects::parse_compact(std::str::from_utf8(&fields["x"]).unwrap()).unwrap(),
            })
            .collect();
        assert_eq!(read.len(), 3);
        recorded.push(read);
    }
    // The guard's record of a marker bucket holds its expiry on Redis's clock: its field only.
    let commands = |effects: &[Effects]| {
        let mut commands: Vec<_> = effects.iter().flat_map(|e| e.commands.clone()).collect();
        commands.iter_mut().filter(|c| c.key == ":guard" && c.args[0].starts_with(b"marks|")).for_each(|c| c.args.truncate(1));
        commands
    };
    assert_eq!(commands(&recorded[0]), commands(&recorded[1]));
    assert!(
        recorded[0].iter().flat_map(|e| &e.commands).any(|c| c.name == "HSET" && c.args.iter().any(|a| a.iter().any(|b| !b.is_ascii())))
    );
}
