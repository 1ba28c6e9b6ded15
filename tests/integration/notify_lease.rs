//! A notification drain's lease is fenced (docs/notifications.md#one-drain-per-board): a drain
//! slower than its lease commits nothing once the lease is another's, and its unlock never
//! deletes the lock of the drain that took over.

use std::sync::Arc;

use journal::Notifier;
use serde_json::json;
use standings::domain::config::Config;
use standings::redis::notices;
use standings_tests::notify::{Gated, spawn_notified, subscribed};

fn config() -> Config {
    Config::parse(
        r#"
        [[boards]]
        name = "race"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all"]
        top = 10
        rules = [{ action = "lap", points = 1, max_points = 100, scope = "none" }]
        notify = { top = 3 }
        "#,
    )
    .expect("a valid configuration")
}

#[tokio::test]
async fn a_drain_slower_than_its_lease_commits_nothing_and_leaves_the_next_drains_lock() {
    let app = spawn_notified(config()).await;
    let bus = subscribed().await;
    for (i, (user, points)) in [("a", 3), ("b", 5), ("c", 7)].into_iter().enumerate() {
        let (status, body) = app.event(json!({"event_id": format!("e{i}"), "user_id": user, "action": "lap", "points": points})).await;
        assert_eq!(status, 200, "{body}");
    }
    let waiting = app.notices_len("race").await;
    assert!(waiting > 0);

    let (reached, go) = (Arc::new(tokio::sync::Notify::new()), Arc::new(tokio::sync::Notify::new()));
    let gated = Gated { inner: bus.bus.clone(), reached: reached.clone(), go: go.clone() };
    let slow = {
        let app = &app;
        async move { app.notify(Notifier::new(gated).with_lease_ms(60_000)).await }
    };
    let lock = app.keys.board("race").notices_lock();
    let mut conn = app.redis.clone();
    let takeover = async {
        reached.notified().await;
        // The slow drain's lease runs out while the bus holds its events (as 120 s would), and
        // the next drain takes the board.
        let _: () = redis::cmd("PEXPIRE").arg(&lock).arg(1).query_async(&mut conn).await.unwrap();
        while redis::cmd("EXISTS").arg(&lock).query_async::<bool>(&mut conn).await.unwrap() {
            tokio::task::yield_now().await;
        }
        assert!(notices::lock(&mut conn, &app.keys.board("race"), "next-drain", 60_000).await.unwrap());
        go.notify_one();
    };
    let (report, ()) = tokio::join!(slow, takeover);
    assert!(report.notifications > 0, "the slow drain did send: {report:?}");

    let mut conn = app.redis.clone();
    let holder: Option<String> = redis::cmd("GET").arg(&lock).query_async(&mut conn).await.unwrap();
    assert_eq!(holder.as_deref(), Some("next-drain"), "the slow drain's unlock left the next drain's lock");
    assert_eq!(app.notices_len("race").await, waiting, "a drain whose lease ran out commits nothing: the next drain reads it all");
}
