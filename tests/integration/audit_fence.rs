//! A board's audit log (`GET /v1/admin/audit`, docs/moderation.md) honours the journal's fence
//! like every other read of the board (docs/journal.md#fence): a board lost, or being restored,
//! answers 503 `board_restoring`, never its log as a loss left it (empty, or part of it); the
//! restore brings the log back whole (one slot and three shards). A league's cohort listing too.

use axum::http::{Method, StatusCode};
use chrono::{DateTime, Utc};
use journal::{Restorer, S3Objects};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::journal::{drain_to_new_bucket, spawn_journaled};
use standings_tests::{ADMIN, TestApp, at};

fn config(shards: u32) -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"guild\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\n\
         shards = {shards}\nrules = [{{ action = \"post\", points = 1, scope = \"none\" }}]\n"
    ))
    .unwrap()
}

fn far() -> DateTime<Utc> {
    at("2100-01-01T00:00:00Z")
}

async fn audit(app: &TestApp) -> (StatusCode, Value) {
    app.call(Method::GET, "/v1/admin/audit?board=guild&limit=100", "", ADMIN).await
}

/// Each entry's kind and user, newest first.
fn summary(log: &Value) -> Vec<(String, String)> {
    let entries = log["entries"].as_array().cloned().unwrap_or_default();
    entries.iter().map(|e| (e["kind"].as_str().unwrap_or("?").to_owned(), e["user_id"].as_str().unwrap_or("?").to_owned())).collect()
}

#[tokio::test]
async fn a_lost_boards_audit_log_answers_board_restoring_until_a_restore_brings_it_back_whole() {
    for shards in [1, 3] {
        let app = spawn_journaled(config(shards)).await;
        app.set_now(at("2026-10-20T10:00:00Z"));
        for (i, user) in ["ann", "bo", "cy", "dee"].into_iter().enumerate() {
            let (status, body) = app.event(json!({"event_id": format!("e{i}"), "user_id": user, "action": "post"})).await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
        // A second apart: a sharded board's logs are merged by time.
        let tick = || app.set_now(app.now() + chrono::Duration::seconds(1));
        tick();
        let (status, body) = app.call(Method::POST, "/v1/admin/users/bo/ban", "", ADMIN).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        tick();
        let correction = json!({"correction_id": "c1", "delta": 5, "reason": "fix"});
        let (status, body) = app.call(Method::POST, "/v1/admin/boards/guild/users/cy/corrections", correction.to_string(), ADMIN).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        tick();
        let (status, body) = app.call(Method::DELETE, "/v1/admin/users/bo/ban", "", ADMIN).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, before) = audit(&app).await;
        let expected = [("unban", "bo"), ("correction", "cy"), ("ban", "bo")].map(|(k, u)| (k.to_owned(), u.to_owned()));
        assert_eq!((status, summary(&before)), (StatusCode::OK, expected.to_vec()), "{shards} shards: {before}");

        let (client, bucket) = drain_to_new_bucket(&app, 2).await;
        let mut conn = app.redis.clone();
        for key in app.written_keys().await {
            let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.unwrap();
        }
        let (status, body) = audit(&app).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")),
            "{shards} shards, lost: {body}"
        );

        let restorer = Restorer::new(app.config.clone(), app.keys.clone(), app.store.clone(), S3Objects::new(client, &bucket));
        let restored = restorer.restore(None, far()).await.unwrap();
        assert_eq!(restored.status, journal::Status::Complete, "{restored:?}");
        let (status, after) = audit(&app).await;
        assert_eq!((status, &after), (StatusCode::OK, &before), "{shards} shards: the log back whole");
    }
}

/// The same for a league's cohort listing (`GET /v1/boards/{board}/leagues`, docs/leagues.md):
/// a lost board's cohorts answered 200 with none in every tier.
#[tokio::test]
async fn a_lost_league_boards_cohort_listing_answers_board_restoring_until_a_restore() {
    let config = Config::parse(
        "[[boards]]\nname = \"lg\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"week\"]\ntop = 10\n\
         rules = [{ action = \"play\", points = 1, scope = \"none\" }]\n\
         league = { period = \"week\", cohort_size = 2, tiers = [\"bronze\", \"gold\"], promote = 1, demote = 1 }\n",
    )
    .unwrap();
    let app = spawn_journaled(config).await;
    app.set_now(at("2026-11-26T10:00:00Z"));
    for (i, user) in ["ann", "bo", "cy"].into_iter().enumerate() {
        let (status, body) = app.event(json!({"event_id": format!("e{i}"), "user_id": user, "action": "play"})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, before) = app.get("/v1/boards/lg/leagues?tier=bronze").await;
    assert_eq!((status, before["tiers"][0]["cohorts_total"].as_u64()), (StatusCode::OK, Some(2)), "{before}");

    let (client, bucket) = drain_to_new_bucket(&app, 2).await;
    let mut conn = app.redis.clone();
    for key in app.written_keys().await {
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.unwrap();
    }
    let (status, body) = app.get("/v1/boards/lg/leagues?tier=bronze").await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "lost: {body}");

    let restorer = Restorer::new(app.config.clone(), app.keys.clone(), app.store.clone(), S3Objects::new(client, &bucket));
    assert_eq!(restorer.restore(None, far()).await.unwrap().status, journal::Status::Complete);
    let (status, after) = app.get("/v1/boards/lg/leagues?tier=bronze").await;
    assert_eq!((status, &after), (StatusCode::OK, &before), "the cohorts back");
}
