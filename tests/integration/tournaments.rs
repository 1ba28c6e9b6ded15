//! Tournaments (docs/tournaments.md): definitions, seats, attempts and the window, on real
//! Redis, read through the `seasons` function with a moto DynamoDB table.

use axum::http::{Method, StatusCode};
use chrono::Duration;
use futures::future::join_all;
use serde_json::{Value, json};
use standings_tests::tournament::{Arena, cup};
use standings_tests::{ADMIN, WRITER};

fn code(body: &Value) -> Option<&str> {
    body["error"]["code"].as_str()
}

#[tokio::test]
async fn a_tournament_is_defined_once_read_back_and_refused_where_its_fields_are_wrong() {
    let arena = Arena::new().await;
    let start = arena.app.now() + Duration::hours(1);
    let body = cup(start, 2, json!({"max_size": 10, "prizes": [{"ranks": [1, 1], "reward": {"gems": 100}}]}));
    let (status, created) = arena.put("friday-cup", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["definition"], body);
    let reordered: Value = serde_json::from_str(&body.to_string()).unwrap();
    assert_eq!(arena.put("friday-cup", &reordered).await, (StatusCode::OK, created.clone()), "the same body again");
    let (status, other) = arena.put("friday-cup", &cup(start, 3, json!({}))).await;
    assert_eq!((status, code(&other)), (StatusCode::CONFLICT, Some("board_exists")), "{other}");
    let (status, declared) = arena.put("points", &cup(start, 3, json!({}))).await;
    assert_eq!((status, code(&declared)), (StatusCode::CONFLICT, Some("board_exists")), "a declared board's name: {declared}");
    let (status, read) = arena.app.call(Method::GET, "/v1/admin/tournaments/friday-cup", "", ADMIN).await;
    assert_eq!((status, &read), (StatusCode::OK, &created));
    let (status, _) = arena.app.call(Method::GET, "/v1/admin/tournaments/friday-cup", "", WRITER).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "the admin scope only");

    for (bad, field) in [
        (cup(start, 2, json!({"reset": "day"})), "duration_secs"),
        (cup(start, 2, json!({"prizes": [{"ranks": [1, 3], "reward": 1}, {"ranks": [3, 4], "reward": 2}]})), "prizes[1].ranks"),
        (cup(start, 2, json!({"max_size": 0})), "max_size"),
        (cup(start, 2, json!({"keep": "most"})), "keep"),
        (cup(start, -1, json!({})), "end"),
        (cup(start, 2, json!({"colour": "red"})), "colour"),
        (cup(chrono::DateTime::parse_from_rfc3339("2019-12-31T00:00:00Z").unwrap().to_utc(), 2, json!({})), "start"),
    ] {
        let (status, body) = arena.put("bad-cup", &bad).await;
        assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, Some("invalid_tournament")), "{body}");
        assert!(body["error"]["message"].as_str().unwrap().starts_with(field), "{field}: {body}");
    }
    assert_eq!(arena.app.call(Method::GET, "/v1/admin/tournaments/bad-cup", "", ADMIN).await.0, StatusCode::NOT_FOUND);

    // A tournament is not a board to redefine, delete or submit to past its own route.
    let (status, body) = arena
        .app
        .define(
            "plain",
            &json!({"kind": "scores", "keep": "best", "periods": ["all"], "top": 10,
        "timezone": "UTC", "tournament": {}}),
        )
        .await;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, Some("invalid_board")), "{body}");
    let (status, body) = arena.app.call(Method::DELETE, "/v1/admin/boards/friday-cup", "", ADMIN).await;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, Some("is_tournament")), "{body}");
    arena.app.set_now(start + Duration::minutes(1));
    let score = json!({"event_id": "e1", "user_id": "ann", "score": 5});
    let (status, body) = arena.app.call(Method::POST, "/v1/boards/friday-cup/scores", score.to_string(), WRITER).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, Some("unknown_board")), "{body}");
}

