//! Lists that page (issue 59 item 1, docs/tournaments.md#the-list): `GET /v1/tournaments` and
//! the board catalogue `GET /v1/boards`, `limit` at a time in name order with `next_cursor`,
//! entries without prizes and metadata, however many are defined.

use axum::http::StatusCode;
use chrono::Duration;
use serde_json::{Value, json};
use standings::services::runtime_boards::{RuntimeBoards, limit_from_env};
use standings_tests::tournament::{Arena, cup};

fn code(body: &Value) -> Option<&str> {
    body["error"]["code"].as_str()
}

/// Every id a walk of `path` lists, `limit` a page (the pages' sizes too): `field` of each
/// entry, following `next_cursor` until it is null.
async fn walk(arena: &Arena, path: &str, list: &str, field: &str, limit: u64) -> (Vec<String>, Vec<usize>) {
    let (mut ids, mut sizes, mut cursor) = (Vec::new(), Vec::new(), String::new());
    let join = if path.contains('?') { '&' } else { '?' };
    loop {
        let (status, page) = arena.read(&format!("{path}{join}limit={limit}{cursor}")).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let entries = page[list].as_array().unwrap();
        sizes.push(entries.len());
        ids.extend(entries.iter().map(|e| e[field].as_str().unwrap().to_owned()));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return (ids, sizes),
        }
    }
}

/// Sixteen tournaments with 100 prizes of 4,000 characters each passed Lambda's 6 MB response
/// limit in one list: now such a definition is refused, a page of twenty holds no prizes or
/// metadata, and a walk lists each tournament once, in name order, through filters and
/// tournaments defined and deleted mid-walk.
#[tokio::test]
async fn the_list_pages_without_prizes_and_a_walk_lists_every_tournament_once() {
    let arena = Arena::new().await;
    let now = arena.app.now();
    let prizes =
        |reward: usize| -> Vec<Value> { (1..=100).map(|rank| json!({"ranks": [rank, rank], "reward": "p".repeat(reward)})).collect() };
    // A definition is at most 16 KiB: the 400 KB one that filled lists before is refused whole.
    let before = arena.app.keyspace().await;
    let (status, body) = arena.put("huge", &cup(now, 4, json!({"prizes": prizes(4000)}))).await;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, Some("invalid_tournament")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().starts_with("body: a definition is at most 16384 bytes"), "{body}");
    assert_eq!(arena.app.keyspace().await, before, "nothing stored");
    let mut defined = Vec::new();
    for i in 0..26 {
        let id = format!("cup-{i:02}");
        // Even ones open now, odd ones tomorrow; the first sixteen carry 100 prizes and metadata.
        let start = if i % 2 == 0 { now - Duration::hours(1) } else { now + Duration::days(1) };
        let extra =
            if i < 16 { json!({"prizes": prizes(100), "metadata": {"art": "m".repeat(1000)}}) } else { json!({"category": "puzzles"}) };
        let (status, body) = arena.put(&id, &cup(start, 4, extra)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        defined.push(id);
    }
    let (status, first) = arena.read("/v1/tournaments").await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let listed = first["tournaments"].as_array().unwrap();
    let ids: Vec<&str> = listed.iter().map(|t| t["tournament_id"].as_str().unwrap()).collect();
    assert_eq!(ids, defined[..20].iter().map(String::as_str).collect::<Vec<_>>(), "twenty by default, in name order");
    assert_eq!(first["next_cursor"], "cup-19");
    assert!(listed.iter().all(|t| t.get("prizes").is_none() && t.get("metadata").is_none()), "{}", listed[0]);
    assert!(first.to_string().len() < 32 * 1024, "a page of twenty is small: {} bytes", first.to_string().len());
    let (_, one) = arena.read("/v1/tournaments/cup-00").await;
    assert_eq!((one["prizes"].as_array().map(Vec::len), one["metadata"]["art"].as_str().map(str::len)), (Some(100), Some(1000)));

    assert_eq!(walk(&arena, "/v1/tournaments", "tournaments", "tournament_id", 7).await, (defined.clone(), vec![7, 7, 7, 5]));
    let open: Vec<String> = defined.iter().step_by(2).cloned().collect();
    assert_eq!(walk(&arena, "/v1/tournaments?state=open", "tournaments", "tournament_id", 4).await.0, open);
    let puzzles: Vec<String> = defined[16..].to_vec();
    assert_eq!(walk(&arena, "/v1/tournaments?category=puzzles&state=upcoming", "tournaments", "tournament_id", 100).await.0, {
        puzzles.iter().filter(|id| id.ends_with(['1', '3', '5', '7', '9'])).cloned().collect::<Vec<_>>()
    });

    // Defined and deleted between two pages: the walk goes on after its cursor.
    let (_, page) = arena.read("/v1/tournaments?limit=10").await;
    assert_eq!(page["next_cursor"], "cup-09");
    assert_eq!(arena.put("cup-00a", &cup(now, 4, json!({}))).await.0, StatusCode::CREATED, "before the cursor: not listed again");
    assert_eq!(arena.put("cup-30", &cup(now, 4, json!({}))).await.0, StatusCode::CREATED);
    assert_eq!(arena.delete("cup-12", "retired").await.0, StatusCode::ACCEPTED);
    let (_, rest) = arena.read("/v1/tournaments?limit=100&cursor=cup-09").await;
    let ids: Vec<&str> = rest["tournaments"].as_array().unwrap().iter().map(|t| t["tournament_id"].as_str().unwrap()).collect();
    let mut expected: Vec<&str> = defined[10..].iter().map(String::as_str).filter(|id| *id != "cup-12").collect();
    expected.push("cup-30");
    assert_eq!((ids, &rest["next_cursor"]), (expected, &Value::Null));

    for (query, wanted) in [
        ("limit=0", "out_of_range"),
        ("limit=101", "out_of_range"),
        ("limit=many", "malformed"),
        ("cursor=a%20b", "invalid_id"),
        ("cursor=", "invalid_id"),
        ("page=2", "malformed"),
    ] {
        let (status, body) = arena.read(&format!("/v1/tournaments?{query}")).await;
        assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, Some(wanted)), "{query}: {body}");
    }
}

