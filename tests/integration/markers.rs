//! Event markers: fields of small day-bucketed hashes (not a string key per event), kept to the
//! end of the next local day. Ledger entries: stored under a digest, and honoured when an
//! earlier release wrote them readable.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use standings::redis::scripts::MarkerSlot;
use standings_tests::{at, day, spawn_ingest};

async fn query<T: redis::FromRedisValue>(app: &standings_tests::TestApp, cmd: &mut redis::Cmd) -> T {
    cmd.query_async(&mut app.redis.clone()).await.unwrap()
}

#[tokio::test]
async fn a_marker_is_a_field_of_a_day_bucket_kept_to_the_end_of_the_next_utc_day() {
    let app = spawn_ingest().await;
    app.set_now(at("2026-11-22T10:00:00Z"));
    let event = json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"});
    let (status, first) = app.event(event.clone()).await;
    assert_eq!(status, 200, "{first}");

    let markers: Vec<String> = app.written_keys().await.into_iter().filter(|k| k.contains(":evt:")).collect();
    let slot = MarkerSlot::of("e1");
    // The bucket of the board's local day (Asia/Shanghai: 18:00 on the 22nd).
    let day_number = at("2026-11-22T00:00:00Z").timestamp() / 86_400;
    assert_eq!(markers, [app.keys.board("activity").marker_bucket(day_number, slot.shard)]);
    let bucket = &markers[0];
    assert_eq!(query::<String>(&app, redis::cmd("TYPE").arg(bucket)).await, "hash");
    assert_eq!(query::<String>(&app, redis::cmd("OBJECT").arg("ENCODING").arg(bucket)).await, "listpack");
    let value: Vec<u8> = query(&app, redis::cmd("HGET").arg(bucket).arg(&slot.field[..])).await;
    assert_eq!(&value[4..], b"a3", "4 bytes of fingerprint, then the receipt: applied, +3");
    // The bucket goes at the end of the 23rd, local time (16:00 UTC), 30 hours on.
    let ttl: i64 = query(&app, redis::cmd("TTL").arg(bucket)).await;
    assert!((30 * 3600 - 5..=30 * 3600).contains(&ttl), "{ttl}");

    // 23 hours later (another day, in UTC and on the board), the retry is still a duplicate,
    // reports the periods the event landed in, and writes nothing.
    app.set_now(at("2026-11-23T09:00:00Z"));
    let before = app.keyspace().await;
    let (status, retry) = app.event(event.clone()).await;
    assert_eq!((status.as_u16(), &retry["duplicate"]), (200, &json!(true)), "{retry}");
    assert_eq!(retry["results"], first["results"]);
    assert_eq!(app.keyspace().await, before);
    // With another payload it is still a conflict.
    let (status, _) = app.event(json!({"event_id": "e1", "user_id": "u2", "action": "comment", "target": "a1"})).await;
    assert_eq!(status, 409);
}

#[tokio::test]
async fn a_duplicate_reports_the_first_decision_and_the_standing_now() {
    let app = spawn_ingest().await;
    let (_, first) = app.event(json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"})).await;
    app.event(json!({"event_id": "e2", "user_id": "u1", "action": "praise", "target": "a1"})).await;
    let (_, retry) = app.event(json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"})).await;
    assert_eq!(retry["duplicate"], true);
    let (first, retry) = (&first["results"][0], &retry["results"][0]);
    for field in ["applied", "delta", "capped"] {
        assert_eq!(first[field], retry[field], "{field}");
    }
    assert_eq!(first["periods"][0]["score"], 3);
    assert_eq!(retry["periods"][0]["score"], 5, "the standing now, after the praise");
    assert_eq!(retry["periods"][0]["delta"], 3, "what this event changed");
}

#[tokio::test]
async fn a_big_board_day_keeps_every_marker_bucket_compact() {
    let app = spawn_ingest().await;
    for batch in 0..8 {
        let events: Vec<Value> = (0..500)
            .map(|i| json!({"event_id": format!("b{batch}-{i}"), "user_id": format!("u{}", i % 50), "action": "page_view", "target": format!("/p/{batch}/{i}")}))
            .collect();
        let (status, body) = app.post("/v1/events:batch", &json!({ "events": events })).await;
        assert_eq!(status, 200, "{body}");
    }
    let buckets: Vec<String> = app.written_keys().await.into_iter().filter(|k| k.contains(":evt:")).collect();
    let mut markers = 0;
    for bucket in &buckets {
        assert_eq!(query::<String>(&app, redis::cmd("OBJECT").arg("ENCODING").arg(bucket)).await, "listpack", "{bucket}");
        markers += query::<u64>(&app, redis::cmd("HLEN").arg(bucket)).await;
    }
    assert_eq!(markers, 4_000, "one marker per event");
    let bytes: u64 = {
        let mut total = 0;
        for bucket in &buckets {
            total += query::<u64>(&app, redis::cmd("MEMORY").arg("USAGE").arg(bucket)).await;
        }
        total
    };
    // Spread thin over 1,024 shards, so each bucket's own overhead dominates here; a string
    // marker per event cost about 300 bytes.
    assert!(bytes / markers < 60, "{} bytes a marker", bytes / markers);
}

/// The day ledger of `user` on the `activity` board for 2026-11-22, field by field.
async fn day_ledger(app: &standings_tests::TestApp, user: &str) -> (String, Vec<(Vec<u8>, i64)>) {
    let key = app.keys.board("activity").day_ledger(user, "2026-11-22");
    let fields: Vec<(Vec<u8>, i64)> = query(app, redis::cmd("HGETALL").arg(&key)).await;
    (key, fields)
}

#[tokio::test]
async fn a_ledger_entry_is_stored_under_8_bytes_of_its_digest() {
    let app = spawn_ingest().await;
    let (status, body) = app.event(json!({"event_id": "p1", "user_id": "u1", "action": "praise", "target": "article-7"})).await;
    assert_eq!(status, 200, "{body}");
    let (_, fields) = day_ledger(&app, "u1").await;
    assert_eq!(fields, [(Sha256::digest(b"praise|article-7")[..8].to_vec(), 2)]);
}

#[tokio::test]
async fn ledger_entries_written_readable_by_an_earlier_release_still_count() {
    let app = spawn_ingest().await;
    app.event(json!({"event_id": "p1", "user_id": "u1", "action": "praise", "target": "a1"})).await;
    // Rewrite the entry as an earlier release stored it: the readable `action|target`.
    let (key, fields) = day_ledger(&app, "u1").await;
    let () = query(&app, redis::cmd("DEL").arg(&key)).await;
    let () = query(&app, redis::cmd("HSET").arg(&key).arg("praise|a1").arg(fields[0].1)).await;

    let (_, again) = app.event(json!({"event_id": "p2", "user_id": "u1", "action": "praise", "target": "a1"})).await;
    assert_eq!((&again["results"][0]["applied"], &again["results"][0]["reason"]), (&json!(false), &json!("already_counted")), "{again}");
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(2));

    let (_, back) = app.event(json!({"event_id": "p3", "user_id": "u1", "action": "praise", "target": "a1", "active": false})).await;
    assert_eq!((&back["results"][0]["applied"], &back["results"][0]["delta"]), (&json!(true), &json!(-2)), "{back}");
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, None);
    let (_, fields) = day_ledger(&app, "u1").await;
    assert_eq!(fields, [], "the take-back removed the old entry");
}
