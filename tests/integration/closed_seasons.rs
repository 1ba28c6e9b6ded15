//! Archived seasons stay archived through a reshard and a restore (issue 58, docs/archival.md,
//! docs/scaling.md#changing-shards). The journal replays a season's writes, and its freeze is
//! not journaled: before, a move and a restore after a total loss both left an archived season
//! live again, open to corrections (200). Now a season archived and released stays closed with
//! nothing live, and a season frozen and not yet released stays closed with its frozen board
//! (spread over the new shards), which the archive then finishes from the new layout.
//! The seasons are the two months before today's, whatever today is (their sets' expiry, 90 days
//! after the season, is ahead of Redis's clock), and their events are dated on the app's clock.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use chrono::{DateTime, Datelike, Duration, Months, NaiveDate, Utc};
use journal::{Restorer, S3Objects};
use serde_json::{Value, json};
use standings::archive::job::{Archiver, Status};
use standings::archive::table::Shard;
use standings::domain::config::Config;
use standings::domain::guard::closed_field;
use standings::domain::period::Period;
use standings::redis::keys::BoardKeys;
use standings::redis::keys::Keys;
use standings_tests::journal::{drain_to_new_bucket, spawn_journaled_archiving};
use standings_tests::{ADMIN, ArchiveHarness, TestApp, unique_prefix, unique_season_table};

fn config(shards: u32) -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"guild\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"season\", \"all\"]\ntop = 10\n\
         archive = true\nstatements = true\nshards = {shards}\nrules = [{{ action = \"post\", points = 1, scope = \"none\" }}]\n"
    ))
    .unwrap()
}

/// A deadline five minutes past both clocks a run reads: the real one (the journal's jobs) and
/// the app's, which the archive runs read and which stands at `month_start(0) + 2 h` (ahead of
/// the real clock in a month's first two hours).
fn far() -> DateTime<Utc> {
    Utc::now().max(month_start(0) + Duration::hours(2)) + Duration::minutes(5)
}

/// Today, read once: a run crossing a month's end still names one month throughout.
static TODAY: std::sync::LazyLock<NaiveDate> = std::sync::LazyLock::new(|| Utc::now().date_naive());

/// The first instant of the month `back` months before today's.
fn month_start(back: u32) -> DateTime<Utc> {
    let today = *TODAY;
    let first = NaiveDate::from_ymd_opt(today.year(), today.month(), 1).unwrap() - Months::new(back);
    first.and_hms_opt(0, 0, 0).unwrap().and_utc()
}

fn season_all() -> Period {
    Period::named(standings::domain::period::PeriodKind::All, "all", chrono_tz::UTC).unwrap()
}

fn season(back: u32) -> Period {
    standings::archive::freeze::season_named(&month_start(back).format("%Y-%m").to_string(), chrono_tz::UTC).unwrap()
}

