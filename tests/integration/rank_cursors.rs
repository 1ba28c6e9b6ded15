//! Keyset pages of a live board (issue 58, docs/api.md): every page answers `next_cursor`, and
//! `cursor=` reads the entries ranked after that page's last one, on one slot and over shards
//! alike, whatever moved above it meanwhile (an offset would skip or repeat entries then).

use axum::http::StatusCode;
use chrono::Duration;
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::{TestApp, at, spawn_ingest_with};

fn boards() -> Config {
    let board = |name: &str, shards: u32| {
        format!(
            "[[boards]]\nname = \"{name}\"\nkind = \"scores\"\nkeep = \"latest\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nshards = {shards}\n"
        )
    };
    Config::parse(&format!("{}{}", board("solo", 1), board("wide", 4))).unwrap()
}

async fn score(app: &TestApp, board: &str, user: &str, score: i64, id: &str) {
    let body = json!({"event_id": id, "user_id": user, "score": score});
    let (status, answer) = app.post(&format!("/v1/boards/{board}/scores"), &body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

fn users(page: &Value) -> Vec<(String, u64)> {
    page["entries"].as_array().unwrap().iter().map(|e| (e["user_id"].as_str().unwrap().to_owned(), e["rank"].as_u64().unwrap())).collect()
}

#[tokio::test]
async fn a_cursor_page_starts_after_the_last_entry_seen_whatever_moved_above_it() {
    let app = spawn_ingest_with(boards()).await;
    app.set_now(at("2026-11-22T08:00:00Z"));
    for board in ["solo", "wide"] {
        // Ten members, three of them tied on 50 in the same second (ordered by id, greatest first).
        for (i, points) in [90, 80, 70, 50, 50, 50, 40, 30, 20, 10].iter().enumerate() {
            score(&app, board, &format!("u{i}"), *points, &format!("first-{i}")).await;
        }
    }
    app.set_now(app.now() + Duration::seconds(5));
    for board in ["solo", "wide"] {
        let (status, first) = app.get(&format!("/v1/boards/{board}/top?limit=4")).await;
        assert_eq!(status, StatusCode::OK, "{first}");
        assert_eq!(users(&first), [("u0".into(), 1), ("u1".into(), 2), ("u2".into(), 3), ("u5".into(), 4)], "{board}");
        let cursor = first["next_cursor"].as_str().unwrap().to_owned();
        // Above the cursor a newcomer arrives at the top: the page after still starts right after
        // u5, with ranks as they are now, where an offset repeats u5.
        score(&app, board, "u10", 99, "new-u10").await;
        let (status, second) = app.get(&format!("/v1/boards/{board}/top?limit=4&cursor={cursor}")).await;
        assert_eq!(status, StatusCode::OK, "{second}");
        assert_eq!(users(&second), [("u4".into(), 6), ("u3".into(), 7), ("u6".into(), 8), ("u7".into(), 9)], "{board}: {second}");
        let (_, by_offset) = app.get(&format!("/v1/boards/{board}/top?limit=4&offset=4")).await;
        assert_eq!(users(&by_offset)[0], ("u5".into(), 5), "{board}: an offset repeats u5");
        let cursor = second["next_cursor"].as_str().unwrap();
        let (_, third) = app.get(&format!("/v1/boards/{board}/top?limit=4&cursor={cursor}")).await;
        assert_eq!(users(&third), [("u8".into(), 10), ("u9".into(), 11)], "{board}: {third}");
        assert_eq!(third["next_cursor"], Value::Null, "{board}: the last page");
        assert_eq!(third["total"], 11);
        // Competition ranks from a cursor: the tied members after u5 share rank 5 (four above).
        let after_u5 = first["next_cursor"].as_str().unwrap();
        let (_, tied) = app.get(&format!("/v1/boards/{board}/top?limit=2&rank_mode=competition&cursor={after_u5}")).await;
        assert_eq!(users(&tied), [("u4".into(), 5), ("u3".into(), 5)], "{board}: {tied}");
        let (_, on) = app.get(&format!("/v1/boards/{board}/top?limit=2&cursor={}", tied["next_cursor"].as_str().unwrap())).await;
        assert_eq!(users(&on), [("u6".into(), 8), ("u7".into(), 9)], "{board}: a cursor inside a tie: {on}");
    }
}

#[tokio::test]
async fn a_cursor_that_no_page_answered_is_refused() {
    let app = spawn_ingest_with(boards()).await;
    for query in ["cursor=12", "cursor=x.u1", "cursor=12.u%201", "cursor=99999999999999999.u1", "cursor=12.u1&offset=3"] {
        let (status, body) = app.get(&format!("/v1/boards/wide/top?{query}")).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::BAD_REQUEST, Some("malformed")), "{query}: {body}");
    }
}
