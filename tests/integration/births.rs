//! New boards told from lost ones at a function's start (docs/journal.md#fence): a new
//! deployment takes its first writes at once, with no drain first, and a board whose history the
//! journal bucket (moto_server, asked through the functions' signed probe) or Redis holds is
//! never taken for new.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use journal::S3Objects;
use serde_json::{Value, json};
use standings::archive::objects::{ObjectError, Witness};
use standings::archive::probe::JournalProbe;
use standings::domain::config::Config;
use standings::redis::restore::Birth;
use standings::services::journal::births;
use standings_tests::journal::{new_bucket, s3, spawn_journaled, spawn_journaled_unborn};
use standings_tests::{ADMIN, TestApp};

fn probe(bucket: &str) -> JournalProbe {
    let endpoint = std::env::var("AWS_ENDPOINT_URL_S3").expect("scripts/lib.sh points S3 at moto_server");
    // CI's moto_server, busy with every other test, took over the functions' 3 s (CI151).
    JournalProbe::new(bucket, Some(&endpoint), "us-east-1").expect("the probe's TLS settings").waiting(std::time::Duration::from_secs(60))
}

/// The default boards and a sharded one.
fn config() -> Config {
    let mut text = standings::domain::config::DEFAULT_CONFIG.to_owned();
    text.push_str(
        "\n[[boards]]\nname = \"wide\"\nkind = \"scores\"\nkeep = \"best\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nshards = 3\n",
    );
    Config::parse(&text).unwrap()
}

async fn start(app: &TestApp, bucket: &str) -> BTreeMap<String, Birth> {
    let found = births::at_start(&app.config, &app.keys, &app.store, &probe(bucket)).await;
    found.into_iter().map(|(name, birth)| (name, birth.expect("judged"))).collect()
}

async fn learn(app: &TestApp, id: &str) -> (StatusCode, Value) {
    app.set_now(Utc::now());
    app.event(json!({"event_id": id, "user_id": "ann", "action": "learning"})).await
}

async fn score(app: &TestApp, user: &str, score: i64) -> StatusCode {
    app.post("/v1/boards/wide/scores", &json!({"event_id": format!("{user}-{score}"), "user_id": user, "score": score})).await.0
}

fn cup() -> Value {
    json!({"kind": "cumulative", "timezone": "UTC", "periods": ["all"], "top": 10,
        "rules": [{"action": "quiz_passed", "points": 7, "scope": "none"}]})
}