/// A page costs one round trip to Redis on a warm function, whatever the filter or the cursor
/// (docs/tournaments.md#the-list), counted by the store itself (on a cluster, one pipeline a
/// slot, sent at once).
#[tokio::test]
async fn a_page_costs_one_round_trip_on_a_warm_function() {
    let cold = Arena::new().await;
    let arena = Arena::refreshed(cold.app, cold.table, std::time::Duration::from_secs(3600));
    let now = arena.app.now();
    for i in 0..30 {
        // Even ones open now, odd ones tomorrow, a third of them puzzles.
        let start = if i % 2 == 0 { now - Duration::hours(1) } else { now + Duration::days(1) };
        let extra = if i % 3 == 0 { json!({"category": "puzzles"}) } else { json!({}) };
        assert_eq!(arena.put(&format!("cup-{i:02}"), &cup(start, 4, extra)).await.0, StatusCode::CREATED);
    }
    assert_eq!(arena.delete("cup-29", "retired").await.0, StatusCode::ACCEPTED);
    // One ended early and kept: a live ended tournament, listed beside the tombstone.
    assert_eq!(arena.end("cup-28", "early").await.0, StatusCode::ACCEPTED);
    // Its end done by the archive's run: listed under `ended` from its tombstone.
    arena.end_run(None).await;
    // Warm: the catalog and the tombstones' index read once.
    for path in ["/v1/tournaments", "/v1/tournaments?state=ended"] {
        assert_eq!(arena.read(path).await.0, StatusCode::OK);
    }
    for (path, trips, listed) in [
        ("/v1/tournaments", 1, 20),
        ("/v1/tournaments?cursor=cup-19", 1, 9),
        ("/v1/tournaments?state=open&limit=5", 1, 5),
        ("/v1/tournaments?state=upcoming&limit=100", 1, 14),
        ("/v1/tournaments?category=puzzles&cursor=cup-03", 1, 8),
        // Deleted ones alone: their tombstones' read is the page's one round trip (their
        // players are kept on them, so no count); with live ended ones, one more.
        ("/v1/tournaments?state=ended&cursor=cup-28", 1, 1),
        ("/v1/tournaments?state=ended", 2, 2),
    ] {
        let before = arena.app.store.round_trips();
        let (status, page) = arena.read(path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {page}");
        assert_eq!(page["tournaments"].as_array().map(Vec::len), Some(listed), "{path}: {page}");
        let made = arena.app.store.round_trips() - before;
        match arena.app.store.is_cluster() {
            // One pipeline a slot of the page's tournaments, all sent at once: one round.
            true => assert!(made <= trips.max(listed as u64), "{path}: {made} pipelines for {listed} tournaments"),
            false => assert_eq!(made, trips, "{path}: round trips"),
        }
    }
}

/// The board catalogue pages the same way: declared and runtime boards together in name order,
/// tournaments not among them.
#[tokio::test]
async fn the_board_catalogue_pages_the_same_way() {
    let arena = Arena::new().await;
    let board = json!({"kind": "scores", "timezone": "UTC", "periods": ["all"], "top": 10, "keep": "best"});
    for i in 0..24 {
        let (status, body) = arena.app.define(&format!("rb-{i:02}"), &board).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    assert_eq!(arena.put("a-cup", &cup(arena.app.now(), 4, json!({}))).await.0, StatusCode::CREATED);
    let mut expected: Vec<String> = arena.app.config.boards().iter().map(|b| b.name.clone()).collect();
    expected.extend((0..24).map(|i| format!("rb-{i:02}")));
    expected.sort();
    let (status, first) = arena.read("/v1/boards").await;
    assert_eq!((status, first["boards"].as_array().map(Vec::len)), (StatusCode::OK, Some(20)), "{first}");
    assert_eq!(first["next_cursor"].as_str(), Some(expected[19].as_str()));
    let (ids, _) = walk(&arena, "/v1/boards", "boards", "name", 9).await;
    assert_eq!(ids, expected);
    let rules: Vec<Value> = (0..101).map(|i| json!({"action": format!("a{i}"), "points": 1, "scope": "none"})).collect();
    let many = json!({"kind": "cumulative", "timezone": "UTC", "periods": ["day"], "top": 10, "rules": rules});
    let (status, body) = arena.app.define("many-rules", &many).await;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, Some("invalid_board")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().starts_with("rules: at most 100"), "{body}");
    let (status, body) = arena.read("/v1/boards?limit=1000").await;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, Some("out_of_range")), "{body}");
}

