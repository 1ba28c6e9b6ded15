//! Live edits (docs/tournaments.md#live-edits): `PATCH /v1/admin/tournaments/{id}` (end, title,
//! description, metadata, max_size, prizes) and `POST /v1/admin/tournaments/{id}/attempts`, on
//! real Redis, journaled, verified and restored after a FLUSHALL.

use axum::http::{Method, StatusCode};
use chrono::Duration;
use serde_json::{Value, json};
use standings::archive::bus::EventBridgeBus;
use standings_tests::journal::drain_to_new_bucket;
use standings_tests::tournament::{Arena, assert_verified, cup, flush_and_restore, journaled_arena_of_its_own, state};
use standings_tests::{ADMIN, WRITER};

fn code(body: &Value) -> Option<&str> {
    body["error"]["code"].as_str()
}

async fn patch(arena: &Arena, id: &str, body: Value) -> (StatusCode, Value) {
    arena.app.call(Method::PATCH, &format!("/v1/admin/tournaments/{id}"), body.to_string(), ADMIN).await
}

async fn grant(arena: &Arena, id: &str, body: Value) -> (StatusCode, Value) {
    arena.app.call(Method::POST, &format!("/v1/admin/tournaments/{id}/attempts"), body.to_string(), ADMIN).await
}

/// A top's `(user_id, score)`s, read as anybody (200 asserted).
async fn top(arena: &Arena, id: &str) -> Vec<(Value, Value)> {
    let (status, top) = arena.read(&format!("/v1/tournaments/{id}/top")).await;
    assert_eq!(status, StatusCode::OK, "{top}");
    top["entries"].as_array().unwrap().iter().map(|r| (r["user_id"].clone(), r["score"].clone())).collect()
}

async fn definition(arena: &Arena, id: &str) -> Value {
    arena.app.call(Method::GET, &format!("/v1/admin/tournaments/{id}"), "", ADMIN).await.1
}

/// A one-off running for 120 days is shortened to 60 (a window whose own scale has one time bit
/// less), then extended to 150; its scores keep the scale they were kept in (read and written
/// after each edit); a bad edit is refused naming its field with nothing changed; once it
/// ended, it takes no edit.
#[tokio::test]
async fn a_running_one_off_is_shortened_then_extended_and_its_scores_keep_their_scale() {
    let arena = Arena::new().await;
    let start = arena.app.now() - Duration::minutes(5);
    let body = cup(start, 24 * 120, json!({"max_size": 10, "prizes": [{"ranks": [1, 1], "reward": "gold"}]}));
    assert_eq!(arena.put("ext", &body).await.0, StatusCode::CREATED);
    assert_eq!(arena.play("ext", "e1", "ann", 50).await.0, StatusCode::OK);
    arena.app.set_now(start + Duration::days(50));
    let shorter = json!({"end": start + Duration::days(60), "title": "Friday cup, shorter", "max_size": 20});
    let (status, edited) = patch(&arena, "ext", shorter.clone()).await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(
        (edited["definition"]["title"].clone(), edited["definition"]["max_size"].clone()),
        (json!("Friday cup, shorter"), json!(20))
    );
    assert_eq!(patch(&arena, "ext", shorter).await, (StatusCode::OK, edited.clone()), "again: the same");
    assert_eq!(arena.play("ext", "e2", "bo", 60).await.0, StatusCode::OK);
    assert_eq!(top(&arena, "ext").await, [(json!("bo"), json!(60)), (json!("ann"), json!(50))]);

    // Past the first end, within the new one: open, every score read in its scale.
    let (status, edited) = patch(&arena, "ext", json!({"end": start + Duration::days(150)})).await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    arena.app.set_now(start + Duration::days(130));
    let (status, played) = arena.play("ext", "e3", "cy", 55).await;
    assert_eq!(status, StatusCode::OK, "{played}");
    assert_eq!(top(&arena, "ext").await, [(json!("bo"), json!(60)), (json!("cy"), json!(55)), (json!("ann"), json!(50))]);

    for (refused, field) in [
        (json!({"end": start + Duration::days(300)}), "end"),
        (json!({"end": start + Duration::days(100)}), "end"),
        (json!({"end": arena.app.now() + Duration::seconds(59)}), "end"),
        (json!({"start": start}), "start"),
        (json!({"max_size": 5}), "max_size"),
        (json!({"title": null}), "title"),
    ] {
        let (status, answer) = patch(&arena, "ext", refused.clone()).await;
        assert_eq!((status, code(&answer)), (StatusCode::BAD_REQUEST, Some("invalid_tournament")), "{refused}: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap().starts_with(field), "{answer}");
    }
    assert_eq!(definition(&arena, "ext").await, edited, "nothing changed by a refused edit");

    let soon = arena.app.now() + Duration::minutes(1);
    assert_eq!(patch(&arena, "ext", json!({"end": soon})).await.0, StatusCode::OK);
    arena.app.set_now(soon + Duration::seconds(1));
    assert_eq!(code(&arena.play("ext", "e4", "dee", 70).await.1), Some("tournament_closed"), "shortened: over");
    assert_eq!(top(&arena, "ext").await.len(), 3);
    let (status, late) = patch(&arena, "ext", json!({"end": soon + Duration::hours(1)})).await;
    assert_eq!((status, code(&late)), (StatusCode::CONFLICT, Some("tournament_closed")), "{late}");
    assert_eq!(patch(&arena, "nope", json!({"title": "x"})).await.0, StatusCode::NOT_FOUND);
    let (status, _) = arena.app.call(Method::PATCH, "/v1/admin/tournaments/ext", json!({"title": "x"}).to_string(), WRITER).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "admin scope");
}