#[tokio::test]
async fn a_new_deployment_takes_its_first_writes_at_once_with_no_drain_first() {
    let app = spawn_journaled_unborn(config()).await;
    let bucket = new_bucket(&s3().await).await;
    // As a new deployment stood before: every journaled write refused until the drain's first run.
    let (status, refused) = learn(&app, "early").await;
    assert_eq!((status, refused["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{refused}");
    let found = start(&app, &bucket).await;
    let journals = app.config.boards().iter().flat_map(|b| app.keys.layout(&b.name, b.shards).journals()).count();
    assert_eq!(found.len(), journals + 1, "every declared journal and the catalog's: {found:?}");
    assert!(found.values().all(|birth| *birth == Birth::New), "{found:?}");
    let (status, took) = learn(&app, "first").await;
    assert_eq!(status, StatusCode::OK, "{took}");
    let (status, me) = app.get("/v1/boards/points/users/ann?period=season").await;
    assert_eq!((status, me["score"].as_i64()), (StatusCode::OK, Some(10)), "{me}");
    for (i, user) in ["ann", "bob", "cid", "dan"].iter().enumerate() {
        assert_eq!(score(&app, user, 100 + i as i64).await, StatusCode::OK, "the sharded board's shards are born too");
    }
    let (status, defined) = app.call(axum::http::Method::PUT, "/v1/admin/boards/cup", cup().to_string(), ADMIN).await;
    assert_eq!(status, StatusCode::CREATED, "the catalog takes a definition: {defined}");
    // Every later start: nothing left to judge.
    assert!(start(&app, &bucket).await.is_empty());
}

#[tokio::test]
async fn a_board_whose_journal_holds_its_history_is_not_taken_for_new_after_a_loss() {
    let app = spawn_journaled(config()).await;
    assert_eq!(learn(&app, "before").await.0, StatusCode::OK);
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let report = app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).drain(Utc::now() + Duration::minutes(5)).await;
    assert!(report.boards.iter().all(|b| b.error.is_none()), "{report:?}");
    // Every key of the deployment lost (a new, empty cache): the bucket alone knows `points`.
    app.lose_written_keys().await;
    let found = start(&app, &bucket).await;
    assert_eq!(found.get("points"), Some(&Birth::History), "{found:?}");
    assert!(found.iter().filter(|(name, _)| *name != "points").all(|(_, birth)| *birth == Birth::New), "{found:?}");
    let (status, refused) = learn(&app, "after").await;
    assert_eq!((status, refused["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{refused}");
    // And the drain still finds it lost (the same judgement).
    let report = app.drainer(S3Objects::new(client, &bucket), Arc::default()).drain(Utc::now() + Duration::minutes(5)).await;
    assert!(report.boards.iter().any(|b| b.board == "points" && b.lost), "{report:?}");
}

#[tokio::test]
async fn a_guard_lost_alone_while_its_stream_holds_writes_is_not_new_nor_is_a_fenced_board() {
    let app = spawn_journaled(config()).await;
    let bucket = new_bucket(&s3().await).await;
    assert_eq!(learn(&app, "undrained").await.0, StatusCode::OK);
    let points = app.keys.board("points");
    let mut redis = app.redis.clone();
    let () = redis::cmd("DEL").arg(points.guard()).query_async(&mut redis).await.unwrap();
    // A board being restored: fenced, not born.
    let wide = app.keys.layout("wide", 3).journals().remove(0);
    let wide_guard = app.keys.board(&wide).guard();
    let () = redis::cmd("DEL").arg(&wide_guard).query_async(&mut redis).await.unwrap();
    let () = redis::cmd("HSET").arg(&wide_guard).arg(standings::domain::guard::FENCE).arg(1).query_async(&mut redis).await.unwrap();
    let found = start(&app, &bucket).await;
    assert_eq!((found.get("points"), found.get(&wide)), (Some(&Birth::History), Some(&Birth::History)), "{found:?}");
    assert_eq!(found.len(), 2, "only the two unborn journals are judged: {found:?}");
    assert_eq!(learn(&app, "after").await.0, StatusCode::SERVICE_UNAVAILABLE);
}

/// A witness whose listing finds nothing because a drain stores the board's entries, and trims
/// them from its stream, between the listing and the start's mark.
struct DrainedWhileListed<'a> {
    app: &'a TestApp,
    objects: S3Objects,
}

impl Witness for DrainedWhileListed<'_> {
    async fn holds_any(&self, _prefix: &str) -> Result<bool, ObjectError> {
        let report = self.app.drainer(self.objects.clone(), Arc::default()).drain(Utc::now() + Duration::minutes(5)).await;
        assert!(report.boards.iter().all(|b| b.error.is_none()), "{report:?}");
        Ok(false)
    }
}

/// A board whose guard alone was lost, its writes still in its stream, drained to S3 and trimmed
/// between the start's listing (empty) and its mark: the mark finds an empty stream that exists,
/// which only a history leaves (the trim keeps the key), and does not take the board for new
/// (found by review: it looked for entries in the stream, which the trim had just removed).
#[tokio::test]
async fn a_board_drained_between_the_starts_listing_and_its_mark_is_not_taken_for_new() {
    let app = spawn_journaled(config()).await;
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    assert_eq!(learn(&app, "undrained").await.0, StatusCode::OK);
    let points = app.keys.board("points");
    let mut redis = app.redis.clone();
    let () = redis::cmd("DEL").arg(points.guard()).query_async(&mut redis).await.unwrap();
    let witness = DrainedWhileListed { app: &app, objects: S3Objects::new(client.clone(), &bucket) };
    let birth = births::judge(&app.config, &app.store, &app.keys, "points", &witness).await.expect("judged");
    let left: u64 = redis::cmd("XLEN").arg(points.journal()).query_async(&mut redis).await.unwrap();
    assert_eq!(left, 0, "the drain trimmed the stream between the listing and the mark");
    assert_eq!(birth, Birth::History);
    assert_eq!(learn(&app, "after").await.0, StatusCode::SERVICE_UNAVAILABLE, "no write against the history in S3");
}
