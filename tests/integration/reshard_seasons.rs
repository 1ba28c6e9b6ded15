//! A reshard keeps a board's archived seasons as they were (issue 58, docs/scaling.md#changing-
//! shards): a season archived and released stays closed with nothing live, and a season frozen
//! and not yet released stays closed with its frozen board (spread over the new shards), which
//! the archive then finishes from the new layout. The moved journal lines recreate both
//! seasons' sets and statements; before, the move left them live (a correction answered 200).
//! The seasons are the two months before today's, whatever today is (their sets' expiry, 90 days
//! after the season, is ahead of Redis's clock), and their events are dated on the app's clock.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use chrono::{DateTime, Datelike, Duration, Months, NaiveDate, Utc};
use serde_json::{Value, json};
use standings::archive::job::{Archiver, Status};
use standings::archive::table::Shard;
use standings::domain::config::Config;
use standings::domain::guard::closed_field;
use standings::domain::period::Period;
use standings::redis::keys::BoardKeys;
use standings::redis::keys::Keys;
use standings_tests::journal::{new_bucket, s3, spawn_journaled_archiving};
use standings_tests::{ADMIN, ArchiveHarness, TestApp, unique_prefix, unique_season_table};

fn config(shards: u32) -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"guild\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"season\", \"all\"]\ntop = 10\n\
         archive = true\nstatements = true\nshards = {shards}\nrules = [{{ action = \"post\", points = 1, scope = \"none\" }}]\n"
    ))
    .unwrap()
}

fn far() -> DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

/// The first instant of the month `back` months before today's.
fn month_start(back: u32) -> DateTime<Utc> {
    let today = Utc::now().date_naive();
    let first = NaiveDate::from_ymd_opt(today.year(), today.month(), 1).unwrap() - Months::new(back);
    first.and_hms_opt(0, 0, 0).unwrap().and_utc()
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
    let old = one.keys.board_shards("guild", 1);
    let frozen_before = frozen(&one, &old, &frozen_season).await;
    assert_eq!(frozen_before.len(), 7, "the frozen board holds the season's members");
    for season in [&released, &frozen_season] {
        assert_eq!(correct(&one, season).await.0, StatusCode::UNPROCESSABLE_ENTITY, "a closed season refuses corrections");
    }
    let (_, top_before) = one.get(&format!("/v1/boards/guild/seasons/{}/top?limit=10", released.id)).await;

    let three = spawn_journaled_archiving(config(3), keys, table.clone()).await;
    three.set_now(one.now());
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let moved = three.journal_jobs(&client, &bucket, Arc::default()).run(json!({"reshard": {"board": "guild"}}), far()).await.unwrap();
    assert_eq!(moved["status"], "complete", "{moved}");

    let new = three.keys.board_shards("guild", 3);
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
}