/// New prizes reach the instance still open and the one that ended but whose results are not
/// stored yet keeps the prizes it ran for.
#[tokio::test]
async fn edited_prizes_reach_open_instances_and_an_ended_one_keeps_its_own() {
    let arena = Arena::new().await;
    let today = arena.app.now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    let body = cup(
        today - Duration::days(1),
        24 * 5,
        json!({"reset": "day", "duration_secs": 86_400,
        "prizes": [{"ranks": [1, 1], "reward": "gold"}]}),
    );
    assert_eq!(arena.put_at("daily", &body, today - Duration::days(1)).await.0, StatusCode::CREATED);
    let now = arena.app.now();
    arena.app.set_now(today - Duration::hours(2));
    assert_eq!(arena.play("daily", "y1", "ann", 5).await.0, StatusCode::OK, "yesterday");
    arena.app.set_now(now);
    assert_eq!(arena.play("daily", "t1", "bo", 7).await.0, StatusCode::OK, "today");
    let (status, edited) = patch(&arena, "daily", json!({"prizes": [{"ranks": [1, 1], "reward": "silver"}]})).await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    let yesterday = (today - Duration::days(1)).format("%Y-%m-%d").to_string();
    arena.end_run(None).await;
    let (status, results) = arena.read(&format!("/v1/tournaments/daily/results?instance={yesterday}")).await;
    assert_eq!(status, StatusCode::OK, "{results}");
    assert_eq!((results["results"][0]["user_id"].clone(), results["results"][0]["prize"].clone()), (json!("ann"), json!("gold")));
    let (_, top) = arena.read("/v1/tournaments/daily/top").await;
    assert_eq!((top["entries"][0]["user_id"].clone(), top["entries"][0]["prize"].clone()), (json!("bo"), json!("silver")));
    let (_, shown) = arena.read("/v1/tournaments/daily").await;
    assert_eq!(shown["prizes"][0]["reward"], json!("silver"));
}

