//! A sharded top reads each shard's share of the page first, and a shard again only when it
//! may hold more of it (docs/scaling.md#reads): exact against the same board in one slot when
//! one shard holds the whole top, and one round more then, one round when the top is spread.

use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings::services::reads::sharded::{page, sets};
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

#[tokio::test]
async fn a_top_held_by_one_shard_is_read_again_from_that_shard_alone_and_equals_the_one_slot_board() {
    let app = spawn_ingest_with(config()).await;
    let now = at("2026-11-22T08:00:00Z");
    app.set_now(now);
    let layout = app.keys.layout("tops", SHARDS);
    // The top 30 all in shard 3, ties of points among them; 60 others below, anywhere.
    let crowded: Vec<String> = (0..).map(|i| format!("c{i}")).filter(|id| layout.shard_of(id) == 3).take(30).collect();
    for (i, user) in crowded.iter().enumerate() {
        for board in ["tops", "solo"] {
            score(&app, board, user, 1000 + (i as i64 / 3)).await;
        }
    }
    for i in 0..60 {
        for board in ["tops", "solo", "spread"] {
            score(&app, board, &format!("o{i}"), i % 17).await;
        }
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
    let (crowded_sets, spread_sets) = (sets(&app.keys, &layout, &period), sets(&app.keys, &app.keys.layout("spread", SHARDS), &period));
    page(&conn, &spread_sets, &scale, 0, 25).await.unwrap();
    let before = app.store.round_trips();
    let spread = page(&conn, &spread_sets, &scale, 0, 25).await.unwrap();
    let one_round = app.store.round_trips() - before;
    assert_eq!(spread.entries.len(), 25);
    let before = app.store.round_trips();
    let top = page(&conn, &crowded_sets, &scale, 0, 25).await.unwrap();
    assert_eq!(app.store.round_trips() - before, one_round + 1, "the crowded shard read again, alone");
    let members: Vec<String> = top.entries.iter().map(|e| e.member.clone()).collect();
    let (_, solo) = app.get("/v1/boards/solo/top?period=all&limit=25").await;
    assert_eq!(members, entries(&solo).into_iter().map(|(user, ..)| user).collect::<Vec<_>>());
    assert!(members.iter().all(|m| crowded.contains(m)), "the top is the crowded shard's: {members:?}");
}
