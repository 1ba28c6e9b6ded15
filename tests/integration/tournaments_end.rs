//! A tournament instance's end (docs/tournaments.md#the-end): early or on time, its results
//! frozen, stored in moto DynamoDB with prizes, announced on a moto EventBridge bus in pages,
//! each step resumable; recurring instances; a restore after every key was lost.

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use serde_json::{Value, json};
use standings::archive::bus::TOURNAMENT_ENDED;
use standings_tests::journal::{drain_to_new_bucket, spawn_journaled};
use standings_tests::notify::subscribed_to;
use standings_tests::tournament::{Arena, Flaky, assert_verified, cup, flush_and_restore, journaled_arena_of_its_own, state};
use standings_tests::{TestApp, unique_season_table};

fn code(body: &Value) -> Option<&str> {
    body["error"]["code"].as_str()
}

fn users(rows: &Value) -> Vec<&str> {
    rows.as_array().unwrap().iter().map(|row| row["user_id"].as_str().unwrap()).collect()
}

/// Ended early: refused at once, listed as ended, archived rank for rank with prizes and
/// announced once by the next run; ending and running again change nothing.
#[tokio::test]
async fn an_instance_ended_early_is_frozen_at_once_then_stored_with_prizes_and_announced_once() {
    let arena = Arena::new().await;
    let bus = subscribed_to(TOURNAMENT_ENDED).await;
    let start = arena.app.now() - Duration::minutes(30);
    let prizes = json!([{"ranks": [1, 1], "reward": {"gems": 500}}, {"ranks": [2, 3], "reward": {"gems": 50}}]);
    let definition = cup(start, 24, json!({"prizes": prizes, "keep": "sum", "metadata": {"season": 7}}));
    assert_eq!(arena.put("sprint", &definition).await.0, StatusCode::CREATED);
    for (i, (user, score)) in [("ann", 30), ("bo", 50), ("cy", 20), ("ann", 25), ("dee", 5)].iter().enumerate() {
        arena.app.set_now(arena.app.now() + Duration::seconds(1));
        assert_eq!(arena.play("sprint", &format!("s{i}"), user, *score).await.0, StatusCode::OK);
    }
    let (status, ended) = arena.end("sprint", "server maintenance").await;
    assert_eq!(
        (status, ended["instance"].as_str(), ended["reason"].as_str()),
        (StatusCode::ACCEPTED, Some("all"), Some("server maintenance")),
        "{ended}"
    );
    let (status, body) = arena.play("sprint", "s9", "eve", 99).await;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, Some("tournament_closed")), "refused at once: {body}");
    assert_eq!(arena.end("sprint", "server maintenance").await, (StatusCode::ACCEPTED, ended.clone()), "ending again: the same answer");
    let (status, retry) = arena.play("sprint", "s1", "bo", 50).await;
    assert_eq!(
        (status, retry["duplicate"].as_bool(), retry["applied"].as_bool()),
        (StatusCode::OK, Some(true), Some(true)),
        "a retry after the end is the duplicate it is: {retry}"
    );
    let (status, again) = arena.put("sprint", &definition).await;
    assert_eq!((status, &again["definition"]), (StatusCode::OK, &definition), "the same definition again, ended early or not: {again}");
    let (_, view) = arena.read("/v1/tournaments/sprint").await;
    assert_eq!(
        (view["state"].as_str(), view["end"].as_str()),
        (Some("ended"), Some(&ended["ended_at"].as_str().unwrap()[..19]).map(|t| format!("{t}Z")).as_deref()),
        "{view}"
    );
    let (status, top) = arena.read("/v1/tournaments/sprint/top").await;
    assert_eq!(
        (status, top["source"].as_str(), users(&top["entries"])),
        (StatusCode::OK, Some("frozen"), vec!["ann", "bo", "cy", "dee"]),
        "{top}"
    );
    let (status, pending) = arena.read("/v1/tournaments/sprint/results?instance=all").await;
    assert_eq!((status, code(&pending)), (StatusCode::NOT_FOUND, Some("results_pending")), "{pending}");
    let (status, unnamed) = arena.read("/v1/tournaments/sprint/results").await;
    assert_eq!((status, unnamed), (StatusCode::NOT_FOUND, pending), "a one-off's results without instance are its only one's");

    // The archive function's next run (every minute).
    let reports = arena.end_run(Some(&bus.bus)).await;
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!((reports[0].status, reports[0].total, reports[0].pages_sent), ("done", 4, 1), "{reports:?}");
    let (status, results) = arena.read("/v1/tournaments/sprint/results?instance=all").await;
    assert_eq!(status, StatusCode::OK, "{results}");
    let expected = json!([
        {"rank": 1, "user_id": "ann", "score": 55, "profile": null, "prize": {"gems": 500}},
        {"rank": 2, "user_id": "bo", "score": 50, "profile": null, "prize": {"gems": 50}},
        {"rank": 3, "user_id": "cy", "score": 20, "profile": null, "prize": {"gems": 50}},
        {"rank": 4, "user_id": "dee", "score": 5, "profile": null, "prize": null},
    ]);
    assert_eq!((&results["results"], results["total"].as_u64(), &results["next_cursor"]), (&expected, Some(4), &Value::Null));
    assert_eq!(arena.read("/v1/tournaments/sprint/results").await, (StatusCode::OK, results.clone()), "instance=all by default");
    let (status, page) = arena.read("/v1/tournaments/sprint/results?instance=all&cursor=3").await;
    assert_eq!((status, &page["results"], &page["next_cursor"]), (StatusCode::OK, &json!(expected.as_array().unwrap()[2..]), &Value::Null));
    // Cursors past the ranks (none this route gave): nothing, and no next page, whatever the number.
    for cursor in ["5", "10000000003", "18446744073709551615"] {
        let (status, page) = arena.read(&format!("/v1/tournaments/sprint/results?instance=all&cursor={cursor}")).await;
        assert_eq!(
            (status, &page["results"], &page["next_cursor"], page["total"].as_u64()),
            (StatusCode::OK, &json!([]), &Value::Null, Some(4)),
            "{cursor}: {page}"
        );
    }
    let events = bus.events(TOURNAMENT_ENDED).await;
    assert_eq!(events.len(), 1, "{events:?}");
    let announced: Vec<(u64, &str, i64, &Value)> = events[0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["rank"].as_u64().unwrap(), r["user_id"].as_str().unwrap(), r["score"].as_i64().unwrap(), &r["prize"]))
        .collect();
    let stored: Vec<(u64, &str, i64, &Value)> = expected
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["rank"].as_u64().unwrap(), r["user_id"].as_str().unwrap(), r["score"].as_i64().unwrap(), &r["prize"]))
        .collect();
    assert_eq!(announced, stored);
    assert_eq!(
        (&events[0]["tournament_id"], &events[0]["instance"], &events[0]["last"], &events[0]["metadata"]),
        (&json!("sprint"), &json!("all"), &json!(true), &json!({"season": 7}))
    );
    let (_, top) = arena.read("/v1/tournaments/sprint/top").await;
    assert_eq!((top["source"].as_str(), users(&top["entries"])), (Some("archived"), vec!["ann", "bo", "cy", "dee"]), "{top}");
    let seats = arena.app.keyspace().await.into_iter().filter(|(key, ..)| key.contains(":players:") || key.contains(":entries:")).count();
    assert_eq!(seats, 0, "an archived instance's seats and attempts are freed");
    let (_, view) = arena.read("/v1/tournaments/sprint").await;
    assert_eq!(view["size"], 4, "its size is what it was at its end: {view}");

    let again = arena.end_run(Some(&bus.bus)).await;
    assert!(again.is_empty(), "a finished instance is not looked at again: {again:?}");
    assert!(bus.events(TOURNAMENT_ENDED).await.is_empty(), "announced once");
}

