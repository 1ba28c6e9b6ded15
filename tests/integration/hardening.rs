//! Inputs that once crashed a function: dates and months beyond the documented range
//! (2020-01-01..=2088-01-18), which chrono parses (`+262142-12-31`) but period arithmetic
//! cannot follow. Every one is answered 400, and the function serves the next request.

use axum::http::Method;
use serde_json::json;
use standings::redis::settings::RedisSettings;
use standings::redis::store::Store;
use standings_tests::{ArchiveHarness, spawn_ingest};

const FAR: [&str; 4] = ["%2B262142-12-31", "-262143-01-01", "9999-12-31", "2019-12-31"];

#[tokio::test]
async fn dates_beyond_the_range_are_refused_on_every_read_route() {
    let app = spawn_ingest().await;
    for date in FAR {
        for path in [
            format!("/v1/boards/activity/top?at={date}"),
            format!("/v1/boards/points/top?period=season&at={date}"),
            format!("/v1/boards/activity/users/u1?at={date}"),
        ] {
            let (status, body) = app.get(&path).await;
            assert_eq!(status, 400, "{path}: {body}");
            assert!(matches!(body["error"]["code"].as_str(), Some("out_of_range" | "malformed")), "{path}: {body}");
        }
        let ranks = json!({"user_ids": ["u1"], "at": date.replace("%2B", "+")}).to_string();
        let (status, body) = app.call_query(Method::POST, "/v1/boards/activity/ranks", ranks).await;
        assert_eq!(status, 400, "ranks at {date}: {body}");
    }
    for month in ["%2B262142-12", "9999-12", "2019-12"] {
        let (status, body) = app.get(&format!("/v1/users/u1/sign-ins?month={month}")).await;
        assert_eq!(status, 400, "{month}: {body}");
    }
    let (status, _) = app.get("/v1/boards/activity/top?at=2026-11-22").await;
    assert_eq!(status, 200, "the function still serves");
}

#[tokio::test]
async fn far_seasons_are_refused_on_the_archived_season_routes() {
    let harness = ArchiveHarness::new().await;
    let app = harness.app().await;
    for season in ["%2B262142-12", "9999-12", "-262143-01"] {
        for path in [format!("/v1/boards/points/seasons/{season}/top"), format!("/v1/boards/points/seasons/{season}/users/u1")] {
            let (status, body) = app.get(&path).await;
            assert_eq!(status, 400, "{path}: {body}");
        }
    }
}

#[tokio::test]
async fn far_dates_in_writes_are_refused_and_write_nothing() {
    let app = spawn_ingest().await;
    let before = app.keyspace().await;
    let path = "/v1/admin/boards/activity/users/u1/corrections";
    for body in [
        json!({"delta": 1, "reason": "r", "at": "+262142-12-31"}),
        json!({"delta": 1, "reason": "r", "period": "month", "period_id": "+262142-12"}),
    ] {
        let (status, reply) = app.call(Method::POST, path, body.to_string(), standings_tests::ADMIN).await;
        assert_eq!(status, 400, "{body}: {reply}");
    }
    for occurred_at in ["+262142-12-31T00:00:00Z", "-262143-01-01T00:00:00Z"] {
        let (status, reply) =
            app.event(json!({"event_id": "e", "user_id": "u1", "action": "comment", "target": "a", "occurred_at": occurred_at})).await;
        assert!(status.is_client_error(), "{occurred_at}: {reply}");
    }
    let (status, reply) = app.post("/v1/sign-ins", &json!({"event_id": "s", "user_id": "u1", "date": "+262142-12-31"})).await;
    assert!(status.is_client_error(), "{reply}");
    assert_eq!(app.keyspace().await, before);
}

