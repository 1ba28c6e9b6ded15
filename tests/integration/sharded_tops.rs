//! A sharded top, or a member's neighbours, read each shard's share of the window first, and
//! again whole only when a shard may hold more of it (docs/scaling.md#reads): exact against the
//! same board in one slot when one shard holds the whole window, one round more then, and no
//! round more when the window is spread.

use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings::services::reads::sharded::{around, page, sets};
use standings_tests::{TestApp, at, spawn_ingest_with};

const SHARDS: u32 = 12;

fn config() -> Config {
    let board = |name: &str, shards: u32| {
        format!(
            "[[boards]]\nname = \"{name}\"\nkind = \"scores\"\nkeep = \"best\"\norder = \"desc\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nshards = {shards}\n"
        )
    };
    Config::parse(&format!("{}{}{}", board("tops", SHARDS), board("solo", 1), board("spread", SHARDS))).unwrap()
}

async fn score(app: &TestApp, board: &str, user: &str, score: i64) {
    let body = serde_json::json!({"event_id": format!("{board}-{user}"), "user_id": user, "score": score});
    let (status, answer) = app.post(&format!("/v1/boards/{board}/scores"), &body).await;
    assert_eq!(status, 200, "{answer}");
}

fn entries(top: &serde_json::Value) -> Vec<(String, i64, u64)> {
    top["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["user_id"].as_str().unwrap().to_owned(), e["score"].as_i64().unwrap(), e["rank"].as_u64().unwrap()))
        .collect()
}

/// `count` members of shard `shard` of the sharded board (ids `<prefix><n>`), each scored
/// `points(i)` on it and on the one-slot board alike.
async fn crowd(app: &TestApp, prefix: &str, shard: usize, count: usize, points: impl Fn(usize) -> i64) -> Vec<String> {
    let layout = app.keys.layout("tops", SHARDS);
    let crowded: Vec<String> = (0..).map(|i| format!("{prefix}{i}")).filter(|id| layout.shard_of(id) == shard).take(count).collect();
    for (i, user) in crowded.iter().enumerate() {
        for board in ["tops", "solo"] {
            score(app, board, user, points(i)).await;
        }
    }
    crowded
}

#[tokio::test]
async fn a_top_held_by_one_shard_is_read_again_from_that_shard_alone_and_equals_the_one_slot_board() {
    let app = spawn_ingest_with(config()).await;
    let now = at("2026-11-22T08:00:00Z");
    app.set_now(now);
    let layout = app.keys.layout("tops", SHARDS);
    // The top 30 all in shard 3, ties of points among them; 60 others below, anywhere.
    let crowded = crowd(&app, "c", 3, 30, |i| 1000 + i as i64 / 3).await;
    for i in 0..60 {
        for board in ["tops", "solo", "spread"] {
            score(&app, board, &format!("o{i}"), i % 17).await;
        }
    }
    // The spread board: 300 members, about 25 a shard, more than a shard's first share of a
    // top-25 (10), none holding that many of the top.
    for i in 60..300 {
        score(&app, "spread", &format!("o{i}"), i % 97).await;
    }
    for (offset, limit) in [(0, 25), (0, 5), (10, 15), (0, 100), (28, 4)] {
        for mode in ["unique", "competition"] {
            let query = format!("period=all&limit={limit}&offset={offset}&rank_mode={mode}");
            let (status, sharded) = app.get(&format!("/v1/boards/tops/top?{query}")).await;
            let (_, solo) = app.get(&format!("/v1/boards/solo/top?{query}")).await;
            assert_eq!(status, 200, "{sharded}");
            assert_eq!(entries(&sharded), entries(&solo), "{query}");
            assert_eq!(sharded["total"], solo["total"], "{query}");
        }
    }

    // Rounds, counted by the store: the crowded shard read again (its node alone), the spread
    // board's top in one round. A round is one request a node holding shards (`sharded_nodes.rs`).
    let period = Period::containing(PeriodKind::All, now, chrono_tz::UTC);
    let scale = standings::domain::scores::scale(app.config.board("tops").unwrap(), &period);
    let conn = app.store.connection().await.unwrap();
    let (crowded_sets, spread_sets) =
        (sets(&app.keys, &layout, &period, None), sets(&app.keys, &app.keys.layout("spread", SHARDS), &period, None));
    page(&conn, &spread_sets, &scale, 0, 25).await.unwrap();
    let before = app.store.round_trips();
    let spread = page(&conn, &spread_sets, &scale, 0, 25).await.unwrap();
    let one_round = app.store.round_trips() - before;
    assert_eq!(spread.entries.len(), 25);
    let nodes = app.nodes_holding(&spread_sets.iter().map(|s| s.set.clone()).collect::<Vec<_>>()).await;
    assert_eq!(one_round, nodes, "a spread top in one round, each shard holding more than it was asked for");
    let before = app.store.round_trips();
    let top = page(&conn, &crowded_sets, &scale, 0, 25).await.unwrap();
    assert_eq!(app.store.round_trips() - before, one_round + 1, "the crowded shard read again, alone");
    let members: Vec<String> = top.entries.iter().map(|e| e.member.clone()).collect();
    let (_, solo) = app.get("/v1/boards/solo/top?period=all&limit=25").await;
    assert_eq!(members, entries(&solo).into_iter().map(|(user, ..)| user).collect::<Vec<_>>());
    assert!(members.iter().all(|m| crowded.contains(m)), "the top is the crowded shard's: {members:?}");
}

#[tokio::test]
async fn neighbours_held_by_one_shard_are_read_again_whole_and_equal_the_one_slot_boards() {
    let app = spawn_ingest_with(config()).await;
    let now = at("2026-11-22T08:00:00Z");
    app.set_now(now);
    let layout = app.keys.layout("tops", SHARDS);
    // The top 20 all in shard 3, the bottom 12 all in shard 5 (ties of points among them), 60
    // others between, anywhere.
    let crowded = crowd(&app, "c", 3, 20, |i| 1000 + i as i64 / 3).await;
    for i in 0..60 {
        for board in ["tops", "solo"] {
            score(&app, board, &format!("o{i}"), 100 + i % 17).await;
        }
    }
    let bottom = crowd(&app, "z", 5, 12, |i| i as i64 / 2).await;
    let top = crowded.last().unwrap().clone();
    let mut members: Vec<String> = vec![
        top.clone(),
        crowded[0].clone(),
        crowded[9].clone(),
        "o16".into(),
        "o0".into(),
        "o33".into(),
        bottom[0].clone(),
        bottom[4].clone(),
    ];
    members.extend((0..60).step_by(7).map(|i| format!("o{i}")));
    for member in &members {
        for n in [0, 1, 5, 7] {
            for mode in ["unique", "competition"] {
                let query = format!("period=all&around={n}&rank_mode={mode}");
                let (status, sharded) = app.get(&format!("/v1/boards/tops/users/{member}?{query}")).await;
                let (_, solo) = app.get(&format!("/v1/boards/solo/users/{member}?{query}")).await;
                assert_eq!(status, 200, "{sharded}");
                let window = |body: &serde_json::Value| {
                    let around = serde_json::json!({"entries": body["around"].clone()});
                    (entries(&around), body["rank"].clone(), body["total"].clone(), body["percentile"].clone())
                };
                assert_eq!(window(&sharded), window(&solo), "{member} {query}");
            }
        }
    }

    // Rounds, counted by the store: the member's composite, a round of shares; the crowded top's
    // window (ranks 1 to 11, all in shard 3: short below) and the bottom's (the last 11, all in
    // shard 5: short above) one round more.
    let period = Period::containing(PeriodKind::All, now, chrono_tz::UTC);
    let scale = standings::domain::scores::scale(app.config.board("tops").unwrap(), &period);
    let conn = app.store.connection().await.unwrap();
    let shards = sets(&app.keys, &layout, &period, None);
    let rounds = |member: String| {
        let (conn, layout, shards) = (conn.clone(), layout.clone(), shards.clone());
        let app = &app;
        async move {
            let before = app.store.round_trips();
            let window = around(&conn, &layout, &shards, &scale, &member, 5, true).await.unwrap();
            (app.store.round_trips() - before, window.entries.len())
        }
    };
    rounds("o16".into()).await;
    let (spread, size) = rounds("o16".into()).await;
    assert_eq!(size, 11);
    let (crowded_rounds, size) = rounds(top).await;
    assert_eq!(size, 11);
    let (bottom_rounds, size) = rounds(bottom[0].clone()).await;
    assert_eq!(size, 11);
    let nodes = app.nodes_holding(&shards.iter().map(|s| s.set.clone()).collect::<Vec<_>>()).await;
    assert_eq!((spread, crowded_rounds, bottom_rounds), (1 + nodes, 1 + 2 * nodes, 1 + 2 * nodes), "a crowded window read again, whole");
}
