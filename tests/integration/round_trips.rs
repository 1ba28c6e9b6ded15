//! SPEC §3: one round trip to Redis per board per event on the write path, counted by the
//! store itself (`Store::round_trips()`) once a warm-up has loaded the script.

use serde_json::json;
use standings::config::Config;
use standings_tests::spawn_ingest_with;

/// `comment` feeds one board, `share` two.
fn two_board_config() -> Config {
    Config::parse(
        r#"[[boards]]
           name = "activity"
           kind = "cumulative"
           timezone = "Asia/Shanghai"
           periods = ["day", "month"]
           top = 30
           rules = [
             { action = "comment", points = 3, scope = "user_target_day" },
             { action = "share", points = 5, scope = "user_target_day" },
           ]

           [[boards]]
           name = "reach"
           kind = "cumulative"
           timezone = "Asia/Shanghai"
           periods = ["all"]
           top = 30
           rules = [{ action = "share", points = 1, scope = "none" }]"#,
    )
    .unwrap()
}

#[tokio::test]
async fn an_event_costs_one_round_trip_per_board_it_feeds() {
    let app = spawn_ingest_with(two_board_config()).await;
    // The first call in a fresh Redis also loads the script (NOSCRIPT, SCRIPT LOAD, retry).
    let (status, _) = app.event(json!({"event_id": "warm", "user_id": "u0", "action": "share", "target": "t"})).await;
    assert_eq!(status, 200);

    let events = [("comment", 1), ("share", 2), ("comment", 1), ("share", 2)];
    for (i, (action, boards)) in events.into_iter().enumerate() {
        let event = json!({"event_id": format!("e{i}"), "user_id": "u1", "action": action, "target": format!("t{i}")});
        for delivery in ["first", "duplicate"] {
            let before = app.store.round_trips();
            let (status, body) = app.event(event.clone()).await;
            assert_eq!(status, 200, "{body}");
            assert_eq!(body["duplicate"], delivery == "duplicate");
            assert_eq!(body["results"].as_array().unwrap().len(), boards, "{body}");
            assert_eq!(app.store.round_trips() - before, boards as u64, "{delivery} {action}: one round trip per board");
        }
    }
}