/// 1,000 players join at once for 100 seats: exactly 100 get in, the rest are told it is full,
/// and joining again answers the same.
#[tokio::test]
async fn a_thousand_concurrent_joins_fill_exactly_a_hundred_seats() {
    let arena = Arena::new().await;
    let start = arena.app.now() - Duration::minutes(5);
    assert_eq!(arena.put("seats", &cup(start, 2, json!({"max_size": 100, "join_required": true}))).await.0, StatusCode::CREATED);
    let users: Vec<String> = (0..1000).map(|i| format!("p{i:04}")).collect();
    let answers = join_all(users.iter().map(|user| arena.join("seats", user))).await;
    let joined: Vec<&str> = users.iter().zip(&answers).filter(|(_, (s, _))| *s == StatusCode::OK).map(|(u, _)| u.as_str()).collect();
    let full = answers.iter().filter(|(s, body)| *s == StatusCode::CONFLICT && code(body) == Some("tournament_full")).count();
    assert_eq!((joined.len(), full), (100, 900), "{:?}", answers.iter().find(|(s, _)| *s != StatusCode::OK));
    let (status, again) = arena.join("seats", joined[0]).await;
    assert_eq!(
        (status, again["joined"].as_bool(), again["size"].as_u64(), again["max_size"].as_u64()),
        (StatusCode::OK, Some(true), Some(100), Some(100))
    );
    let (status, view) = arena.read("/v1/tournaments/seats").await;
    assert_eq!((status, view["size"].as_u64(), view["can_join"].as_bool()), (StatusCode::OK, Some(100), Some(false)), "{view}");
    let (status, body) = arena.play("seats", "late", "p-outsider", 10).await;
    assert_eq!((status, code(&body)), (StatusCode::FORBIDDEN, Some("not_joined")), "{body}");

    // Without a join, a first score takes the seat, exactly as a join does.
    assert_eq!(arena.put("open-seats", &cup(start, 2, json!({"max_size": 10}))).await.0, StatusCode::CREATED);
    let ids: Vec<String> = (0..200).map(|i| format!("f{i}")).collect();
    let answers = join_all(ids.iter().enumerate().map(|(i, id)| arena.play("open-seats", id, &users[i], 5))).await;
    let seated = answers.iter().filter(|(s, _)| *s == StatusCode::OK).count();
    let full = answers.iter().filter(|(s, body)| *s == StatusCode::CONFLICT && code(body) == Some("tournament_full")).count();
    assert_eq!((seated, full), (10, 190), "{:?}", answers.iter().find(|(s, b)| *s != StatusCode::OK && code(b) != Some("tournament_full")));
    let (_, top) = arena.read("/v1/tournaments/open-seats/top?limit=100").await;
    assert_eq!(top["total"].as_u64(), Some(10), "nothing of a refused score was written: {top}");
}

/// Three attempts each: twenty concurrent submissions by one player apply exactly three, the
/// kept score is the best of those; retries are duplicates, another payload a conflict.
#[tokio::test]
async fn attempts_are_exact_under_concurrent_submissions_by_one_player() {
    let arena = Arena::new().await;
    let start = arena.app.now() - Duration::minutes(5);
    assert_eq!(arena.put("tries", &cup(start, 2, json!({"max_entries": 3}))).await.0, StatusCode::CREATED);
    let ids: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
    let answers = join_all(ids.iter().zip(100..).map(|(id, score)| arena.play("tries", id, "ann", score))).await;
    let applied: Vec<i64> = answers.iter().enumerate().filter(|(_, (s, _))| *s == StatusCode::OK).map(|(i, _)| 100 + i as i64).collect();
    let limited = answers.iter().filter(|(s, body)| *s == StatusCode::UNPROCESSABLE_ENTITY && code(body) == Some("entry_limit")).count();
    assert_eq!((applied.len(), limited), (3, 17), "{answers:?}");
    let (status, me) = arena.read("/v1/tournaments/tries/users/ann").await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(
        (me["score"].as_i64(), me["rank"].as_u64(), me["entries_left"].as_u64()),
        (applied.iter().max().copied(), Some(1), Some(0)),
        "{me}"
    );
    let first = answers.iter().position(|(s, _)| *s == StatusCode::OK).unwrap();
    let (status, retry) = arena.play("tries", &format!("t{first}"), "ann", 100 + first as i64).await;
    assert_eq!((status, retry["duplicate"].as_bool(), retry["entries_left"].as_u64()), (StatusCode::OK, Some(true), Some(0)), "{retry}");
    let (status, body) = arena.play("tries", &format!("t{first}"), "ann", 1).await;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, Some("idempotency_conflict")), "{body}");
    let (status, other) = arena.play("tries", "bo-1", "bo", 7).await;
    assert_eq!((status, other["entries_left"].as_u64(), other["rank"].as_u64()), (StatusCode::OK, Some(2), Some(2)), "{other}");
}