/// Ended tournaments are listed under `state=ended` for as long as their results are kept,
/// deleted ones included (their results stay readable): one ended on time, one whose deletion
/// is done (every key freed but its guard) and one being deleted, in name order, paged, each
/// with the players its last instance had and when it was deleted. The default list leaves
/// deleted ones out.
#[tokio::test]
async fn ended_tournaments_are_listed_under_ended_while_their_results_are_kept_deleted_ones_included() {
    let arena = Arena::new().await;
    let start = arena.app.now();
    for (id, hours, category) in [("a-done", 1, "racing"), ("b-gone", 24, "puzzles"), ("c-going", 24, "racing"), ("d-open", 24, "racing")] {
        assert_eq!(arena.put(id, &cup(start, hours, json!({"category": category}))).await.0, StatusCode::CREATED);
    }
    arena.app.set_now(start + Duration::minutes(10));
    for (id, players) in [("a-done", 2), ("b-gone", 3), ("c-going", 1), ("d-open", 1)] {
        for player in 0..players {
            let (status, body) = arena.play(id, &format!("{id}-{player}"), &format!("p{player}"), 10 + player).await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
    }
    let gone_at = start + Duration::hours(2);
    arena.app.set_now(gone_at);
    assert_eq!(arena.delete("b-gone", "cancelled").await.0, StatusCode::ACCEPTED);
    // The list of retired ones a key of another type: the end's last step fails whole (the
    // definition kept, nothing listed), then goes through once the key is mended.
    let mut conn = arena.app.redis.clone();
    let retired = arena.app.keys.catalog().retired_tournaments();
    let () = redis::cmd("SET").arg(&retired).arg("x").query_async(&mut conn).await.unwrap();
    let (_, boards) = arena.runtime_run(None).await;
    assert_eq!(boards.iter().map(|r| (r.board.as_str(), r.status)).collect::<Vec<_>>(), [("b-gone", "failed")], "{boards:?}");
    let definitions = arena.app.keys.catalog().definitions();
    let kept: bool = redis::cmd("HEXISTS").arg(&definitions).arg("b-gone").query_async(&mut conn).await.unwrap();
    assert!(kept, "its definition kept");
    let () = redis::cmd("DEL").arg(&retired).query_async(&mut conn).await.unwrap();
    let (_, boards) = arena.runtime_run(None).await;
    assert_eq!(boards.iter().map(|r| (r.board.as_str(), r.status)).collect::<Vec<_>>(), [("b-gone", "done")], "{boards:?}");
    let going_at = gone_at + Duration::minutes(5);
    arena.app.set_now(going_at);
    assert_eq!(arena.delete("c-going", "cancelled").await.0, StatusCode::ACCEPTED);

    let (status, ended) = arena.read("/v1/tournaments?state=ended").await;
    assert_eq!(status, StatusCode::OK, "{ended}");
    let rows: Vec<Value> = ended["tournaments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| json!([t["tournament_id"], t["state"], t["size"], t["deleted_at"], t["category"], t["title"]]))
        .collect();
    let at = |at: chrono::DateTime<chrono::Utc>| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    assert_eq!(
        rows,
        [
            json!(["a-done", "ended", 2, null, "racing", "Friday cup"]),
            json!(["b-gone", "ended", 3, at(gone_at), "puzzles", "Friday cup"]),
            json!(["c-going", "ended", 1, at(going_at), "racing", "Friday cup"]),
        ],
        "{ended}"
    );
    assert_eq!(ended["next_cursor"], Value::Null);
    let ids = |ids: &[&str]| ids.iter().map(|id| id.to_string()).collect::<Vec<_>>();
    assert_eq!(
        walk(&arena, "/v1/tournaments?state=ended", "tournaments", "tournament_id", 1).await,
        (ids(&["a-done", "b-gone", "c-going"]), vec![1, 1, 1])
    );
    assert_eq!(walk(&arena, "/v1/tournaments?state=ended&category=puzzles", "tournaments", "tournament_id", 1).await.0, ids(&["b-gone"]));
    assert_eq!(
        walk(&arena, "/v1/tournaments?state=ended&cursor=a-done", "tournaments", "tournament_id", 5).await.0,
        ids(&["b-gone", "c-going"])
    );
    assert_eq!(
        walk(&arena, "/v1/tournaments", "tournaments", "tournament_id", 5).await.0,
        ids(&["a-done", "d-open"]),
        "deleted ones only under ended"
    );
    assert_eq!(walk(&arena, "/v1/tournaments?state=open", "tournaments", "tournament_id", 5).await.0, ids(&["d-open"]));
    let (status, results) = arena.read("/v1/tournaments/b-gone/results?instance=all").await;
    assert_eq!((status, results["results"].as_array().map(Vec::len)), (StatusCode::OK, Some(3)), "its results are kept: {results}");

    // Deleted by a release before the list of retired ones (its tombstone alone): the archive's
    // next every-minute run lists it, once.
    let () = redis::cmd("DEL").arg(&retired).query_async(&mut conn).await.unwrap();
    assert_eq!(walk(&arena, "/v1/tournaments?state=ended", "tournaments", "tournament_id", 5).await.0, ids(&["a-done", "c-going"]));
    arena.runtime_run(None).await;
    let (_, backfilled) = arena.read("/v1/tournaments?state=ended").await;
    let rows: Vec<Value> = backfilled["tournaments"].as_array().unwrap().iter().map(|t| json!([t["tournament_id"], t["size"]])).collect();
    assert_eq!(rows, [json!(["a-done", 2]), json!(["b-gone", 3]), json!(["c-going", 1])], "{backfilled}");
    let () = redis::cmd("ZREM").arg(&retired).arg("b-gone").query_async(&mut conn).await.unwrap();
    arena.runtime_run(None).await;
    assert_eq!(walk(&arena, "/v1/tournaments?state=ended", "tournaments", "tournament_id", 5).await.0, ids(&["a-done", "c-going"]), "once");
}

/// The archive function's step that lists tournaments deleted before the list existed asks
/// Redis until it is done in the process, then never again (it was one call a minute for ever).
#[tokio::test]
async fn the_list_of_retired_tournaments_is_filled_once_a_process_then_not_asked_again() {
    let arena = Arena::new().await;
    let app = &arena.app;
    let boards = RuntimeBoards::new(app.config.clone(), app.keys.clone(), app.store.clone(), limit_from_env());
    boards.index_retired(app.now()).await.unwrap();
    let before = app.store.round_trips();
    boards.index_retired(app.now()).await.unwrap();
    assert_eq!(app.store.round_trips(), before, "done in this process: not asked again");
}

/// A filter that keeps few deleted tournaments reads at most two batches of their tombstones a
/// page: the page ends where they end, short, with the cursor to go on from. A deleted
/// tournament's view shows the players its list entry shows.
#[tokio::test]
async fn a_page_of_deleted_tournaments_reads_a_bounded_number_of_tombstones() {
    let arena = Arena::new().await;
    let start = arena.app.now();
    for i in 0..5 {
        let category = if i == 0 { "puzzles" } else { "other" };
        assert_eq!(arena.put(&format!("k-{i}"), &cup(start, 24, json!({"category": category}))).await.0, StatusCode::CREATED);
    }
    arena.app.set_now(start + Duration::minutes(10));
    for player in ["ann", "bo"] {
        assert_eq!(arena.play("k-0", &format!("k-{player}"), player, 5).await.0, StatusCode::OK);
    }
    for i in 0..5 {
        assert_eq!(arena.delete(&format!("k-{i}"), "cancelled").await.0, StatusCode::ACCEPTED);
    }
    let (_, boards) = arena.runtime_run(None).await;
    assert_eq!(boards.iter().filter(|r| r.status == "done").count(), 5, "{boards:?}");
    let (status, first) = arena.read("/v1/tournaments?state=ended&category=puzzles&limit=1").await;
    let listed: Vec<&str> = first["tournaments"].as_array().unwrap().iter().map(|t| t["tournament_id"].as_str().unwrap()).collect();
    assert_eq!((status, listed, &first["next_cursor"]), (StatusCode::OK, vec!["k-0"], &json!("k-3")), "{first}");
    assert_eq!(
        walk(&arena, "/v1/tournaments?state=ended&category=puzzles", "tournaments", "tournament_id", 1).await,
        (vec!["k-0".to_owned()], vec![1, 0])
    );
    let (status, view) = arena.read("/v1/tournaments/k-0").await;
    assert_eq!((status, &view["size"], &first["tournaments"][0]["size"]), (StatusCode::OK, &json!(2), &json!(2)), "{view}");
}
