//! A marker bucket lost alone, its board's guard kept (a bad `DEL`, an eviction:
//! docs/journal.md#losses): the retry of an event it held would be applied again. The write that
//! finds a bucket its guard records gone fences the board, nothing else written, and the restore
//! brings the bucket back, after which the retry is the duplicate it is.

use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use journal::{Restorer, S3Objects, Status};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::domain::guard;
use standings::domain::period::{Period, PeriodKind};
use standings::redis::scripts::MarkerSlot;
use standings_tests::journal::drain_to_new_bucket;
use standings_tests::{TestApp, at, spawn_journaled};

fn config() -> Config {
    Config::parse(
        r#"
        [[boards]]
        name = "forum"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all"]
        top = 10
        rules = [{ action = "comment", points = 3, scope = "none" }]

        [[boards]]
        name = "arcade"
        kind = "scores"
        keep = "sum"
        timezone = "UTC"
        periods = ["all"]
        top = 10
        "#,
    )
    .unwrap()
}

fn far() -> DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

fn comment(id: &str) -> Value {
    json!({"event_id": id, "user_id": "ann", "action": "comment"})
}

async fn submit(app: &TestApp, id: &str) -> (StatusCode, Value) {
    app.post("/v1/boards/arcade/scores", &json!({"event_id": id, "user_id": "ann", "score": 5})).await
}

fn all() -> Period {
    Period::named(PeriodKind::All, "all", "UTC".parse().unwrap()).unwrap()
}

async fn all_time(app: &TestApp, board: &str) -> i64 {
    app.points(board, all(), "ann").await.unwrap_or(0)
}

/// Ann's composite on the score board's all-time set.
async fn composite(app: &TestApp) -> Option<f64> {
    let key = app.keys.board("arcade").period(&all());
    redis::cmd("ZSCORE").arg(key).arg("ann").query_async(&mut app.redis.clone()).await.unwrap()
}

/// The bucket `id`'s marker is in on `board`, a UTC board, on the day of `now`.
fn bucket_of(app: &TestApp, board: &str, id: &str, now: DateTime<Utc>) -> String {
    app.keys.board(board).marker_bucket(now.timestamp().div_euclid(86_400), MarkerSlot::of(id).shard)
}

async fn del(app: &TestApp, key: &str) {
    let _: () = redis::cmd("DEL").arg(key).query_async(&mut app.redis.clone()).await.unwrap();
}

/// Every key but the guard, as it stands.
async fn beside_the_guard(app: &TestApp, board: &str) -> Vec<(String, Vec<u8>, i64)> {
    let guard = app.keys.board(board).guard();
    app.keyspace().await.into_iter().filter(|(key, ..)| *key != guard && !key.ends_with(":journal")).collect()
}

async fn restore(app: &TestApp, board: &str) {
    let (client, bucket) = drain_to_new_bucket(app, 4).await;
    let restorer = Restorer::new(app.config.clone(), app.keys.clone(), app.store.clone(), S3Objects::new(client, &bucket));
    let report = restorer.restore(Some(board), far()).await.expect("the restore runs");
    assert_eq!(report.status, Status::Complete, "{report:?}");
}