/// The window is decided on each write's own time: nothing before `start`, nothing from `end`
/// on, and a refused write writes nothing.
#[tokio::test]
async fn the_window_s_edges_are_decided_on_the_write_s_own_time() {
    let arena = Arena::new().await;
    let start = arena.app.now() + Duration::hours(1);
    let end = start + Duration::hours(2);
    assert_eq!(arena.put("edges", &cup(start, 2, json!({}))).await.0, StatusCode::CREATED);
    let before = arena.app.keyspace().await;
    arena.app.set_now(start - Duration::seconds(1));
    for (status, body) in [arena.join("edges", "ann").await, arena.play("edges", "early", "ann", 5).await] {
        assert_eq!((status, code(&body)), (StatusCode::CONFLICT, Some("tournament_closed")), "{body}");
    }
    assert_eq!(arena.app.keyspace().await, before, "a refused write writes nothing");
    let (_, view) = arena.read("/v1/tournaments/edges").await;
    assert_eq!((view["state"].as_str(), view["can_join"].as_bool()), (Some("upcoming"), Some(false)), "{view}");
    arena.app.set_now(start);
    assert_eq!(arena.play("edges", "first", "ann", 5).await.0, StatusCode::OK);
    arena.app.set_now(end - Duration::seconds(1));
    assert_eq!(arena.play("edges", "last", "bo", 5).await.0, StatusCode::OK);
    arena.app.set_now(end);
    let (status, body) = arena.play("edges", "after", "cy", 50).await;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, Some("tournament_closed")), "{body}");
    let (_, top) = arena.read("/v1/tournaments/edges/top").await;
    let users: Vec<&str> = top["entries"].as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap()).collect();
    assert_eq!(users, ["ann", "bo"], "equal scores rank by who reached them first, to the second: {top}");
    let (_, ended) = arena.read("/v1/tournaments?state=ended").await;
    assert_eq!(ended["tournaments"][0]["tournament_id"], "edges", "{ended}");
    let (_, open) = arena.read("/v1/tournaments?state=open").await;
    assert_eq!(open["tournaments"], json!([]));
}

/// Equal scores a second apart rank first-to-reach whatever the user ids, on a window long
/// enough to need a smaller score range (a year: time parts for every second).
#[tokio::test]
async fn ties_a_second_apart_rank_first_to_reach_on_a_year_long_tournament() {
    let arena = Arena::new().await;
    let start = arena.app.now() - Duration::days(100);
    assert_eq!(arena.put("long", &cup(start, 24 * 365, json!({}))).await.0, StatusCode::CREATED);
    for (i, user) in ["zed", "amy", "moe"].iter().enumerate() {
        arena.app.set_now(start + Duration::days(200) + Duration::seconds(i as i64));
        let (status, body) = arena.play("long", &format!("l{i}"), user, 1000).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (_, top) = arena.read("/v1/tournaments/long/top").await;
    let users: Vec<&str> = top["entries"].as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap()).collect();
    assert_eq!(users, ["zed", "amy", "moe"], "{top}");
    let (status, body) = arena.play("long", "huge", "max", 1 << 29).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("out_of_range")),
        "a year's window takes scores up to 2^28: {body}"
    );
}