async fn post(app: &TestApp, id: &str, user: &str) {
    let (status, body) = app.event(json!({"event_id": id, "user_id": user, "action": "post"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

async fn correct(app: &TestApp, season: &Period) -> (StatusCode, Value) {
    let body = json!({"delta": 5, "reason": "late", "period": "season", "period_id": season.id});
    app.call(Method::POST, "/v1/admin/boards/guild/users/u1/corrections", body.to_string(), ADMIN).await
}

fn archiver(app: &TestApp, table: &standings::archive::table::SeasonTable) -> Archiver<standings::archive::table::SeasonTable> {
    Archiver::new(
        app.config.clone(),
        app.keys.clone(),
        app.store.clone(),
        table.clone(),
        table.clone(),
        app.clock(),
        ArchiveHarness::settings(),
    )
}

/// Every key of `shards` naming `season` (its live set, frozen set, statements), sorted.
async fn season_keys(app: &TestApp, shards: &[BoardKeys], season: &Period) -> Vec<String> {
    let mut named: Vec<String> = Vec::new();
    let written = app.written_keys().await;
    for shard in shards {
        let tag = shard.guard().trim_end_matches(":guard").to_owned();
        named.extend(written.iter().filter(|key| key.starts_with(&tag) && key.contains(&format!(":{}", season.id))).cloned());
    }
    named.sort();
    named
}

/// The members and composites of `season`'s frozen boards over `shards`, sorted.
async fn frozen(app: &TestApp, shards: &[BoardKeys], season: &Period) -> Vec<(String, f64)> {
    let mut members = Vec::new();
    for shard in shards {
        let page: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg(shard.frozen(season))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(&mut app.redis.clone())
            .await
            .unwrap();
        members.extend(page);
    }
    members.sort_by(|a, b| a.0.cmp(&b.0));
    members
}

#[tokio::test]
async fn a_move_keeps_an_archived_season_released_and_a_frozen_one_frozen() {
    let (released, frozen_season) = (season(2), season(1));
    let table = unique_season_table().await;
    let keys = Keys::new(&unique_prefix()).unwrap();
    let one = spawn_journaled_archiving(config(1), keys.clone(), table.clone()).await;
    for (back, season) in [(2, &released), (1, &frozen_season)] {
        one.set_now(month_start(back) + Duration::days(9) + Duration::hours(12));
        for i in 0..12 {
            post(&one, &format!("{}-{i}", season.id), &format!("u{}", i % 7)).await;
        }
    }
    one.set_now(month_start(0) + Duration::hours(2));
    let report = archiver(&one, &table).archive_season("guild", &released.id, Shard::WHOLE, far()).await.unwrap();
    assert_eq!(report.status, Status::Complete);
    // Frozen, then stopped by its deadline before its pages are stored.
    let report = archiver(&one, &table).archive_season("guild", &frozen_season.id, Shard::WHOLE, one.now()).await.unwrap();
    assert_eq!(report.status, Status::InProgress);
    let old = one.keys.layout("guild", 1).all();
    let frozen_before = frozen(&one, &old, &frozen_season).await;
    assert_eq!(frozen_before.len(), 7, "the frozen board holds the season's members");
    for season in [&released, &frozen_season] {
        assert_eq!(correct(&one, season).await.0, StatusCode::UNPROCESSABLE_ENTITY, "a closed season refuses corrections");
    }
    let (_, top_before) = one.get(&format!("/v1/boards/guild/seasons/{}/top?limit=10", released.id)).await;

    // A loss the guard survives, and a restore: the replayed writes bring neither season back
    // live, the frozen board stays as it was.
    let (client, bucket) = drain_to_new_bucket(&one, 5).await;
    let mut conn = one.redis.clone();
    let _: () = redis::cmd("DEL").arg(old[0].period(&season_all())).query_async(&mut conn).await.unwrap();
    let restorer = Restorer::new(one.config.clone(), one.keys.clone(), one.store.clone(), S3Objects::new(client.clone(), &bucket));
    assert_eq!(restorer.restore(None, far()).await.unwrap().status, journal::Status::Complete);
    assert_eq!(season_keys(&one, &old, &released).await, Vec::<String>::new(), "the released season after a restore");
    let kept = season_keys(&one, &old, &frozen_season).await;
    assert!(kept.iter().all(|key| key.contains(":frozen:") || key.contains(":stmt:")), "no live set after a restore: {kept:?}");
    assert_eq!(frozen(&one, &old, &frozen_season).await, frozen_before, "the frozen board as it was");

    let three = spawn_journaled_archiving(config(3), keys, table.clone()).await;
    three.set_now(one.now());
    let moved = three.journal_jobs(&client, &bucket, Arc::default()).run(json!({"reshard": {"board": "guild"}}), far()).await.unwrap();
    assert_eq!(moved["status"], "complete", "{moved}");

    let new = three.keys.layout("guild", 3).all();
    for shard in &new {
        let closed: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(shard.guard())
            .arg(closed_field(&released))
            .arg(closed_field(&frozen_season))
            .query_async(&mut three.redis.clone())
            .await
            .unwrap();
        assert!(closed.iter().all(Option::is_some), "every new shard's guard closes both seasons: {closed:?}");
    }
    assert_eq!(season_keys(&three, &new, &released).await, Vec::<String>::new(), "nothing of the released season is live again");
    let frozen_keys = season_keys(&three, &new, &frozen_season).await;
    assert!(frozen_keys.iter().all(|key| key.contains(":frozen:") || key.contains(":stmt:")), "no live set: {frozen_keys:?}");
    assert_eq!(frozen(&three, &new, &frozen_season).await, frozen_before, "the frozen board, spread over the new shards");
    for season in [&released, &frozen_season] {
        let (status, body) = correct(&three, season).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "a closed season still refuses corrections: {body}");
    }
    let (status, top) = three.get(&format!("/v1/boards/guild/seasons/{}/top?limit=10", released.id)).await;
    assert_eq!((status, &top), (StatusCode::OK, &top_before));

    // The archive finishes the frozen season from the new layout: every member, once.
    let report = archiver(&three, &table).archive_season("guild", &frozen_season.id, Shard::WHOLE, far()).await.unwrap();
    assert_eq!(report.status, Status::Complete);
    let archived = table.ranks("guild", &frozen_season.id, 1, 1000).await.unwrap();
    assert_eq!(archived.len(), 7, "{archived:?}");
    assert_eq!(season_keys(&three, &new, &frozen_season).await, Vec::<String>::new(), "released from the new layout");

    // The new layout's journal says both seasons are released: a restore after a total loss
    // brings neither back live.
    let (client, bucket) = drain_to_new_bucket(&three, 5).await;
    lose_everything(&three).await;
    let restorer = Restorer::new(three.config.clone(), three.keys.clone(), three.store.clone(), S3Objects::new(client, &bucket));
    let restored = restorer.restore(None, far()).await.unwrap();
    assert_eq!(restored.status, journal::Status::Complete, "{restored:?}");
    for season in [&released, &frozen_season] {
        assert_eq!(season_keys(&three, &new, season).await, Vec::<String>::new(), "{}: nothing live after the restore", season.id);
        assert_eq!(correct(&three, season).await.0, StatusCode::UNPROCESSABLE_ENTITY);
    }
}

/// Every key of the app's prefix deleted: the deployment's Redis lost.
async fn lose_everything(app: &TestApp) {
    let mut conn = app.redis.clone();
    for key in app.written_keys().await {
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.unwrap();
    }
}

/// Last month's season of a journaled guild of `shards` archiving into a table of its own,
/// 12 posts of 7 members on its tenth day; the app's clock left there.
async fn played_last_month(shards: u32) -> (Period, standings::archive::table::SeasonTable, TestApp) {
    let table = unique_season_table().await;
    let app = spawn_journaled_archiving(config(shards), Keys::new(&unique_prefix()).unwrap(), table.clone()).await;
    app.set_now(month_start(1) + Duration::days(9) + Duration::hours(12));
    for i in 0..12 {
        post(&app, &format!("e{i}"), &format!("u{}", i % 7)).await;
    }
    (season(1), table, app)
}

/// A restore of every board from the journal in `bucket`, complete in one invocation.
async fn restore_completely(app: &TestApp, client: aws_sdk_s3::Client, bucket: &str) {
    let restorer = Restorer::new(app.config.clone(), app.keys.clone(), app.store.clone(), S3Objects::new(client, bucket));
    let restored = restorer.restore(None, far()).await.unwrap();
    assert_eq!(restored.status, journal::Status::Complete, "{restored:?}");
}

#[tokio::test]
async fn a_released_season_stays_closed_through_a_loss_of_every_key_and_a_restore() {
    let (season, table, app) = played_last_month(2).await;
    app.set_now(month_start(0) + Duration::hours(2));
    let report = archiver(&app, &table).archive_season("guild", &season.id, Shard::WHOLE, far()).await.unwrap();
    assert_eq!(report.status, Status::Complete);
    let shards = app.keys.layout("guild", 2).all();
    assert_eq!(season_keys(&app, &shards, &season).await, Vec::<String>::new(), "released");
    let (_, top_before) = app.get(&format!("/v1/boards/guild/seasons/{}/top?limit=10", season.id)).await;

    let (client, bucket) = drain_to_new_bucket(&app, 5).await;
    lose_everything(&app).await;
    restore_completely(&app, client, &bucket).await;

    assert_eq!(season_keys(&app, &shards, &season).await, Vec::<String>::new(), "nothing of the released season is live again");
    let (status, body) = correct(&app, &season).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "the archived season refuses corrections after the restore: {body}");
    let (status, top) = app.get(&format!("/v1/boards/guild/seasons/{}/top?limit=10", season.id)).await;
    assert_eq!((status, &top), (StatusCode::OK, &top_before));
    let (status, all) = app.get("/v1/boards/guild/top?period=all&limit=10").await;
    assert_eq!((status, all["entries"].as_array().map(Vec::len)), (StatusCode::OK, Some(7)), "the all-time board is back: {all}");
}

/// A season whose set a loss took while the board's guard survived (its `kept|` record says the
/// set exists): the archive's freeze fences the board (`board_restoring`, the guard recording
/// the loss, the season not closed) where it closed the season `lost` for good before, which
/// only a hand edit of the guard undid; a restore brings the set back and the next run
/// archives it whole, as it stood.
#[tokio::test]
async fn a_season_set_lost_under_a_surviving_guard_fences_the_freeze_and_is_archived_whole_after_a_restore() {
    let (season, table, app) = played_last_month(1).await;
    let standings = |top: &Value| -> Vec<(String, i64)> {
        let entries = top["entries"].as_array().cloned().unwrap_or_default();
        entries.iter().map(|e| (e["user_id"].as_str().unwrap_or("?").to_owned(), e["score"].as_i64().unwrap_or(-1))).collect()
    };
    let (_, live) = app.get(&format!("/v1/boards/guild/top?period=season&at={}-01&limit=10", season.id)).await;
    assert_eq!(standings(&live).len(), 7, "{live}");
    let (client, bucket) = drain_to_new_bucket(&app, 5).await;
    let keys = app.keys.layout("guild", 1).all().remove(0);
    let mut conn = app.redis.clone();
    let removed: u64 = redis::cmd("DEL").arg(keys.period(&season)).query_async(&mut conn).await.unwrap();
    assert_eq!(removed, 1);

    app.set_now(month_start(0) + Duration::hours(2));
    let error = archiver(&app, &table).archive_season("guild", &season.id, Shard::WHOLE, far()).await.unwrap_err();
    assert_eq!(error.code(), "board_restoring", "{error}");
    let guard: std::collections::HashMap<String, String> = redis::cmd("HGETALL").arg(keys.guard()).query_async(&mut conn).await.unwrap();
    assert!(!guard.contains_key(&closed_field(&season)), "the season is not closed: {guard:?}");
    assert_eq!(guard.get(standings::domain::guard::LOST).map(String::as_str), Some("1"), "the loss recorded: {guard:?}");
    assert!(table.completed("guild", &season.id).await.unwrap().is_none());

    restore_completely(&app, client, &bucket).await;
    let report = archiver(&app, &table).archive_season("guild", &season.id, Shard::WHOLE, far()).await.unwrap();
    assert_eq!(report.status, Status::Complete);
    let (status, archived) = app.get(&format!("/v1/boards/guild/seasons/{}/top?limit=10", season.id)).await;
    assert_eq!((status, standings(&archived)), (StatusCode::OK, standings(&live)), "{archived}");
}

/// An archive run cut off between the shards of a season (one frozen, the other not yet), then
/// the other shard's season set lost while its guard survived (its `kept|` record): a move then
/// froze that shard as the archive would have, closed the season `lost` in every new shard, and
/// the archive answered `live_board_lost` for good. The move's freeze reads the record as the
/// archive's does: the move stops with the board fenced (`board_restoring`), a restore brings
/// the set back, and the move then carries the season whole, archived as it stood.
#[tokio::test]
async fn a_season_set_lost_under_a_surviving_guard_stops_a_move_until_a_restore_and_is_carried_whole() {
    let (season, table, two) = played_last_month(2).await;
    let (_, live) = two.get(&format!("/v1/boards/guild/top?period=season&at={}-01&limit=10", season.id)).await;
    let (client, bucket) = drain_to_new_bucket(&two, 5).await;
    two.set_now(month_start(0) + Duration::hours(2));
    let old = two.keys.layout("guild", 2).all();
    let mut conn = two.redis.clone();
    let first = standings::archive::freeze::freeze(&mut conn, &old[0], &season, Some(two.now())).await.unwrap();
    assert!(first.members > 0 && first.present, "{first:?}");
    let removed: u64 = redis::cmd("DEL").arg(old[1].period(&season)).query_async(&mut conn).await.unwrap();
    assert_eq!(removed, 1, "the second shard held some of the season");

    let three = spawn_journaled_archiving(config(3), two.keys.clone(), table.clone()).await;
    three.set_now(two.now());
    let jobs = three.journal_jobs(&client, &bucket, Arc::default());
    let reshard = || jobs.run(json!({"reshard": {"board": "guild"}}), far());
    let error = reshard().await.unwrap_err();
    assert_eq!(error.code(), "board_restoring", "{error}");
    let lost: Option<String> =
        redis::cmd("HGET").arg(old[1].guard()).arg(standings::domain::guard::LOST).query_async(&mut conn).await.unwrap();
    assert_eq!(lost.as_deref(), Some("1"), "the loss recorded in the shard's guard");
    let error = reshard().await.unwrap_err();
    assert!(error.to_string().contains("restore it, then move it"), "refused until a restore: {error}");
    assert_eq!(error.code(), "board_restoring", "the same code as the first refusal's: {error}");

    restore_completely(&three, client.clone(), &bucket).await;
    // Writes go on between the restore and the move's next invocation, in every old shard:
    // each is moved (before, a refusal found after the last step took its places skipped them).
    for i in 0..7 {
        post(&two, &format!("after-{i}"), &format!("u{i}")).await;
    }
    let (_, all) = two.get("/v1/boards/guild/top?period=all&limit=10").await;
    let moved = reshard().await.unwrap();
    assert_eq!(moved["status"], "complete", "{moved}");
    assert_eq!(three.get("/v1/boards/guild/top?period=all&limit=10").await.1["entries"], all["entries"], "every write moved");
    let report = archiver(&three, &table).archive_season("guild", &season.id, Shard::WHOLE, far()).await.unwrap();
    assert_eq!(report.status, Status::Complete);
    let (status, archived) = three.get(&format!("/v1/boards/guild/seasons/{}/top?limit=10", season.id)).await;
    assert_eq!((status, &archived["entries"]), (StatusCode::OK, &live["entries"]), "{archived}");
}

/// On a journaled board, one slot and three shards: every live read of a season answers 410
/// `period_closed` from the freeze of the shard of one of its users (an archive run cut off
/// there), that user's statement included, and after the archive (docs/archival.md#live-routes).
#[tokio::test]
async fn a_journaled_seasons_live_reads_are_closed_from_its_first_shards_freeze() {
    use crate::season_reads::{assert_all_closed, assert_all_ok, cursor, live_reads};
    for shards in [1, 3] {
        let (season, table, app) = played_last_month(shards).await;
        let at = format!("{}-15", season.id);
        let users = ["u1", "u2"];
        let cursor = cursor(&app, "guild", &at).await;
        assert_all_ok(&live_reads(&app, "guild", &at, users, &cursor).await, 7);
        let statement = format!("/v1/boards/guild/users/u1/statement?period=season&at={at}");
        assert_eq!(app.get(&statement).await.0, StatusCode::OK);

        app.set_now(month_start(0) + Duration::hours(2));
        let layout = app.keys.layout("guild", shards);
        let keys = layout.of_user("u1");
        let frozen = standings::archive::freeze::freeze(&mut app.redis.clone(), &keys, &season, Some(app.now())).await.unwrap();
        assert!(frozen.present && frozen.members > 0, "{shards} shards: {frozen:?}");
        assert_all_closed(&live_reads(&app, "guild", &at, users, &cursor).await, "guild", &season.id);
        let (status, body) = app.get(&statement).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::GONE, Some("period_closed")), "{body}");

        let report = archiver(&app, &table).archive_season("guild", &season.id, Shard::WHOLE, far()).await.unwrap();
        assert_eq!(report.status, Status::Complete);
        assert_all_closed(&live_reads(&app, "guild", &at, users, &cursor).await, "guild", &season.id);
        let (status, top) = app.get(&format!("/v1/boards/guild/seasons/{}/top?limit=10", season.id)).await;
        assert_eq!((status, top["total"].as_u64()), (StatusCode::OK, Some(7)), "{top}");
    }
}