fn refused(status: StatusCode, reply: &Value) {
    assert_eq!((status, reply["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{reply}");
}

/// Today's bucket of a rule board's event, lost alone: the retry is refused and fences the
/// board instead of giving the points again (it did, 6 instead of 3, before the guard recorded
/// its buckets); after the restore it is a duplicate.
#[tokio::test]
async fn a_retry_whose_marker_bucket_was_lost_alone_fences_the_board_instead_of_applying_again() {
    let app = spawn_journaled(config()).await;
    let now = at("2026-11-22T10:00:00Z");
    app.set_now(now);
    let (status, first) = app.event(comment("e1")).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let bucket = bucket_of(&app, "forum", "e1", now);
    let guard = app.keys.board("forum").guard();
    let mut conn = app.redis.clone();
    let held: Option<String> = redis::cmd("HGET").arg(&bucket).arg("#").query_async(&mut conn).await.unwrap();
    assert_eq!(held.as_deref(), Some("1"), "the bucket says it was created");
    let (day, shard) = (now.timestamp() / 86_400, MarkerSlot::of("e1").shard);
    let field = format!("{}{}|{}", guard::MARKS, shard / 128, day % 3);
    let marks: String = redis::cmd("HGET").arg(&guard).arg(&field).query_async(&mut conn).await.unwrap();
    let parts: Vec<&str> = marks.split('|').collect();
    let expiry: i64 = redis::cmd("PEXPIRETIME").arg(&bucket).query_async(&mut conn).await.unwrap();
    assert_eq!((parts[0], parts[1]), (day.to_string().as_str(), expiry.to_string().as_str()), "{marks}: the day, its bucket's expiry");
    let digit = u8::from_str_radix(&parts[2][usize::from(shard % 128 / 4)..][..1], 16).unwrap();
    assert_eq!((parts[2].len(), digit & (1 << (shard % 4)) != 0), (32, true), "{marks}: its bit");
    del(&app, &bucket).await;
    let kept = beside_the_guard(&app, "forum").await;

    let (status, reply) = app.event(comment("e1")).await;
    refused(status, &reply);
    assert_eq!(beside_the_guard(&app, "forum").await, kept, "nothing written but the fence");
    let (status, reply) = app.event(comment("e2")).await;
    refused(status, &reply);
    assert_eq!(all_time(&app, "forum").await, 3);

    restore(&app, "forum").await;
    let (status, retry) = app.event(comment("e1")).await;
    assert_eq!((status, &retry["duplicate"]), (StatusCode::OK, &json!(true)), "{retry}");
    assert_eq!(retry["results"][0]["delta"], first["results"][0]["delta"]);
    assert_eq!(all_time(&app, "forum").await, 3, "given once");
    assert_eq!(app.event(comment("e2")).await.0, StatusCode::OK);
    assert_eq!(all_time(&app, "forum").await, 6);
}

/// The same for a score board's submission (submit_score.lua), and for the bucket of the day
/// before, read by the next day's retry.
#[tokio::test]
async fn a_score_retry_the_next_day_whose_bucket_was_lost_alone_fences_the_board() {
    let app = spawn_journaled(config()).await;
    let now = at("2026-11-22T10:00:00Z");
    app.set_now(now);
    assert_eq!(submit(&app, "s1").await.0, StatusCode::OK);
    let once = composite(&app).await;
    assert!(once.is_some());
    app.set_now(now + Duration::days(1));
    let (status, retry) = submit(&app, "s1").await;
    assert_eq!((status, &retry["duplicate"]), (StatusCode::OK, &json!(true)), "{retry}");
    del(&app, &bucket_of(&app, "arcade", "s1", now)).await;
    let kept = beside_the_guard(&app, "arcade").await;

    let (status, reply) = submit(&app, "s1").await;
    refused(status, &reply);
    assert_eq!(beside_the_guard(&app, "arcade").await, kept, "nothing written but the fence");
    assert_eq!(composite(&app).await, once);

    restore(&app, "arcade").await;
    let (status, retry) = submit(&app, "s1").await;
    assert_eq!((status, &retry["duplicate"]), (StatusCode::OK, &json!(true)), "{retry}");
    assert_eq!(composite(&app).await, once, "summed once");
}

/// A bucket as a release before the record left it (no `#`, nothing in the guard) is not taken
/// for lost: the next write into it records it, and from then on its loss is seen.
#[tokio::test]
async fn a_bucket_from_before_the_record_is_recorded_by_its_next_write() {
    let app = spawn_journaled(config()).await;
    let now = at("2026-11-22T10:00:00Z");
    app.set_now(now);
    assert_eq!(app.event(comment("e1")).await.0, StatusCode::OK);
    let bucket = bucket_of(&app, "forum", "e1", now);
    let mut conn = app.redis.clone();
    let _: () = redis::cmd("HDEL").arg(&bucket).arg("#").query_async(&mut conn).await.unwrap();
    let guard = app.keys.board("forum").guard();
    let fields: Vec<String> = redis::cmd("HKEYS").arg(&guard).query_async(&mut conn).await.unwrap();
    for field in fields.iter().filter(|field| field.starts_with(guard::MARKS)) {
        let _: () = redis::cmd("HDEL").arg(&guard).arg(field).query_async(&mut conn).await.unwrap();
    }
    // Another id whose marker goes to the same bucket.
    let same = (0..).map(|i| format!("f{i}")).find(|id| MarkerSlot::of(id).shard == MarkerSlot::of("e1").shard).unwrap();
    assert_eq!(app.event(comment(&same)).await.0, StatusCode::OK, "an unrecorded bucket is not a loss");
    let held: Option<String> = redis::cmd("HGET").arg(&bucket).arg("#").query_async(&mut conn).await.unwrap();
    assert_eq!(held.as_deref(), Some("1"));
    del(&app, &bucket).await;
    let (status, reply) = app.event(comment(&same)).await;
    refused(status, &reply);
}

/// A bucket gone because its time is up, by Redis's clock, is no loss, whatever the writer's
/// clock says (a queue's message dated the day before, a restore deciding writes again at their
/// time): here its record's expiry is put in the past and the bucket deleted, as expiring left
/// them, and the event's retry is a new event (its marker's window passed), nothing fenced.
#[tokio::test]
async fn a_bucket_whose_time_is_up_is_no_loss() {
    let app = spawn_journaled(config()).await;
    let now = at("2026-11-22T10:00:00Z");
    app.set_now(now);
    assert_eq!(app.event(comment("e1")).await.0, StatusCode::OK);
    let (day, shard) = (now.timestamp() / 86_400, MarkerSlot::of("e1").shard);
    let (guard, field) = (app.keys.board("forum").guard(), format!("{}{}|{}", guard::MARKS, shard / 128, day % 3));
    let mut conn = app.redis.clone();
    let marks: String = redis::cmd("HGET").arg(&guard).arg(&field).query_async(&mut conn).await.unwrap();
    let (seconds, _): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    let parts: Vec<&str> = marks.split('|').collect();
    let up = format!("{}|{}|{}", parts[0], seconds * 1000 - 10_000, parts[2]);
    let _: () = redis::cmd("HSET").arg(&guard).arg(&field).arg(up).query_async(&mut conn).await.unwrap();
    del(&app, &bucket_of(&app, "forum", "e1", now)).await;
    let (status, again) = app.event(comment("e1")).await;
    assert_eq!((status, &again["duplicate"]), (StatusCode::OK, &json!(false)), "{again}");
    assert_eq!(all_time(&app, "forum").await, 6);
}

/// A batch whose second event finds its bucket lost: the first, applied in the same script call
/// before the fence, is answered as applied (it was answered 503 with the rest, its points
/// given and journaled all the same: a queue's message handed back, or a client giving up,
/// and the restore counted it; found by the simulation); the second is refused, and once the
/// board is restored each counts once.
#[tokio::test]
async fn a_batch_stopped_by_a_lost_bucket_answers_what_it_applied_before() {
    let app = spawn_journaled(config()).await;
    let now = at("2026-11-22T10:00:00Z");
    app.set_now(now);
    let retried = "e1";
    let first = (2..100).map(|i| format!("e{i}")).find(|id| MarkerSlot::of(id).shard != MarkerSlot::of(retried).shard).unwrap();
    assert_eq!(app.event(comment(retried)).await.0, StatusCode::OK);
    del(&app, &bucket_of(&app, "forum", retried, now)).await;

    let (status, body) = app.post("/v1/events:batch", &json!({"events": [comment(&first), comment(retried)]})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let results = body["results"].as_array().unwrap();
    assert_eq!((&results[0]["error"], &results[0]["duplicate"]), (&Value::Null, &json!(true)), "applied before the fence: {body}");
    assert_eq!(results[1]["error"]["code"], json!("board_restoring"), "{body}");
    assert_eq!(all_time(&app, "forum").await, 6, "the first event's points, given once");

    restore(&app, "forum").await;
    assert_eq!(all_time(&app, "forum").await, 6);
    let (status, again) = app.post("/v1/events:batch", &json!({"events": [comment(&first), comment(retried)]})).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["results"][0]["duplicate"], json!(true), "{again}");
    assert_eq!(again["results"][1]["duplicate"], json!(true), "{again}");
    assert_eq!(all_time(&app, "forum").await, 6, "each once");
}

/// The same for a batch of score submissions (`submit_score.lua`, one call a chunk).
#[tokio::test]
async fn a_score_batch_stopped_by_a_lost_bucket_answers_what_it_applied_before() {
    let app = spawn_journaled(config()).await;
    let now = at("2026-11-22T10:00:00Z");
    app.set_now(now);
    let retried = "s1";
    let first = (2..100).map(|i| format!("s{i}")).find(|id| MarkerSlot::of(id).shard != MarkerSlot::of(retried).shard).unwrap();
    assert_eq!(submit(&app, retried).await.0, StatusCode::OK);
    let one = composite(&app).await;
    del(&app, &bucket_of(&app, "arcade", retried, now)).await;

    let scores = |ids: [&str; 2]| json!({"scores": ids.map(|id| json!({"event_id": id, "user_id": "ann", "score": 5}))});
    let (status, body) = app.post("/v1/boards/arcade/scores:batch", &scores([&first, retried])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let results = body["results"].as_array().unwrap();
    assert_eq!((&results[0]["error"], &results[0]["duplicate"]), (&Value::Null, &json!(true)), "applied before the fence: {body}");
    assert_eq!(results[1]["error"]["code"], json!("board_restoring"), "{body}");
    let applied = composite(&app).await;
    assert!(applied > one, "the first submission applied: {applied:?} after {one:?}");

    restore(&app, "arcade").await;
    let (status, again) = app.post("/v1/boards/arcade/scores:batch", &scores([&first, retried])).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!((&again["results"][0]["duplicate"], &again["results"][1]["duplicate"]), (&json!(true), &json!(true)), "{again}");
    assert_eq!(composite(&app).await, applied, "each once");
}

/// The same for a queue's batch of sign-ins (`sign_in.lua`, one call a chunk): a user who signed
/// in today signs in again (a sign-in that finds her day's bit set writes its marker and journal
/// line before any check), then another finds the month's set lost and fences the board in the
/// same call. The first answers the duplicate it is; the second is refused; after the restore
/// each counts once. Before, the whole chunk was refused and its applied sign-in handed back.
#[tokio::test]
async fn a_sign_in_batch_stopped_by_a_lost_set_answers_what_it_applied_before() {
    use standings::domain::sign_in::SignInRequest;
    use standings::services::sign_ins::{SignInError, SignIns};
    let config = Config::parse(
        r#"
        [[boards]]
        name = "cal"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["month", "all"]
        top = 10
        sign_in = { points = 1 }
        "#,
    )
    .unwrap();
    let app = spawn_journaled(config).await;
    let now = at("2026-11-22T10:00:00Z");
    app.set_now(now);
    let sign_ins = SignIns::new(app.config.clone(), app.keys.clone(), app.store.clone());
    let sign_in = |id: &str, user: &str| SignInRequest { event_id: id.into(), user_id: user.into(), date: None };
    assert!(sign_ins.record_batch(&[sign_in("s1", "cy")], now).await[0].is_ok());
    let month = Period::containing(PeriodKind::Month, now, "UTC".parse().unwrap());
    del(&app, &app.keys.board("cal").period(&month)).await;

    let batch = [sign_in("s2", "cy"), sign_in("s3", "bob")];
    let answers = sign_ins.record_batch(&batch, now).await;
    let cy = answers[0].as_ref().expect("applied before the fence");
    assert!(cy.duplicate, "{cy:?}");
    assert!(matches!(&answers[1], Err(SignInError::Store(error)) if error.is_restoring()), "{:?}", answers[1]);

    restore(&app, "cal").await;
    let again = sign_ins.record_batch(&batch, now).await;
    assert!(again[0].as_ref().is_ok_and(|receipt| receipt.duplicate), "{:?}", again[0]);
    assert!(again[1].as_ref().is_ok_and(|receipt| !receipt.duplicate), "{:?}", again[1]);
    for user in ["cy", "bob"] {
        assert_eq!(app.points("cal", month.clone(), user).await, Some(1), "{user}: once");
    }
}