/// A day's instance from 00:00 UTC for two hours: each day's scores in their own instance,
/// yesterday's results stored, today's open on its reset.
#[tokio::test]
async fn a_recurring_tournament_opens_each_instance_on_its_reset_and_ends_each_one() {
    let arena = Arena::new().await;
    let bus = subscribed_to(TOURNAMENT_ENDED).await;
    let midnight = arena.app.now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    let body = cup(midnight - Duration::days(1), 24 * 7, json!({"reset": "day", "duration_secs": 7200, "max_entries": 2}));
    assert_eq!(arena.put_at("daily", &body, midnight - Duration::days(1)).await.0, StatusCode::CREATED);
    let yesterday = (midnight - Duration::days(1)).format("%Y-%m-%d").to_string();
    let today = midnight.format("%Y-%m-%d").to_string();
    arena.app.set_now(midnight - Duration::days(1) + Duration::minutes(10));
    assert_eq!(arena.play("daily", "y1", "ann", 10).await.0, StatusCode::OK);
    assert_eq!(arena.play("daily", "y2", "ann", 12).await.0, StatusCode::OK);
    assert_eq!(code(&arena.play("daily", "y3", "ann", 99).await.1), Some("entry_limit"));
    arena.app.set_now(midnight - Duration::days(1) + Duration::hours(3));
    let (_, view) = arena.read("/v1/tournaments/daily").await;
    assert_eq!(
        (view["state"].as_str(), view["instance"].as_str(), view["next_reset"].as_str()),
        (Some("upcoming"), Some(today.as_str()), Some(midnight.format("%Y-%m-%dT%H:%M:%SZ").to_string().as_str())),
        "{view}"
    );
    assert_eq!(code(&arena.play("daily", "gap", "bo", 1).await.1), Some("tournament_closed"));

    arena.app.set_now(midnight + Duration::minutes(1));
    let (status, fresh) = arena.play("daily", "t1", "ann", 3).await;
    assert_eq!(
        (status, fresh["instance"].as_str(), fresh["entries_left"].as_u64()),
        (StatusCode::OK, Some(today.as_str()), Some(1)),
        "attempts count per instance: {fresh}"
    );
    let reports = arena.end_run(Some(&bus.bus)).await;
    let done: Vec<(&str, &str)> = reports.iter().map(|r| (r.instance.as_str(), r.status)).collect();
    assert_eq!(done, [(yesterday.as_str(), "done")], "today's instance is open; only yesterday's ended: {reports:?}");
    let (_, results) = arena.read(&format!("/v1/tournaments/daily/results?instance={yesterday}")).await;
    assert_eq!((users(&results["results"]), results["results"][0]["score"].as_i64()), (vec!["ann"], Some(12)), "{results}");
    let (status, unnamed) = arena.read("/v1/tournaments/daily/results").await;
    assert_eq!((status, code(&unnamed)), (StatusCode::NOT_FOUND, Some("results_pending")), "without instance: the open one's: {unnamed}");
    let (_, me) = arena.read("/v1/tournaments/daily/users/ann").await;
    assert_eq!(
        (me["instance"].as_str(), me["score"].as_i64(), me["entries_left"].as_u64()),
        (Some(today.as_str()), Some(3), Some(1)),
        "{me}"
    );
    let (_, past) = arena.read(&format!("/v1/tournaments/daily/users/ann?instance={yesterday}")).await;
    assert_eq!((past["score"].as_i64(), past["rank"].as_u64()), (Some(12), Some(1)), "{past}");
    // An ended instance takes no attempts: none are left, whoever asks.
    let (_, absent) = arena.read(&format!("/v1/tournaments/daily/users/bo?instance={yesterday}")).await;
    assert_eq!((absent["rank"].as_u64(), absent["entries_left"].as_u64()), (None, Some(0)), "{absent}");
    let (status, body) = arena.read("/v1/tournaments/daily/top?instance=2001-01-01").await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, Some("unknown_instance")), "{body}");
    assert_eq!(bus.events(TOURNAMENT_ENDED).await.len(), 1);
}

