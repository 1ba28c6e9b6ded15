//! TLS and ACLs against the TLS-only redis-server scripts/test.sh starts (`--port 0
//! --tls-port`, certificates it makes with openssl, an ACL user with a password): the right
//! CA and password work end to end; a wrong CA, no CA, plain TCP to the TLS port or a wrong
//! password fail closed, as a 503 from the API and a clear error in the log.

use serde_json::json;
use standings::domain::config::Config;
use standings::redis::settings::RedisSettings;
use standings::redis::store::Store;
use standings_tests::{day, spawn_ingest_at, spawn_ingest_with_stores};

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: scripts/test.sh starts the TLS redis-server"))
}

/// Settings as a function would read them: `REDIS_URL` and `REDIS_CA_CERT`.
fn settings(scheme: &str, password: &str, ca_cert: Option<&str>) -> RedisSettings {
    let url = format!("{scheme}://{}:{password}@127.0.0.1:{}", var("STANDINGS_TEST_TLS_USER"), var("STANDINGS_TEST_TLS_PORT"));
    RedisSettings::from_vars(|name| match name {
        "REDIS_URL" => Some(url.clone()),
        "REDIS_CA_CERT" => ca_cert.map(var),
        _ => None,
    })
    .unwrap()
}

fn good() -> RedisSettings {
    settings("rediss", &var("STANDINGS_TEST_TLS_PASSWORD"), Some("STANDINGS_TEST_TLS_CA"))
}

#[tokio::test]
async fn rediss_with_the_right_ca_and_an_acl_user_applies_an_event() {
    let app = spawn_ingest_at(Config::default_boards(), &good()).await;
    let (status, body) = app.event(json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["results"][0]["applied"], true);
    assert_eq!(app.points("activity", day("2026-11-22"), "u1").await, Some(3));
    let who: String = redis::cmd("ACL").arg("WHOAMI").query_async(&mut app.redis.clone()).await.unwrap();
    assert_eq!(who, var("STANDINGS_TEST_TLS_USER"));
}

#[tokio::test]
async fn a_wrong_ca_plain_tcp_or_a_wrong_password_fail_closed() {
    let password = var("STANDINGS_TEST_TLS_PASSWORD");
    let cases = [
        (
            "a CA that did not sign the server's certificate",
            settings("rediss", &password, Some("STANDINGS_TEST_TLS_OTHER_CA")),
            "UnknownIssuer",
        ),
        ("no CA (only the public roots)", settings("rediss", &password, None), "UnknownIssuer"),
        ("plain TCP to the TLS port", settings("redis", &password, None), "reset by peer"),
        ("a wrong password", settings("rediss", "not-the-password", Some("STANDINGS_TEST_TLS_CA")), "authentication failed"),
    ];
    for (name, settings, cause) in cases {
        let store = Store::connect(&settings).unwrap();
        let app = spawn_ingest_with_stores(Config::default_boards(), store.clone(), Store::connect(&good()).unwrap()).await;
        let (status, body) = app.event(json!({"event_id": "e1", "user_id": "u1", "action": "comment", "target": "a1"})).await;
        assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (503, Some("store_unavailable")), "{name}: {body}");
        assert!(!body.to_string().contains(&password), "{name}: the body leaks the password");
        assert_eq!(app.written_keys().await, Vec::<String>::new(), "{name}: something was written");
        // What the log says: the cause, in words an operator can act on.
        let error = match store.connection().await {
            Ok(mut conn) => redis::cmd("PING").query_async::<String>(&mut conn).await.expect_err(name).to_string(),
            Err(error) => error.to_string(),
        };
        println!("{name}: {error}");
        assert!(error.contains(cause), "{name}: {error}");
    }
}
