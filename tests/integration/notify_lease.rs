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

/// A bus that failed for hours left the board's notices full: a write still applies, the
/// stream stays at its cap (the oldest move dropped, not the write refused), and the next drain
/// counts the drop once in `NotificationsDropped`.
#[tokio::test]
async fn full_notices_drop_their_oldest_moves_and_the_drain_counts_them_once() {
    use standings::domain::notify::NOTICES_MAX_LEN;
    let app = spawn_notified(config()).await;
    let stream = app.keys.board("race").notices();
    let mut conn = app.redis.clone();
    // Moves nobody could send: as many as the stream keeps.
    for start in (0..NOTICES_MAX_LEN).step_by(10_000) {
        let mut pipe = redis::pipe();
        for _ in start..(start + 10_000).min(NOTICES_MAX_LEN) {
            pipe.cmd("XADD").arg(&stream).arg("*").arg("e").arg("old").arg("m").arg("").ignore();
        }
        let () = pipe.query_async(&mut conn).await.unwrap();
    }
    let oldest: Vec<(String, Vec<(String, String)>)> =
        redis::cmd("XRANGE").arg(&stream).arg("-").arg("+").arg("COUNT").arg(1).query_async(&mut conn).await.unwrap();

    let (status, body) = app.event(json!({"event_id": "n1", "user_id": "a", "action": "lap", "points": 2})).await;
    assert_eq!(status, 200, "a full stream refuses no write: {body}");
    assert_eq!(app.notices_len("race").await as u64, NOTICES_MAX_LEN, "the stream stays at its cap");
    let first: Vec<(String, Vec<(String, String)>)> =
        redis::cmd("XRANGE").arg(&stream).arg("-").arg("+").arg("COUNT").arg(1).query_async(&mut conn).await.unwrap();
    assert_ne!(first[0].0, oldest[0].0, "the oldest move was dropped");

    let bus = subscribed().await;
    let report = app.notify(Notifier::new(bus.bus.clone())).await;
    assert_eq!(report.boards.iter().map(|b| b.notifications_dropped).sum::<u64>(), 1, "{report:?}");
    assert_eq!(app.notices_len("race").await, 0, "everything else was sent");
    let again = app.notify(Notifier::new(bus.bus.clone())).await;
    assert_eq!(again.boards.iter().map(|b| b.notifications_dropped).sum::<u64>(), 0, "counted once");
}

/// A drain whose lock's reply is lost with its connection (a proxy in front of Redis) is sent
/// again by the store: it finds its own token and holds the board, instead of skipping it for
/// the lease's two minutes as if another drain held it; another drain is still refused.
#[tokio::test]
async fn a_lock_whose_reply_was_lost_is_held_by_the_drain_that_sent_it() {
    if std::env::var("REDIS_CLUSTER").is_ok_and(|v| v == "true") {
        return; // The proxy stands in front of one server: the standalone pass covers it.
    }
    let port: u16 = standings_tests::redis_url().rsplit(':').next().unwrap().trim_end_matches('/').parse().unwrap();
    let proxy = standings_tests::proxy::DroppingProxy::start(port).await;
    let store = standings::redis::store::Store::connect(&standings::redis::settings::RedisSettings::standalone(&proxy.url())).unwrap();
    let keys = standings::redis::keys::Keys::new(&standings_tests::unique_prefix()).unwrap().board("race");
    let mut conn = store.write_connection().await.unwrap();
    proxy.drop_next_reply_to(keys.notices_lock().as_bytes());
    assert!(notices::lock(&mut conn, &keys, "first-drain", 60_000).await.unwrap(), "held by the drain that sent it");
    assert_eq!(proxy.dropped(), 1, "the first reply was lost");
    assert!(!notices::lock(&mut conn, &keys, "second-drain", 60_000).await.unwrap(), "another drain is refused");
    notices::unlock(&mut conn, &keys, "first-drain").await.unwrap();
    assert!(notices::lock(&mut conn, &keys, "second-drain", 60_000).await.unwrap());
}