/// `members` players seeded straight into a one-off tournament's board, as as many submissions
/// of distinct scores would leave it.
async fn seed(arena: &Arena, tournament: &str, members: u64) {
    let board = standings::domain::period::Period::named(standings::domain::period::PeriodKind::All, "all", chrono_tz::UTC).unwrap();
    let key = arena.app.keys.board(tournament).period(&board);
    let mut conn = arena.app.redis.clone();
    for chunk in (0..members).collect::<Vec<_>>().chunks(400) {
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(&key);
        for i in chunk {
            zadd.arg((5000 - i) * (1 << 23)).arg(format!("u{i:05}"));
        }
        let _: u64 = zadd.query_async(&mut conn).await.unwrap();
    }
}

/// Results past one event's size go out in pages that together hold every rank once, in order.
#[tokio::test]
async fn results_past_an_event_s_size_are_announced_in_pages_holding_every_rank_once() {
    let arena = Arena::new().await;
    let bus = subscribed_to(TOURNAMENT_ENDED).await;
    let start = arena.app.now() - Duration::hours(3);
    let reward = json!({"text": "x".repeat(300)});
    let body = cup(start, 2, json!({"prizes": [{"ranks": [1, 1000], "reward": reward}]}));
    assert_eq!(arena.put_at("crowd", &body, start).await.0, StatusCode::CREATED);
    seed(&arena, "crowd", 1200).await;
    let reports = arena.end_run(Some(&bus.bus)).await;
    assert_eq!((reports[0].status, reports[0].total), ("done", 1200), "{reports:?}");
    let events = bus.events(TOURNAMENT_ENDED).await;
    assert!(events.len() >= 2 && events.iter().all(|e| e.to_string().len() < 256 * 1024), "{} pages", events.len());
    let ranks: Vec<u64> =
        events.iter().flat_map(|e| e["results"].as_array().unwrap().iter().map(|r| r["rank"].as_u64().unwrap())).collect();
    assert_eq!(ranks, (1..=1200).collect::<Vec<_>>());
    let lasts: Vec<bool> = events.iter().map(|e| e["last"].as_bool().unwrap()).collect();
    assert_eq!(lasts.iter().filter(|l| **l).count(), 1);
    assert!(*lasts.last().unwrap());
    assert_eq!(events[1]["first_rank"].as_u64(), Some(events[0]["results"].as_array().unwrap().len() as u64 + 1));
}