#[tokio::test]
async fn a_store_that_may_evict_keys_refuses_writes_unless_allowed() {
    let server = standings_tests::servers::RedisServer::start(&["--maxmemory-policy", "volatile-lru"]).await;
    let app = standings_tests::spawn_ingest_at(
        standings::domain::config::Config::default_boards(),
        &standings::redis::settings::RedisSettings::standalone(&server.url()),
    )
    .await;
    let event = json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a"});
    let (status, body) = app.event(event.clone()).await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (503, Some("store_misconfigured")), "{body}");
    for (path, request) in [
        ("/v1/sign-ins", json!({"event_id": "s1", "user_id": "u1"})),
        ("/v1/hot/hot-videos/items/v1", json!({"event_id": "h1"})),
        ("/v1/boards/high-scores/scores", json!({"event_id": "g1", "user_id": "u1", "score": 5})),
    ] {
        let (status, body) = app.post(path, &request).await;
        assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (503, Some("store_misconfigured")), "{path}: {body}");
    }
    // Batches answer each item as a single write would have been answered.
    for (path, request) in [
        ("/v1/events:batch", json!({"events": [{"event_id": "b1", "user_id": "u1", "action": "comment", "target": "a"}]})),
        ("/v1/boards/high-scores/scores:batch", json!({"scores": [{"event_id": "g2", "user_id": "u1", "score": 5}]})),
    ] {
        let (status, body) = app.post(path, &request).await;
        let item = &body["results"][0];
        assert_eq!(
            (status.as_u16(), item["status"].as_u64(), item["error"]["code"].as_str()),
            (200, Some(503), Some("store_misconfigured")),
            "{path}: {body}"
        );
    }
    let correction = json!({"delta": 1, "reason": "r"}).to_string();
    let (status, _) = app.call(Method::POST, "/v1/admin/boards/activity/users/u1/corrections", correction, standings_tests::ADMIN).await;
    assert_eq!(status, 503);
    assert_eq!(app.keyspace().await, Vec::new(), "nothing was written");
    let (_, health) = app.get("/v1/health").await;
    assert_eq!((&health["store"]["eviction_risk"], &health["store"]["writes_accepted"]), (&json!(true), &json!(false)), "{health}");

    // An operator may accept the risk explicitly.
    let mut settings = standings::redis::settings::RedisSettings::standalone(&server.url());
    settings.allow_evicting_policy = true;
    let allowed = standings_tests::spawn_ingest_at(standings::domain::config::Config::default_boards(), &settings).await;
    let (status, body) = allowed.event(event).await;
    assert_eq!(status, 200, "{body}");
}

/// A stand-in for the AWS Parameters and Secrets Lambda Extension on a loopback port: it
/// answers `GET /secretsmanager/get?secretId=<id>` with `{"SecretString": …}` when the
/// request carries the session token, as the extension does, and 401 otherwise.
async fn secrets_extension(secret_id: &'static str, secret: String, token: &'static str) -> u16 {
    use axum::extract::Query;
    use axum::http::{HeaderMap, StatusCode};
    let handler = move |headers: HeaderMap, Query(query): Query<std::collections::HashMap<String, String>>| {
        let secret = secret.clone();
        async move {
            if headers.get("X-Aws-Parameters-Secrets-Token").and_then(|v| v.to_str().ok()) != Some(token) {
                return Err(StatusCode::UNAUTHORIZED);
            }
            if query.get("secretId").map(String::as_str) != Some(secret_id) {
                return Err(StatusCode::BAD_REQUEST);
            }
            Ok(axum::Json(json!({"ARN": secret_id, "Name": "standings/redis-url", "SecretString": secret})))
        }
    };
    let router = axum::Router::new().route("/secretsmanager/get", axum::routing::get(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    port
}

#[tokio::test]
async fn the_redis_url_is_read_from_secrets_manager_through_the_extension_at_start() {
    const ARN: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:standings/redis-url-AbCdEf";
    let port = secrets_extension(ARN, standings_tests::redis_url(), "session-token").await;
    let env = move |token: &'static str| {
        move |name: &str| match name {
            "REDIS_URL_SECRET" => Some(ARN.to_owned()),
            "PARAMETERS_SECRETS_EXTENSION_HTTP_PORT" => Some(port.to_string()),
            "AWS_SESSION_TOKEN" => Some(token.to_owned()),
            // What a function's configuration would show: nothing secret.
            "REDIS_URL" => Some("redis://placeholder.invalid:6379".to_owned()),
            _ => None,
        }
    };
    let settings = RedisSettings::from_env_with_secret(env("session-token")).await.unwrap();
    let store = Store::connect(&settings).unwrap();
    let pong: String = redis::cmd("PING").query_async(&mut store.connection().await.unwrap()).await.unwrap();
    assert_eq!(pong, "PONG", "connected with the URL the secret holds");

    let refused = RedisSettings::from_env_with_secret(env("stale-token")).await.unwrap_err().to_string();
    assert!(refused.contains("401"), "{refused}");
    assert!(!refused.contains(&standings_tests::redis_url()) && !refused.contains("placeholder"), "no URL in errors: {refused}");
    let without_secret = RedisSettings::from_env_with_secret(|name| (name == "REDIS_URL").then(standings_tests::redis_url)).await.unwrap();
    assert_eq!(without_secret.urls.len(), 1, "REDIS_URL as it is when no secret is named");
}