/// Attempts granted (with a grant id: a retry grants nothing again), audited; concurrent grants
/// add up exactly; an edit and the grants are journaled: verify finds Redis as the journal says
/// and a restore after a FLUSHALL brings them back byte for byte.
#[tokio::test]
async fn attempts_granted_are_exact_audited_journaled_and_restored() {
    let (_server, arena) = journaled_arena_of_its_own().await;
    let start = arena.app.now() - Duration::minutes(10);
    assert_eq!(arena.put("g", &cup(start, 4, json!({"max_entries": 1}))).await.0, StatusCode::CREATED);
    assert_eq!(arena.play("g", "p1", "ann", 10).await.0, StatusCode::OK);
    assert_eq!(code(&arena.play("g", "p2", "ann", 11).await.1), Some("entry_limit"));
    let ask = json!({"user_id": "ann", "add": 2, "reason": "server hiccup", "grant_id": "g-1"});
    let (status, granted) = grant(&arena, "g", ask.clone()).await;
    assert_eq!(status, StatusCode::OK, "{granted}");
    assert_eq!((granted["entries_left"].clone(), granted["duplicate"].clone()), (json!(2), json!(false)));
    let (_, again) = grant(&arena, "g", ask.clone()).await;
    assert_eq!((again["entries_left"].clone(), again["duplicate"].clone()), (json!(2), json!(true)), "a retry grants nothing");
    let mut other = ask.clone();
    other["add"] = json!(3);
    assert_eq!(code(&grant(&arena, "g", other).await.1), Some("grant_conflict"));

    // Ten admins at once, a grant each: exactly ten more.
    let asks = (0..10).map(|i| grant(&arena, "g", json!({"user_id": "ann", "add": 1, "reason": "goodwill", "grant_id": format!("c-{i}")})));
    assert!(futures::future::join_all(asks).await.iter().all(|(status, _)| *status == StatusCode::OK));
    for i in 0..12 {
        assert_eq!(arena.play("g", &format!("q{i}"), "ann", 20 + i).await.0, StatusCode::OK, "attempt {i}");
    }
    assert_eq!(code(&arena.play("g", "q12", "ann", 99).await.1), Some("entry_limit"), "exactly 1 + 2 + 10");
    let (_, audit) = arena.app.call(Method::GET, "/v1/admin/audit?board=g", "", ADMIN).await;
    let grants = audit["entries"].as_array().unwrap().iter().filter(|e| e["kind"] == "grant").count();
    assert_eq!(grants, 11, "{audit}");

    assert_eq!(patch(&arena, "g", json!({"title": "Renamed", "metadata": {"season": 2}})).await.0, StatusCode::OK);
    let (client, bucket) = drain_to_new_bucket(&arena.app, 2).await;
    assert_verified(&arena, &client, &bucket, "g").await;
    let before = state(&arena).await;
    flush_and_restore(&arena, &client, &bucket).await;
    assert_eq!(state(&arena).await, before, "every key back, byte for byte");
    assert_eq!(definition(&arena, "g").await["definition"]["title"], json!("Renamed"));
    assert_eq!(code(&arena.play("g", "q13", "ann", 99).await.1), Some("entry_limit"), "the grants came back");
}

/// Refusals write nothing: no limit to grant against, a bad count or reason, an instance over,
/// and a grant whose audit log holds another type (500, nothing written, then whole once
/// the key is mended).
#[tokio::test]
async fn a_refused_or_failed_grant_writes_nothing() {
    let arena = Arena::new().await;
    let start = arena.app.now() - Duration::minutes(10);
    assert_eq!(arena.put("free", &cup(start, 1, json!({}))).await.0, StatusCode::CREATED);
    assert_eq!(arena.put("lim", &cup(start, 1, json!({"max_entries": 1}))).await.0, StatusCode::CREATED);
    let ok = json!({"user_id": "ann", "add": 1, "reason": "r"});
    let (status, body) = grant(&arena, "free", ok.clone()).await;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, Some("invalid_tournament")), "{body}");
    for bad in [
        json!({"user_id": "ann", "add": 0, "reason": "r"}),
        json!({"user_id": "ann", "add": 1, "reason": " "}),
        json!({"user_id": "a b", "add": 1, "reason": "r"}),
        json!({"user_id": "ann", "add": 1}),
    ] {
        assert_eq!(grant(&arena, "lim", bad.clone()).await.0, StatusCode::BAD_REQUEST, "{bad}");
    }
    let before = arena.app.keyspace().await;
    // The audit log is written after the attempts: a wrong type there must not leave them granted.
    let audit = arena.app.keys.board("lim").audit();
    let mut conn = arena.app.redis.clone();
    let () = redis::cmd("SET").arg(&audit).arg("x").query_async(&mut conn).await.unwrap();
    let (status, body) = grant(&arena, "lim", json!({"user_id": "ann", "add": 1, "reason": "r", "grant_id": "w"})).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    let () = redis::cmd("DEL").arg(&audit).query_async(&mut conn).await.unwrap();
    assert_eq!(arena.app.keyspace().await, before, "nothing written by the failed grant");
    let (status, body) = grant(&arena, "lim", json!({"user_id": "ann", "add": 1, "reason": "r", "grant_id": "w"})).await;
    assert_eq!((status, body["duplicate"].clone(), body["entries_left"].clone()), (StatusCode::OK, json!(false), json!(2)), "{body}");
    arena.app.set_now(start + Duration::hours(1));
    assert_eq!(code(&grant(&arena, "lim", ok).await.1), Some("tournament_closed"));
}