/// Interrupted at every step (the archive by its deadline, the announcement by a bus that goes
/// down after one page): each next run goes on from its checkpoint, every rank announced once.
#[tokio::test]
async fn an_end_stopped_at_any_step_resumes_and_announces_every_rank_once() {
    let arena = Arena::new().await;
    let start = arena.app.now() - Duration::hours(3);
    let body = cup(start, 2, json!({"prizes": [{"ranks": [1, 500], "reward": {"text": "x".repeat(300)}}]}));
    assert_eq!(arena.put_at("relay", &body, start).await.0, StatusCode::CREATED);
    seed(&arena, "relay", 1200).await;
    let bus = Flaky::default();
    // The job reads the time on the app's clock.
    let past = arena.app.now() - Duration::seconds(1);
    let stopped = arena.end_run_until(Some(&bus), past).await;
    assert_eq!(stopped[0].status, "archiving", "out of time: {stopped:?}");
    assert!(bus.pages.lock().unwrap().is_empty());
    bus.left.store(1, std::sync::atomic::Ordering::SeqCst);
    let failed = arena.end_run_until(Some(&bus), Utc::now() + Duration::minutes(5)).await;
    assert_eq!(failed[0].status, "failed", "the bus went down after a page: {failed:?}");
    assert_eq!(bus.pages.lock().unwrap().len(), 1);
    bus.left.store(usize::MAX, std::sync::atomic::Ordering::SeqCst);
    let done = arena.end_run_until(Some(&bus), Utc::now() + Duration::minutes(5)).await;
    assert_eq!((done[0].status, done[0].total), ("done", 1200), "{done:?}");
    let pages: Vec<Value> = bus.pages.lock().unwrap().iter().map(|page| serde_json::from_str(page).unwrap()).collect();
    let ranks: Vec<u64> = pages.iter().flat_map(|p| p["results"].as_array().unwrap().iter().map(|r| r["rank"].as_u64().unwrap())).collect();
    assert_eq!(ranks, (1..=1200).collect::<Vec<_>>(), "every rank once, in order");
    assert_eq!(pages[0]["results"][499]["prize"], json!({"text": "x".repeat(300)}));
    assert!(pages.last().unwrap()["results"].as_array().unwrap().iter().all(|r| r["prize"].is_null()));
}

