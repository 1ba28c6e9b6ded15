//! No client id names another key: an event id shaped like a marker bucket's name
//! (`<day>:<shard>`) cannot turn a shard's markers into another type and wedge every user on it.
//! And a programming error from Redis (a key of the wrong type) is a 500, never a retryable 503.

use chrono::NaiveDate;
use serde_json::json;
use standings::redis::scripts::MarkerSlot;
use standings_tests::{season, spawn_ingest};

#[tokio::test]
async fn a_sign_in_whose_id_names_a_marker_bucket_does_not_wedge_that_shards_events() {
    let app = spawn_ingest().await;
    // The points board's local day now (Asia/Shanghai, 2026-11-22), as marker buckets count it.
    let local_day = app.now().with_timezone(&chrono_tz::Asia::Shanghai).date_naive();
    let day_number = local_day.signed_duration_since(NaiveDate::default()).num_days();
    let victim = "lesson-1";
    let shard = MarkerSlot::of(victim).shard;
    let forged = format!("{day_number}:{shard}");
    for day in [day_number - 1, day_number, day_number + 1] {
        let (status, reply) = app.post("/v1/sign-ins", &json!({"event_id": format!("{day}:{shard}"), "user_id": "mallory"})).await;
        assert_eq!(status, 200, "{forged}: {reply}");
    }

    let (status, reply) = app.event(json!({"event_id": victim, "user_id": "ann", "action": "learning"})).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(app.points("points", season("2026-11-22"), "ann").await, Some(10));
    let (status, retry) = app.event(json!({"event_id": victim, "user_id": "ann", "action": "learning"})).await;
    assert_eq!((status.as_u16(), &retry["duplicate"]), (200, &json!(true)), "{retry}");
}

#[tokio::test]
async fn a_key_of_the_wrong_type_is_an_internal_error_not_a_retry_later() {
    let app = spawn_ingest().await;
    let board = app.keys.board("points").period(&season("2026-11-22"));
    let () = redis::cmd("SET").arg(&board).arg("not a sorted set").query_async(&mut app.redis.clone()).await.unwrap();
    let (status, headers, reply) = app
        .call_with_headers(
            axum::http::Method::POST,
            "/v1/events",
            json!({"event_id": "e1", "user_id": "ann", "action": "learning"}).to_string(),
            standings_tests::WRITER,
        )
        .await;
    assert_eq!((status.as_u16(), reply["error"]["code"].as_str()), (500, Some("internal")), "{reply}");
    assert!(headers.get("retry-after").is_none(), "a programming error is not worth retrying");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(!message.contains("WRONGTYPE") && !message.contains("redis"), "no internals leak: {message}");
    let counted = app.metrics.lock().unwrap().iter().any(|line| line["Code"] == "internal" && line["Events"] == 1.0);
    assert!(counted, "the error is counted in Events{{Code=internal}}: {:?}", app.metrics.lock().unwrap());
}

#[tokio::test]
async fn a_string_an_earlier_release_left_at_a_buckets_name_is_cleared_not_a_wedge() {
    let app = spawn_ingest().await;
    // Before the markers moved to `mark:`, a sign-in with id `<day>:<shard>` wrote a string there.
    let local_day = app.now().with_timezone(&chrono_tz::Asia::Shanghai).date_naive();
    let day_number = local_day.signed_duration_since(NaiveDate::default()).num_days();
    let victim = "lesson-2";
    let bucket = app.keys.board("points").marker_bucket(day_number, MarkerSlot::of(victim).shard);
    let () = redis::cmd("SET").arg(&bucket).arg("fingerprint\n{}").arg("EX").arg(3600).query_async(&mut app.redis.clone()).await.unwrap();
    let (status, reply) = app.event(json!({"event_id": victim, "user_id": "ann", "action": "learning"})).await;
    assert_eq!(status, 200, "{reply}");
    let kind: String = redis::cmd("TYPE").arg(&bucket).query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(kind, "hash", "the bucket holds the new marker");
    let (status, retry) = app.event(json!({"event_id": victim, "user_id": "ann", "action": "learning"})).await;
    assert_eq!((status.as_u16(), &retry["duplicate"]), (200, &json!(true)), "{retry}");
}