/// A grant id retried after its instance ended and the next opened grants nothing there and
/// says so (409 `grant_conflict`), rather than answer the old instance's grant as this one's.
#[tokio::test]
async fn a_grant_retried_in_the_next_instance_is_refused_not_answered_as_granted() {
    let arena = Arena::new().await;
    let today = arena.app.now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    let body = cup(today, 24 * 5, json!({"reset": "day", "duration_secs": 86_400, "max_entries": 1}));
    assert_eq!(arena.put_at("nightly", &body, today).await.0, StatusCode::CREATED);
    arena.app.set_now(today + Duration::hours(23));
    let ask = json!({"user_id": "ann", "add": 2, "reason": "lag", "grant_id": "n-1"});
    let (status, granted) = grant(&arena, "nightly", ask.clone()).await;
    assert_eq!((status, granted["entries_left"].clone()), (StatusCode::OK, json!(3)), "{granted}");
    arena.app.set_now(today + Duration::hours(25));
    let (status, again) = grant(&arena, "nightly", ask).await;
    assert_eq!((status, code(&again)), (StatusCode::CONFLICT, Some("grant_conflict")), "{again}");
    assert_eq!(arena.play("nightly", "x1", "ann", 1).await.0, StatusCode::OK);
    assert_eq!(code(&arena.play("nightly", "x2", "ann", 2).await.1), Some("entry_limit"), "today's one attempt only");
}

/// A daily tournament an operator ends early every day for 120 days, with a long reason each
/// time: an early end leaves the definition a day after its instance's scheduled end, so what is
/// kept beside it stays bounded and the tournament takes edits for years (with all 120 kept the
/// definition passes its 32 KiB and every edit is refused); an instance whose early end left
/// reads the same stored results and top as before. A description is set, then removed.
#[tokio::test]
async fn a_tournament_ended_early_every_day_keeps_a_bounded_definition_and_takes_edits() {
    const DAYS: i64 = 120;
    let arena = Arena::new().await;
    let midnight = arena.app.now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc() + Duration::days(1);
    let prizes = json!([{"ranks": [1, 1], "reward": "gold"}]);
    let body = cup(midnight, 24 * 400, json!({"reset": "day", "duration_secs": 12 * 3600, "prizes": prizes}));
    assert_eq!(arena.put("daily", &body).await.0, StatusCode::CREATED);
    let day = |d: i64| (midnight + Duration::days(d)).format("%Y-%m-%d").to_string();
    let reason = "é".repeat(200);
    let mut first = None;
    for d in 0..DAYS {
        arena.app.set_now(midnight + Duration::days(d) + Duration::hours(1));
        assert_eq!(arena.play("daily", &format!("e{d}"), "ann", 10 + d).await.0, StatusCode::OK, "{}", day(d));
        let (status, ended) = arena.end("daily", &reason).await;
        assert_eq!((status, ended["instance"].as_str()), (StatusCode::ACCEPTED, Some(day(d).as_str())), "{ended}");
        if d == 1 {
            // Day 0's results stored by the archive's run, with the end it had.
            arena.end_run(None).await;
            let results = arena.read(&format!("/v1/tournaments/daily/results?instance={}", day(0))).await;
            let top = arena.read(&format!("/v1/tournaments/daily/top?instance={}", day(0))).await;
            assert_eq!((results.0, &results.1["results"][0]["prize"]), (StatusCode::OK, &json!("gold")), "{}", results.1);
            first = Some((results, top));
        }
    }
    let stored = definition(&arena, "daily").await;
    let closed: Vec<&String> = stored["closed"].as_object().unwrap().keys().collect();
    assert_eq!(closed, [&day(DAYS - 2), &day(DAYS - 1)], "only the early ends a read still needs: {}", stored["closed"]);
    let (status, edited) = patch(&arena, "daily", json!({"title": "Daily cup, for years", "description": "Every day"})).await;
    assert_eq!((status, edited["definition"]["description"].as_str()), (StatusCode::OK, Some("Every day")), "{edited}");
    let (status, edited) = patch(&arena, "daily", json!({"description": null})).await;
    assert_eq!((status, edited["definition"].get("description")), (StatusCode::OK, None), "{edited}");
    assert_eq!(edited["definition"]["title"], json!("Daily cup, for years"));
    let (results, top) = first.unwrap();
    assert_eq!(arena.read(&format!("/v1/tournaments/daily/results?instance={}", day(0))).await, results);
    assert_eq!(arena.read(&format!("/v1/tournaments/daily/top?instance={}", day(0))).await, top);
}