/// Every key lost: the restore brings the tournament's definition, its seats, attempts and
/// scores back, byte for byte.
#[tokio::test]
async fn a_restore_after_every_key_was_lost_brings_tournaments_back_with_seats_attempts_and_scores() {
    // A redis-server of the test's own, emptied by a literal FLUSHALL.
    let (_server, arena) = journaled_arena_of_its_own().await;
    let start = arena.app.now() - Duration::minutes(10);
    assert_eq!(
        arena.put("cup", &cup(start, 4, json!({"join_required": true, "max_size": 3, "max_entries": 2}))).await.0,
        StatusCode::CREATED
    );
    for user in ["ann", "bo", "cy"] {
        assert_eq!(arena.join("cup", user).await.0, StatusCode::OK);
    }
    for (i, (user, score)) in [("ann", 10), ("bo", 30), ("ann", 40)].iter().enumerate() {
        assert_eq!(arena.play("cup", &format!("c{i}"), user, *score).await.0, StatusCode::OK);
    }
    let (client, bucket) = drain_to_new_bucket(&arena.app, 2).await;
    // Verify replays the journal (joins, then scores with their seats and attempts) and finds
    // Redis as it says.
    assert_verified(&arena, &client, &bucket, "cup").await;
    let before = state(&arena).await;
    flush_and_restore(&arena, &client, &bucket).await;
    let after = state(&arena).await;
    assert_eq!(after, before, "every key back, byte for byte");
    assert_eq!(code(&arena.join("cup", "dee").await.1), Some("tournament_full"), "the seats came back");
    assert_eq!(code(&arena.play("cup", "c9", "ann", 1).await.1), Some("entry_limit"), "the attempts came back");
    let (_, top) = arena.read("/v1/tournaments/cup/top").await;
    assert_eq!(users(&top["entries"]), ["ann", "bo"], "{top}");
}

/// Ended early, stored and released, then every key lost: the restore brings it back ended,
/// as it was (no live board, no seats, writes refused), not open until its natural end.
#[tokio::test]
async fn a_restore_after_an_instance_was_ended_and_stored_keeps_it_ended_and_released() {
    restored_after_release(false).await;
}

/// The same for a `cron` tournament (an instance a year, opened in the minute the window
/// starts): its released instance is named by its own period kind (the restore knows the
/// runtime boards' kinds when it settles closed periods).
#[tokio::test]
async fn a_restore_after_a_cron_instance_was_ended_and_stored_keeps_it_ended_and_released() {
    restored_after_release(true).await;
}

