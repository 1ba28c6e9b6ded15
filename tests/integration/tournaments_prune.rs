//! A recurring tournament run for years (docs/tournaments.md#the-end): its guard forgets the
//! records of instances whose keys expired (`closed|` fields a release keeps), journaled, so a
//! restore ends with the guard as it was, and nothing a player or an operator reads changes.

use std::collections::HashMap;

use axum::http::StatusCode;
use chrono::Duration;
use serde_json::json;
use standings::domain::guard::{CLOSED, PRUNED};
use standings_tests::journal::{drain_to_new_bucket, lines};
use standings_tests::tournament::{Arena, cup, flush_and_restore, journaled_arena_of_its_own, state};

async fn guard(arena: &Arena, tournament: &str) -> HashMap<String, String> {
    let mut conn = arena.app.redis.clone();
    redis::cmd("HGETALL").arg(arena.app.keys.board(tournament).guard()).query_async(&mut conn).await.unwrap()
}

fn closed_days(guard: &HashMap<String, String>) -> Vec<String> {
    let mut days: Vec<String> = guard.keys().filter_map(|field| Some(field.strip_prefix(CLOSED)?.split_once(':')?.1.to_owned())).collect();
    days.sort();
    days
}

/// A daily tournament that ran 46 days, each instance played and ended: the next run that ends
/// an instance forgets the records of the instances whose keys expired a day ago or more
/// (a day's: 30 days after its end), and no other; their results read as before, a run again
/// forgets nothing more, and a restore after every key was lost brings the guard back as it was
/// (the prune replayed after the releases), forgotten records included.
#[tokio::test]
async fn a_daily_tournament_forgets_the_records_of_instances_whose_keys_expired_and_a_restore_keeps_them_forgotten() {
    let (_server, arena) = journaled_arena_of_its_own().await;
    let midnight = arena.app.now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    let first = midnight - Duration::days(45);
    let body = cup(first, 24 * 90, json!({"reset": "day", "duration_secs": 7200}));
    assert_eq!(arena.put_at("daily", &body, first).await.0, StatusCode::CREATED);
    let day = |d: i64| (first + Duration::days(d)).format("%Y-%m-%d").to_string();
    for d in 0..=45 {
        arena.app.set_now(first + Duration::days(d) + Duration::minutes(10));
        assert_eq!(arena.play("daily", &format!("d{d}"), "ann", 10 + d).await.0, StatusCode::OK, "{}", day(d));
    }
    arena.app.set_now(midnight + Duration::hours(3));
    assert_eq!(arena.end_run(None).await.len(), 46, "the backlog ended");
    let every: Vec<String> = (0..=45).map(day).collect();
    assert_eq!(closed_days(&guard(&arena, "daily").await), every, "each released instance keeps its record");

    // The next day's instance ends: the run forgets days 0 to 14 (expired, a day ago or more:
    // day 14's keys expired at its end plus 30 days, 31 days after its start, ended 46 days after
    // the first's start) and nothing newer.
    arena.app.set_now(midnight + Duration::days(1) + Duration::minutes(10));
    assert_eq!(arena.play("daily", "d46", "ann", 56).await.0, StatusCode::OK);
    arena.app.set_now(midnight + Duration::days(1) + Duration::hours(3));
    assert_eq!(arena.end_run(None).await.len(), 1);
    let pruned = guard(&arena, "daily").await;
    let kept: Vec<String> = (15..=46).map(day).collect();
    assert_eq!(closed_days(&pruned), kept, "{pruned:?}");
    let through = first + Duration::days(14) + Duration::hours(2);
    assert_eq!(pruned.get(PRUNED), Some(&through.timestamp_millis().to_string()), "the prune's place: day 14's end");
    for d in [0, 14, 15, 46] {
        let (status, results) = arena.read(&format!("/v1/tournaments/daily/results?instance={}", day(d))).await;
        assert_eq!((status, results["results"][0]["score"].as_i64()), (StatusCode::OK, Some(10 + d)), "{}: {results}", day(d));
    }
    for d in [0, 14, 15, 46] {
        // A forgotten instance's statement answers as a released one's: 410, not an empty 200.
        let (status, body) = arena.read(&format!("/v1/boards/daily/users/ann/statement?period=day&at={}", day(d))).await;
        assert_eq!((status, &body["error"]["code"]), (StatusCode::GONE, &json!("period_closed")), "{}: {body}", day(d));
    }
    let (status, body) = arena.play("daily", "late", "bo", 99).await;
    assert_eq!(status, StatusCode::CONFLICT, "no instance open now: {body}");
    assert!(arena.end_run(None).await.is_empty());
    assert_eq!(guard(&arena, "daily").await, pruned, "a run again forgets nothing more");

    let (client, bucket) = drain_to_new_bucket(&arena.app, 100).await;
    let prunes: Vec<_> = lines(&client, &bucket, &arena.app).await.into_iter().filter(|line| line["kind"] == "prune").collect();
    assert_eq!(prunes.len(), 1, "one journaled prune: {prunes:?}");
    let before = state(&arena).await;
    flush_and_restore(&arena, &client, &bucket).await;
    assert_eq!(state(&arena).await, before, "every key as it was, the guard without the forgotten records");
    assert_eq!(closed_days(&guard(&arena, "daily").await), kept);
}