#[tokio::test]
async fn the_list_filters_by_category_and_state_and_shows_prizes_and_the_next_reset() {
    let arena = Arena::new().await;
    let now = arena.app.now();
    let prizes = json!([{"ranks": [1, 1], "reward": {"gems": 100}}, {"ranks": [2, 3], "reward": "badge"}]);
    assert_eq!(arena.put("open-cup", &cup(now - Duration::hours(1), 2, json!({"prizes": prizes}))).await.0, StatusCode::CREATED);
    let daily = cup(now - Duration::days(3), 24 * 30, json!({"category": "puzzles", "reset": "day", "duration_secs": 3600}));
    assert_eq!(arena.put("daily", &daily).await.0, StatusCode::CREATED);
    let (_, racing) = arena.read("/v1/tournaments?category=racing").await;
    let ids: Vec<&str> = racing["tournaments"].as_array().unwrap().iter().map(|t| t["tournament_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["open-cup"]);
    let (_, daily) = arena.read("/v1/tournaments/daily").await;
    let tomorrow = (now + Duration::days(1)).date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    // 10:00+08:00 is 02:00 UTC: today's hour from midnight UTC is over.
    assert_eq!(
        (daily["state"].as_str(), daily["next_reset"].as_str()),
        (Some("upcoming"), Some(tomorrow.format("%Y-%m-%dT%H:%M:%SZ").to_string().as_str())),
        "{daily}"
    );
    for (i, user) in ["ann", "bo", "cy", "dee"].iter().enumerate() {
        assert_eq!(arena.play("open-cup", &format!("o{i}"), user, 40 - i as i64).await.0, StatusCode::OK);
    }
    let (_, top) = arena.read("/v1/tournaments/open-cup/top?limit=4").await;
    let prizes: Vec<&Value> = top["entries"].as_array().unwrap().iter().map(|e| &e["prize"]).collect();
    assert_eq!(prizes, [&json!({"gems": 100}), &json!("badge"), &json!("badge"), &Value::Null], "{top}");
    let (status, body) = arena.read("/v1/tournaments?state=later").await;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, Some("malformed")));
    assert_eq!(arena.read("/v1/tournaments/nope").await.0, StatusCode::NOT_FOUND);
}