async fn restored_after_release(cron: bool) {
    // A redis-server of the test's own, emptied by a literal FLUSHALL.
    let (_server, arena) = journaled_arena_of_its_own().await;
    let bus = subscribed_to(TOURNAMENT_ENDED).await;
    let start = arena.app.now() - Duration::minutes(10);
    let start = start - Duration::seconds(start.timestamp().rem_euclid(60));
    let mut body = cup(start, 24, json!({"join_required": true, "max_size": 3}));
    let mut instance = "all".to_owned();
    if cron {
        body["cron"] = json!(start.format("%M %H %d %m *").to_string());
        body["duration_secs"] = json!(86_400);
        instance = start.format("%Y-%m-%dT%H%M").to_string();
    }
    assert_eq!(arena.put("cup", &body).await.0, StatusCode::CREATED);
    for user in ["ann", "bo"] {
        assert_eq!(arena.join("cup", user).await.0, StatusCode::OK);
    }
    for (i, (user, score)) in [("ann", 10), ("bo", 30)].iter().enumerate() {
        arena.app.set_now(arena.app.now() + Duration::seconds(1));
        assert_eq!(arena.play("cup", &format!("c{i}"), user, *score).await.0, StatusCode::OK);
    }
    // Ended a second after the last score (a replay decides a score at the end's very
    // millisecond against the end).
    arena.app.set_now(arena.app.now() + Duration::seconds(1));
    assert_eq!(arena.end("cup", "done early").await.0, StatusCode::ACCEPTED);
    let reports = arena.end_run(Some(&bus.bus)).await;
    assert_eq!((reports.len(), reports[0].status), (1, "done"), "{reports:?}");
    let (client, bucket) = drain_to_new_bucket(&arena.app, 2).await;
    // Verify replays the release too: the replayed instance is freed as the live one was.
    assert_verified(&arena, &client, &bucket, "cup").await;
    let before = state(&arena).await;
    assert!(!before.iter().any(|(key, ..)| key.contains("{cup}:z:")), "released: {before:?}");
    flush_and_restore(&arena, &client, &bucket).await;
    let after = state(&arena).await;
    assert_eq!(after, before, "every key as it was after the release, byte for byte, and no more");
    let (status, body) = arena.play("cup", "c9", "ann", 99).await;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, Some("tournament_closed")), "{body}");
    let (_, top) = arena.read("/v1/tournaments/cup/top").await;
    assert_eq!((top["source"].as_str(), users(&top["entries"])), (Some("archived"), vec!["bo", "ann"]), "{top}");
    let again = arena.end_run(Some(&bus.bus)).await;
    assert!(again.is_empty(), "finished before the loss, as the table says: {again:?}");
    assert!(bus.events(TOURNAMENT_ENDED).await.len() == 1, "announced once");
    let (_, results) = arena.read(&format!("/v1/tournaments/cup/results?instance={instance}")).await;
    assert_eq!(results["total"].as_u64(), Some(2), "{results}");
}

/// The release of an ended instance writes nothing when a key it writes holds another type:
/// its run fails (logged, tried again), and once the key is fixed the next run frees it.
#[tokio::test]
async fn a_release_meeting_a_key_of_another_type_writes_nothing_and_the_next_run_frees_it() {
    use standings::domain::period::{Period, PeriodKind};
    let instance = Period::named(PeriodKind::All, "all", chrono_tz::UTC).unwrap();
    for victim in ["board", "entries", "size", "journal"] {
        let app: TestApp = spawn_journaled(standings::domain::config::Config::default_boards()).await;
        let arena = Arena::on(app, unique_season_table().await);
        let start = arena.app.now() - Duration::minutes(10);
        assert_eq!(arena.put("cup", &cup(start, 24, json!({"join_required": true}))).await.0, StatusCode::CREATED);
        assert_eq!(arena.join("cup", "ann").await.0, StatusCode::OK);
        assert_eq!(arena.play("cup", "c1", "ann", 10).await.0, StatusCode::OK);
        arena.app.set_now(arena.app.now() + Duration::seconds(1));
        assert_eq!(arena.end("cup", "done early").await.0, StatusCode::ACCEPTED);
        let keys = arena.app.keys.board("cup");
        let key = match victim {
            "board" => keys.period(&instance),
            "entries" => keys.entries(&instance),
            "size" => keys.final_size(&instance),
            _ => keys.journal(),
        };
        let mut conn = arena.app.redis.clone();
        let _: () = redis::pipe().del(&key).rpush(&key, "x").query_async(&mut conn).await.unwrap();
        let before = arena.app.keyspace().await;
        let failed = arena.end_run(None).await;
        assert_eq!(failed[0].status, "failed", "{victim}: {failed:?}");
        let after = arena.app.keyspace().await;
        // The run's step before the release (the results stored, their frozen copy freed) went on.
        let changed: Vec<&String> = after
            .iter()
            .chain(&before)
            .filter(|entry| !(before.contains(entry) && after.contains(entry)))
            .map(|(key, ..)| key)
            .filter(|key| !key.contains(":frozen:"))
            .collect();
        assert!(changed.is_empty(), "{victim}: nothing written, but {changed:?}");
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.unwrap();
        let freed = arena.end_run(None).await;
        assert_eq!(freed[0].status, "stored", "{victim}: {freed:?}");
        let left: Vec<String> = arena.app.keyspace().await.into_iter().map(|(key, ..)| key).filter(|key| key.contains("{cup}")).collect();
        assert!(
            !left.iter().any(|key| key.contains(":players:") || key.contains(":entries:") || key.contains(":z:")),
            "{victim}: {left:?}"
        );
    }
}