/// A daily tournament whose prizes (a kilobyte) change every day for 40 days: replaced prizes
/// leave the definition a week after the last instance they priced (the archive's run recorded
/// each instance's prizes with its results), so every edit is taken (with all of them kept the
/// definition passed its 32 KiB in about three weeks and every change of prizes was refused);
/// each instance's results, read after, show the prizes it ended with.
#[tokio::test]
async fn prizes_changed_every_day_for_weeks_are_taken_and_each_instance_keeps_its_own() {
    const DAYS: i64 = 40;
    let arena = Arena::new().await;
    let midnight = arena.app.now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc() + Duration::days(1);
    let prizes = |d: i64| json!([{"ranks": [1, 1], "reward": {"day": d, "art": "p".repeat(1000)}}]);
    let body = cup(midnight, 24 * 400, json!({"reset": "day", "duration_secs": 86_400, "prizes": prizes(-1)}));
    assert_eq!(arena.put("daily", &body).await.0, StatusCode::CREATED);
    let day = |d: i64| (midnight + Duration::days(d)).format("%Y-%m-%d").to_string();
    for d in 0..DAYS {
        arena.app.set_now(midnight + Duration::days(d) + Duration::hours(1));
        // Yesterday's instance stored, with its prizes (the run's deadline on the app's clock).
        let ran = arena.end_run_until(None::<&EventBridgeBus>, arena.app.now() + Duration::minutes(5)).await;
        assert!(d == 0 || ran.iter().any(|end| end.instance == day(d - 1) && end.status == "stored"), "{ran:?}");
        assert_eq!(arena.play("daily", &format!("e{d}"), "ann", 10 + d).await.0, StatusCode::OK, "{}", day(d));
        let (status, edited) = patch(&arena, "daily", json!({"prizes": prizes(d)})).await;
        assert_eq!(status, StatusCode::OK, "day {d}: {edited}");
    }
    let kept = definition(&arena, "daily").await["prior_prizes"].as_array().map_or(0, Vec::len);
    assert!(kept <= 9, "the first and a week of replaced prizes kept, not {kept}");
    arena.app.set_now(midnight + Duration::days(DAYS) + Duration::hours(1));
    arena.end_run_until(None::<&EventBridgeBus>, arena.app.now() + Duration::minutes(5)).await;
    for d in [0, 1, DAYS / 2, DAYS - 1] {
        let (status, results) = arena.read(&format!("/v1/tournaments/daily/results?instance={}", day(d))).await;
        assert_eq!(status, StatusCode::OK, "{results}");
        assert_eq!(results["results"][0]["prize"]["day"], json!(d), "day {d}: the prizes it ended with");
        let (_, top) = arena.read(&format!("/v1/tournaments/daily/top?instance={}", day(d))).await;
        assert_eq!(top["entries"][0]["prize"]["day"], json!(d), "day {d}'s top: {top}");
    }
}