/// Real answers of every tournament route, success and error, match the OpenAPI document.
#[tokio::test]
async fn tournament_answers_match_the_documented_schemas() {
    use crate::openapi::{conform, sample};
    let arena = Arena::new().await;
    let start = arena.app.now() - Duration::minutes(5);
    let prizes = json!([{"ranks": [1, 1], "reward": {"gems": 5}}]);
    let body = cup(start, 2, json!({"max_size": 2, "max_entries": 1, "join_required": true, "prizes": prizes}));
    let admin = "/v1/admin/tournaments/{tournament_id}";
    let mut samples = vec![
        sample("put", admin, arena.put("doc-cup", &body).await),
        sample("put", admin, arena.put("doc-cup", &body).await),
        sample("put", admin, arena.put("doc-cup", &cup(start, 3, json!({}))).await),
        sample("put", admin, arena.put("bad-cup", &cup(start, 3, json!({"max_size": 0}))).await),
        sample("get", admin, arena.app.call(Method::GET, "/v1/admin/tournaments/doc-cup", "", ADMIN).await),
        sample("get", admin, arena.app.call(Method::GET, "/v1/admin/tournaments/none", "", ADMIN).await),
    ];
    let join = "/v1/tournaments/{tournament_id}/join";
    for user in ["ann", "bo", "cy"] {
        samples.push(sample("post", join, arena.join("doc-cup", user).await));
    }
    let scores = "/v1/tournaments/{tournament_id}/scores";
    samples.push(sample("post", scores, arena.play("doc-cup", "d1", "ann", 10).await));
    samples.push(sample("post", scores, arena.play("doc-cup", "d2", "ann", 11).await));
    samples.push(sample("post", scores, arena.play("doc-cup", "d3", "cy", 11).await));
    samples.push(sample("post", scores, arena.play("doc-cup", "d1", "ann", 12).await));
    samples.push(sample("get", "/v1/tournaments", arena.read("/v1/tournaments?state=open").await));
    samples.push(sample("get", "/v1/tournaments/{tournament_id}", arena.read("/v1/tournaments/doc-cup").await));
    samples.push(sample("get", "/v1/tournaments/{tournament_id}/top", arena.read("/v1/tournaments/doc-cup/top").await));
    samples.push(sample("get", "/v1/tournaments/{tournament_id}/top", arena.read("/v1/tournaments/doc-cup/top?instance=x").await));
    let user = "/v1/tournaments/{tournament_id}/users/{user_id}";
    samples.push(sample("get", user, arena.read("/v1/tournaments/doc-cup/users/ann").await));
    let results = "/v1/tournaments/{tournament_id}/results";
    samples.push(sample("get", results, arena.read("/v1/tournaments/doc-cup/results?instance=all").await));
    let call = |method: Method, path: &'static str, body: Value| arena.app.call(method, path, body.to_string(), ADMIN);
    samples.push(sample(
        "patch",
        admin,
        call(Method::PATCH, "/v1/admin/tournaments/doc-cup", json!({"title": "Doc cup", "max_size": 3})).await,
    ));
    samples.push(sample("patch", admin, call(Method::PATCH, "/v1/admin/tournaments/doc-cup", json!({"keep": "sum"})).await));
    let attempts = "/v1/admin/tournaments/{tournament_id}/attempts";
    let ask = json!({"user_id": "ann", "add": 1, "reason": "doc", "grant_id": "doc-1"});
    samples.push(sample("post", attempts, call(Method::POST, "/v1/admin/tournaments/doc-cup/attempts", ask.clone()).await));
    samples.push(sample("post", attempts, call(Method::POST, "/v1/admin/tournaments/doc-cup/attempts", ask).await));
    samples.push(sample(
        "post",
        attempts,
        call(
            Method::POST,
            "/v1/admin/tournaments/doc-cup/attempts",
            json!({"user_id": "ann", "add": 2, "reason": "doc", "grant_id": "doc-1"}),
        )
        .await,
    ));
    samples.push(sample("get", "/v1/admin/audit", call(Method::GET, "/v1/admin/audit?board=doc-cup", Value::Null).await));
    let end = "/v1/admin/tournaments/{tournament_id}/end";
    samples.push(sample("post", end, arena.end("doc-cup", "done").await));
    arena.end_run(None).await;
    samples.push(sample("get", results, arena.read("/v1/tournaments/doc-cup/results?instance=all").await));
    samples.push(sample("get", "/v1/tournaments/{tournament_id}/top", arena.read("/v1/tournaments/doc-cup/top").await));
    samples.push(sample("post", scores, arena.play("doc-cup", "d4", "bo", 1).await));
    samples.push(sample("delete", admin, arena.delete("doc-cup", "retired").await));
    samples.push(sample("delete", admin, arena.delete("none", "x").await));
    conform(&samples);
}

/// A monthly tournament's instance covers its whole month: `duration_secs` up to 31 days, each
/// instance cut at its month's end (28 days at most left a dead gap in longer months).
#[tokio::test]
async fn a_monthly_tournament_of_31_days_is_open_every_second_of_every_month() {
    use chrono::{Datelike, TimeZone};
    let arena = Arena::new().await;
    let now = arena.app.now();
    let first = chrono::Utc.with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0).unwrap();
    let body = cup(first, 24 * 100, json!({"reset": "month", "duration_secs": 31 * 86_400}));
    let (status, created) = arena.put("monthly", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let next = (first + Duration::days(32)).with_day(1).unwrap();
    for (i, at) in [now, next - Duration::seconds(1), next].into_iter().enumerate() {
        arena.app.set_now(at);
        let (status, played) = arena.play("monthly", &format!("m{i}"), "ann", 10 + i as i64).await;
        assert_eq!(status, StatusCode::OK, "at {at}: {played}");
        let instance = if at < next { first.format("%Y-%m").to_string() } else { next.format("%Y-%m").to_string() };
        assert_eq!(played["instance"].as_str(), Some(instance.as_str()), "at {at}");
    }
}