/// Six days of a daily tournament whose end runs did not happen (an outage): one run ends every
/// instance, oldest backlog included, and later runs look at none of them again.
#[tokio::test]
async fn every_instance_of_a_backlog_is_ended_and_finished_ones_are_not_read_again() {
    let arena = Arena::new().await;
    let bus = subscribed_to(TOURNAMENT_ENDED).await;
    let midnight = arena.app.now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    let first = midnight - Duration::days(5);
    let body = cup(first, 24 * 30, json!({"reset": "day", "duration_secs": 7200}));
    assert_eq!(arena.put_at("daily", &body, first).await.0, StatusCode::CREATED);
    let days: Vec<String> = (0..6).map(|d| (first + Duration::days(d)).format("%Y-%m-%d").to_string()).collect();
    for (d, day) in days.iter().enumerate() {
        arena.app.set_now(first + Duration::days(d as i64) + Duration::minutes(10));
        assert_eq!(arena.play("daily", &format!("d{d}"), "ann", 10 + d as i64).await.0, StatusCode::OK, "{day}");
    }
    arena.app.set_now(midnight + Duration::hours(3));
    let reports = arena.end_run(Some(&bus.bus)).await;
    let mut ended: Vec<(String, &str)> = reports.iter().map(|r| (r.instance.clone(), r.status)).collect();
    ended.sort();
    assert_eq!(ended, days.iter().map(|day| (day.clone(), "done")).collect::<Vec<_>>(), "{reports:?}");
    for (d, day) in days.iter().enumerate() {
        let (_, results) = arena.read(&format!("/v1/tournaments/daily/results?instance={day}")).await;
        assert_eq!(results["results"][0]["score"].as_i64(), Some(10 + d as i64), "{day}: {results}");
    }
    assert_eq!(bus.events(TOURNAMENT_ENDED).await.len(), 6, "each announced once");
    assert!(arena.end_run(Some(&bus.bus)).await.is_empty(), "finished instances are behind the watermark");
    // The next day's instance is the one the next run ends.
    arena.app.set_now(midnight + Duration::days(1) + Duration::minutes(5));
    assert_eq!(arena.play("daily", "d6", "bo", 7).await.0, StatusCode::OK);
    arena.app.set_now(midnight + Duration::days(1) + Duration::hours(2));
    let next: Vec<(String, &str)> = arena.end_run(Some(&bus.bus)).await.iter().map(|r| (r.instance.clone(), r.status)).collect();
    let tomorrow = (midnight + Duration::days(1)).format("%Y-%m-%d").to_string();
    assert_eq!(next, [(tomorrow, "done")]);
    assert_eq!(bus.events(TOURNAMENT_ENDED).await.len(), 1);
}
