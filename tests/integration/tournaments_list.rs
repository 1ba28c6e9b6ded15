//! Lists that page (issue 59 item 1, docs/tournaments.md#the-list): `GET /v1/tournaments` and
//! the board catalogue `GET /v1/boards`, `limit` at a time in name order with `next_cursor`,
//! entries without prizes and metadata, however many are defined.

use axum::http::StatusCode;
use chrono::Duration;
use serde_json::{Value, json};
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
