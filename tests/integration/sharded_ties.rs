//! A rank on a sharded board whatever its ties (issue 58, docs/scaling.md#reads): an all-time
//! score board ties every score reached within one 256-second step, so thousands of members can
//! share one composite. A member's rank, its neighbours and a list of ranks are searched in each
//! shard's tie (`shard_ranks.lua`), not fetched: exact against the same
//! board in one slot, and what Redis sends for them does not grow with the tie.

use axum::http::Method;
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::servers::RedisServer;
use standings_tests::{TestApp, at, spawn_ingest_at};

const TIED: usize = 2_000;

fn boards() -> Config {
    let board = |name: &str, shards: u32| {
        format!(
            "[[boards]]\nname = \"{name}\"\nkind = \"scores\"\nkeep = \"best\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nshards = {shards}\n"
        )
    };
    Config::parse(&format!("{}{}", board("solo", 1), board("wide", 4))).unwrap()
}

/// `count` members `t0000…` scoring `score` on both boards, in the same second.
async fn tie(app: &TestApp, count: usize, score: i64) {
    let users: Vec<String> = (0..count).map(|i| format!("t{i:04}")).collect();
    for board in ["solo", "wide"] {
        for chunk in users.chunks(500) {
            let scores: Vec<Value> =
                chunk.iter().map(|u| json!({"event_id": format!("{u}-{score}"), "user_id": u, "score": score})).collect();
            let (status, body) = app.post(&format!("/v1/boards/{board}/scores:batch"), &json!({ "scores": scores })).await;
            assert_eq!(status.as_u16(), 200, "{body}");
        }
    }
}

/// Bytes Redis has sent since it started (`INFO stats`).
async fn sent(server: &RedisServer) -> u64 {
    let info: String = server.query(redis::cmd("INFO").arg("stats")).await.unwrap();
    info.lines().find_map(|line| line.strip_prefix("total_net_output_bytes:")).unwrap().trim().parse().unwrap()
}

fn without_board(mut value: Value) -> Value {
    value.as_object_mut().unwrap().remove("board");
    value
}

#[tokio::test]
async fn a_rank_in_a_tie_of_thousands_is_exact_and_reads_what_a_small_tie_reads() {
    // Redis of its own: what it sends is this test's alone.
    let server = RedisServer::start(&[]).await;
    let settings = standings::redis::settings::RedisSettings::standalone(&server.url());
    let app = spawn_ingest_at(boards(), &settings).await;
    app.set_now(at("2026-11-22T08:00:00Z"));
    tie(&app, 20, 50).await;
    // Reads of a member in a tie of 20, then in a tie of TIED: the same requests.
    let reads = ["users/t0007?around=2", "users/t0007?around=2&rank_mode=competition", "users/t0013?around=0"];
    let ranks = json!({"user_ids": ["t0003", "t0007", "t0019", "nobody"]}).to_string();
    let mut costs = Vec::new();
    for tied in [20, TIED] {
        if tied == TIED {
            tie(&app, TIED, 50).await;
        }
        let before = sent(&server).await;
        for path in reads {
            let (solo_status, solo) = app.get(&format!("/v1/boards/solo/{path}")).await;
            let (_, wide) = app.get(&format!("/v1/boards/wide/{path}")).await;
            assert_eq!(solo_status.as_u16(), 200, "{solo}");
            assert_eq!(without_board(solo), without_board(wide), "{path} with {tied} tied");
        }
        let (_, solo) = app.call_query(Method::POST, "/v1/boards/solo/ranks", ranks.clone()).await;
        let (_, wide) = app.call_query(Method::POST, "/v1/boards/wide/ranks", ranks.clone()).await;
        assert_eq!(without_board(solo.clone()), without_board(wide), "ranks with {tied} tied");
        // Equal scores in one step rank by id, greatest first: t0007 has tied - 8 before it.
        let rank = solo["entries"].as_array().unwrap().iter().find(|r| r["user_id"] == "t0007").unwrap()["rank"].clone();
        assert_eq!(rank, json!(tied - 7), "{solo}");
        costs.push(sent(&server).await - before);
    }
    // The one-slot board's reads cost the same whatever the tie (ZREVRANK): the sharded ones
    // now too. Fetching the tie sent every tied id, 10 bytes or more each, per read.
    assert!(costs[1] < costs[0] + 2_000, "bytes sent for the same reads: {} with 20 tied, {} with {TIED}", costs[0], costs[1]);
}

/// A page deeper than 1,000 that lands inside a tie of thousands: exact against the one slot in
/// both rank modes, and each shard's part of the tie searched, not sent whole (the page's
/// offsets took every tied id from every shard, whatever the page).
#[tokio::test]
async fn a_deep_page_inside_a_tie_of_thousands_is_exact_and_does_not_fetch_the_tie() {
    let server = RedisServer::start(&[]).await;
    let settings = standings::redis::settings::RedisSettings::standalone(&server.url());
    let app = spawn_ingest_at(boards(), &settings).await;
    app.set_now(at("2026-11-22T08:00:00Z"));
    tie(&app, TIED, 50).await;
    // Some above the tie and some below it.
    for board in ["solo", "wide"] {
        let scores: Vec<Value> = (0..60)
            .map(|i| json!({"event_id": format!("o{i}"), "user_id": format!("o{i:02}"), "score": if i < 30 { 60 } else { 40 }}))
            .collect();
        let (status, body) = app.post(&format!("/v1/boards/{board}/scores:batch"), &json!({ "scores": scores })).await;
        assert_eq!(status.as_u16(), 200, "{body}");
    }
    for query in ["offset=1010&limit=10", "offset=1500&limit=7", "offset=2025&limit=10", "offset=1200&limit=5&rank_mode=competition"] {
        let (status, solo) = app.get(&format!("/v1/boards/solo/top?period=all&{query}")).await;
        assert_eq!(status.as_u16(), 200, "{solo}");
        let before = sent(&server).await;
        let (_, wide) = app.get(&format!("/v1/boards/wide/top?period=all&{query}")).await;
        let cost = sent(&server).await - before;
        let users =
            |top: &Value| top["entries"].as_array().unwrap().iter().map(|e| (e["user_id"].clone(), e["rank"].clone())).collect::<Vec<_>>();
        assert!(!users(&solo).is_empty(), "{query}: {solo}");
        assert_eq!(users(&solo), users(&wide), "{query}");
        // About 14 KB go to finding the composite at the offset (rounds of 64 counts); fetching the
        // tie sent some 17 KB more (31 KB a page before), and grew with it.
        assert!(cost < 20_000, "{query}: {cost} bytes sent for a page of the sharded board");
    }
}
