//! Issue 59's bounded catalog at the definition size limit (docs/runtime-boards.md): a
//! function's catalog holds a tournament without prizes and metadata larger than
//! `DETAILS_HELD_BYTES` (up to ~14 KB a definition that no rule reads), and every route and the
//! end that show them read them with the definition: the view, the top, a player's standing,
//! the results and the `Tournament Ended` event show exactly what was defined, edited or not.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use chrono::Duration as Span;
use serde_json::{Value, json};
use standings::archive::bus::TOURNAMENT_ENDED;
use standings::redis::catalog::whole_tournament;
use standings::services::catalog::Catalog;
use standings_tests::ADMIN;
use standings_tests::notify::subscribed_to;
use standings_tests::tournament::{Arena, cup};

/// Rewards and metadata near the limit: three prizes of 3,600 characters, 3,000 of metadata.
fn large(tag: &str) -> (Value, Value) {
    let prizes = (0..3).map(|i| json!({"ranks": [i + 1, i + 1], "reward": {"note": format!("{tag}{i}").repeat(600)}})).collect();
    (Value::Array(prizes), json!({"notes": tag.repeat(600)}))
}

#[tokio::test]
async fn large_prizes_and_metadata_stay_out_of_the_catalog_held_and_every_route_and_the_end_show_them() {
    let arena = Arena::new().await;
    let bus = subscribed_to(TOURNAMENT_ENDED).await;
    let start = arena.app.now() - Span::minutes(30);
    let (prizes, metadata) = large("abcde");
    let grand = cup(start, 24, json!({"prizes": prizes, "metadata": metadata}));
    let small = cup(start, 24, json!({"prizes": [{"ranks": [1, 1], "reward": "gold"}], "metadata": {"season": 7}}));
    assert_eq!(arena.put("grand", &grand).await.0, StatusCode::CREATED);
    assert_eq!(arena.put("petit", &small).await.0, StatusCode::CREATED);

    // What a function holds: the small details, not the large ones.
    let app = &arena.app;
    let held = Catalog::new(app.config.clone(), app.keys.clone(), app.store.clone(), |_| ()).with_refresh(Duration::ZERO);
    let config = held.config().await.unwrap();
    let tournament = |id: &str| config.board(id).and_then(|board| board.tournament.clone()).unwrap();
    let (g, p) = (tournament("grand"), tournament("petit"));
    assert_eq!((g.prizes.len(), g.metadata.is_some(), g.details_held), (0, false, false), "large details left out");
    assert_eq!((p.prizes.len(), p.metadata.clone(), p.details_held), (1, Some(json!({"season": 7})), true), "small ones held");

    // A live edit replaces the prizes: the view shows the new ones, the held catalog still none.
    let (edited_prizes, _) = large("fghij");
    let patch = json!({"prizes": edited_prizes}).to_string();
    let (status, edited) = app.call(Method::PATCH, "/v1/admin/tournaments/grand", patch, ADMIN).await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    let (status, view) = arena.read("/v1/tournaments/grand").await;
    assert_eq!((status, &view["prizes"], &view["metadata"]), (StatusCode::OK, &edited_prizes, &metadata), "{view}");

    for (i, (user, score)) in [("ann", 30), ("bo", 50), ("cy", 20), ("dee", 5)].into_iter().enumerate() {
        app.set_now(app.now() + Span::seconds(1));
        assert_eq!(arena.play("grand", &format!("g{i}"), user, score).await.0, StatusCode::OK);
    }
    let prize = |rank: usize| edited_prizes.get(rank - 1).map_or(Value::Null, |prize| prize["reward"].clone());
    let expected: Vec<(String, Value)> =
        ["bo", "ann", "cy", "dee"].iter().enumerate().map(|(i, user)| (user.to_string(), prize(i + 1))).collect();
    let shown = |rows: &Value| -> Vec<(String, Value)> {
        rows.as_array().unwrap().iter().map(|row| (row["user_id"].as_str().unwrap().to_owned(), row["prize"].clone())).collect()
    };
    let (status, top) = arena.read("/v1/tournaments/grand/top").await;
    assert_eq!((status, shown(&top["entries"])), (StatusCode::OK, expected.clone()), "{top}");
    let (status, standing) = arena.read("/v1/tournaments/grand/users/ann?around=5").await;
    assert_eq!((status, shown(&standing["around"])), (StatusCode::OK, expected.clone()), "{standing}");

    // Its end: the results and the event carry them.
    assert_eq!(arena.end("grand", "done").await.0, StatusCode::ACCEPTED);
    let reports = arena.end_run(Some(&bus.bus)).await;
    assert_eq!(reports.iter().map(|r| (r.tournament_id.as_str(), r.status)).collect::<Vec<_>>(), [("grand", "done")], "{reports:?}");
    let (status, results) = arena.read("/v1/tournaments/grand/results").await;
    assert_eq!((status, shown(&results["results"])), (StatusCode::OK, expected.clone()), "{results}");
    let events = bus.events(TOURNAMENT_ENDED).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!((shown(&events[0]["results"]), &events[0]["metadata"]), (expected, &metadata));

    // A function that read the catalog before the tournament's end was done finds its prizes in
    // its tombstone (which keeps no metadata); gone from both, none (no journal: nothing lost).
    assert_eq!(arena.delete("grand", "over").await.0, StatusCode::ACCEPTED);
    arena.runtime_run(None).await;
    let retired = whole_tournament(&app.store, &app.keys, &g).await.unwrap().expect("its tombstone");
    assert_eq!((serde_json::to_value(&retired.prizes).unwrap(), &retired.metadata), (edited_prizes, &None));
    let mut conn = app.store.connection().await.unwrap();
    let _: i64 = redis::cmd("HDEL").arg(app.keys.catalog().ending()).arg("grand").query_async(&mut conn).await.unwrap();
    assert!(whole_tournament(&app.store, &app.keys, &g).await.unwrap().is_none());
}
