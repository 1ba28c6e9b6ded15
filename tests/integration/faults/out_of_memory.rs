//! `maxmemory` reached with `noeviction`, on a server of the test's own: every write is a 503
//! `store_full` and nothing changes. The scripts start with the `#!lua` shebang, so Redis 7
//! refuses the whole script before it runs (counted as a rejected EVALSHA; not one command of
//! the script is executed) instead of failing at its first write.

use std::collections::BTreeMap;

use serde_json::json;
use standings::domain::config::Config;
use standings::redis::settings::RedisSettings;
use standings_tests::servers::RedisServer;
use standings_tests::{TestApp, day, spawn_ingest_at};

/// Every key this test wrote, with its serialized value.
async fn snapshot(app: &TestApp) -> BTreeMap<String, Vec<u8>> {
    let mut values = BTreeMap::new();
    for key in app.written_keys().await {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(&key).query_async(&mut app.redis.clone()).await.unwrap();
        values.insert(key, dump);
    }
    values
}

/// `calls` and `rejected_calls` of one command from INFO commandstats.
async fn command_stats(app: &TestApp, command: &str) -> (u64, u64) {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(&mut app.redis.clone()).await.unwrap();
    let Some(line) = info.lines().find(|l| l.starts_with(&format!("cmdstat_{command}:"))) else { return (0, 0) };
    let field = |name: &str| line.split([':', ',']).find_map(|kv| kv.strip_prefix(&format!("{name}="))).map_or(0, |v| v.parse().unwrap());
    (field("calls"), field("rejected_calls"))
}

#[tokio::test]
async fn a_full_store_is_a_503_and_writes_nothing() {
    let server = RedisServer::start(&["--maxmemory-policy", "noeviction"]).await;
    let app = spawn_ingest_at(Config::default_boards(), &RedisSettings::standalone(&server.url())).await;
    let comment = json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"});
    assert_eq!(app.event(comment.clone()).await.0, 200);
    // Each board's layout probed (once per container every 30 s, outside the scripts).
    let invite = json!({"event_id": "e0", "user_id": "u1", "action": "invite", "target": "u8"});
    assert_eq!(app.event(invite).await.0, 200);
    let before = snapshot(&app).await;
    let () = redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(1).query_async(&mut app.redis.clone()).await.unwrap();
    let ((evalsha_calls, evalsha_rejected), (zadd_calls, _), (get_calls, _)) =
        (command_stats(&app, "evalsha").await, command_stats(&app, "zadd").await, command_stats(&app, "get").await);

    let refused = [
        json!({"event_id": "e2", "user_id": "u2", "action": "comment", "target": "a1"}),
        json!({"event_id": "e3", "user_id": "u1", "action": "comment", "target": "a1", "active": false}),
        json!({"event_id": "e4", "user_id": "u3", "action": "invite", "target": "u9"}),
    ];
    for event in &refused {
        let (status, headers, body) =
            app.call_with_headers(axum::http::Method::POST, "/v1/events", event.to_string(), standings_tests::WRITER).await;
        assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (503, Some("store_full")), "{body}");
        assert_eq!(headers.get("retry-after").map(|v| v.to_str().unwrap()), Some("5"));
        assert!(!body.to_string().contains("OOM"), "the body does not carry Redis's message: {body}");
    }
    assert_eq!(snapshot(&app).await, before, "no key changed");
    // Refused up front: each call rejected, not one command of the script run.
    let (calls, rejected) = command_stats(&app, "evalsha").await;
    assert_eq!((calls - evalsha_calls, rejected - evalsha_rejected), (0, refused.len() as u64));
    assert_eq!(command_stats(&app, "get").await.0, get_calls, "the script's first command never ran");
    assert_eq!(command_stats(&app, "zadd").await.0, zadd_calls);

    // Room again: the refused events apply once when retried.
    let () = redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(0).query_async(&mut app.redis.clone()).await.unwrap();
    for event in refused {
        let (status, body) = app.event(event).await;
        assert_eq!((status.as_u16(), &body["duplicate"]), (200, &json!(false)), "{body}");
    }
    assert_eq!(app.points("activity", day("2026-11-22"), "u2").await, Some(3));
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, None, "the take-back applied");
}
