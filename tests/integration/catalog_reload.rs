//! A warm function's catalog after a change (issue 59, docs/runtime-boards.md, "Every route, on
//! every function"): it reads only the boards changed since the version it holds and parses only
//! those, and serves exactly what a cold function reading the whole catalog serves, through
//! every kind of change (a board or tournament defined, ended early, edited, deleted, its end
//! done) and a change log lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::{Method, StatusCode};
use chrono::Duration as Span;
use serde_json::json;
use standings::domain::config::{Config, Definition};
use standings::services::catalog::{COMPOSED_HELD, Catalog, RETIRED_HELD};
use standings_tests::ADMIN;
use standings_tests::tournament::{Arena, cup};

/// Every runtime board `config` serves, as text, in name order.
fn runtime(config: &Config) -> Vec<String> {
    config.boards_after(None).filter(|board| board.runtime).map(|board| format!("{board:?}")).collect()
}

/// The catalog a cold function reads now (whole).
async fn cold(arena: &Arena) -> Arc<Config> {
    let app = &arena.app;
    Catalog::new(app.config.clone(), app.keys.clone(), app.store.clone(), |_| ()).with_refresh(Duration::ZERO).config().await.unwrap()
}

/// `warm`'s boards after a change, checked against a cold read's.
async fn reload(arena: &Arena, warm: &Catalog<()>, what: &str) -> Arc<Config> {
    let served = warm.config().await.unwrap();
    assert_eq!(runtime(&served), runtime(&*cold(arena).await), "after {what}: a warm function serves what a cold one reads");
    served
}

/// The parsed definition of tournament `id`, shared by every config that did not parse it again.
fn parsed(config: &Config, id: &str) -> Arc<standings::domain::config::tournament::Tournament> {
    config.board(id).and_then(|board| board.tournament.clone()).unwrap_or_else(|| panic!("{id} is served"))
}

#[tokio::test]
async fn a_warm_catalog_parses_only_what_changed_and_serves_what_a_whole_read_does() {
    let arena = Arena::new().await;
    let now = arena.app.now();
    let app = &arena.app;
    for id in ["cup-a", "cup-b", "cup-c"] {
        assert_eq!(arena.put(id, &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    }
    let quiz = json!({"kind": "cumulative", "timezone": "UTC", "periods": ["day", "all"], "top": 10,
        "rules": [{"action": "quiz_passed", "points": 7, "scope": "none"}]});
    assert_eq!(app.define("quiz", &quiz).await.0, StatusCode::CREATED);
    let warm = Catalog::new(app.config.clone(), app.keys.clone(), app.store.clone(), |_| ()).with_refresh(Duration::ZERO);
    let first = reload(&arena, &warm, "the first read").await;

    assert_eq!(arena.put("cup-d", &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    let defined = reload(&arena, &warm, "a tournament defined").await;
    assert!(Arc::ptr_eq(&parsed(&first, "cup-a"), &parsed(&defined, "cup-a")), "cup-a unchanged: not parsed again");
    assert!(!Arc::ptr_eq(&parsed(&first, "cup-a"), &parsed(&*cold(&arena).await, "cup-a")), "a whole read parses it again");

    assert_eq!(arena.end("cup-b", "rained off").await.0, StatusCode::ACCEPTED);
    let ended = reload(&arena, &warm, "an instance ended early").await;
    assert!(!Arc::ptr_eq(&parsed(&defined, "cup-b"), &parsed(&ended, "cup-b")), "cup-b's new definition parsed");
    assert!(Arc::ptr_eq(&parsed(&defined, "cup-a"), &parsed(&ended, "cup-a")));

    let edit = json!({"title": "Saturday cup"});
    let (status, body) = app.call(Method::PATCH, "/v1/admin/tournaments/cup-a", edit.to_string(), ADMIN).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let edited = reload(&arena, &warm, "a live edit").await;
    assert_eq!(parsed(&edited, "cup-a").title, "Saturday cup");

    assert_eq!(arena.delete("cup-c", "cancelled").await.0, StatusCode::ACCEPTED);
    let deleting = reload(&arena, &warm, "a tournament deleted").await;
    assert!(deleting.board("cup-c").unwrap().ending && parsed(&deleting, "cup-c").deleted.is_some());
    assert_eq!(app.call(Method::DELETE, "/v1/admin/boards/quiz", String::new(), ADMIN).await.0, StatusCode::ACCEPTED);
    reload(&arena, &warm, "a board deleted").await;
    arena.runtime_run(None).await;
    // Tombstones are not held: a request naming one reads it by name (bounded, `naming`).
    let retired = reload(&arena, &warm, "the deletions' ends done").await;
    assert!(retired.board("cup-c").is_none() && retired.board("quiz").is_none(), "no tombstone held");
    let named = warm.config_naming("cup-c").await.unwrap();
    assert!(parsed(&named, "cup-c").retired, "cup-c read from its tombstone by name");
    assert!(named.board("cup-d").is_some(), "beside every board served");
    let named = warm.config_naming("quiz").await.unwrap();
    assert!(named.board("quiz").is_some_and(|quiz| quiz.ending), "quiz read from its tombstone by name");
    assert!(warm.config_naming("never-defined").await.unwrap().board("never-defined").is_none());
    assert!(warm.config_naming("cup-a").await.unwrap().board("cup-a").is_some_and(|cup| !cup.ending));
    // A board defined after a config with a deleted one was composed: served beside it.
    assert_eq!(arena.put("cup-l", &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    let named = warm.config_naming("cup-c").await.unwrap();
    assert!(named.board("cup-l").is_some() && named.board("cup-c").is_some_and(|cup| cup.ending));

    // The log lost after a change this function has not read: what it names is gone, so the
    // next reload reads the whole catalog (the log restarts with that change).
    assert_eq!(arena.put("cup-e", &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    let mut conn = app.redis.clone();
    let _: () = redis::cmd("DEL").arg(app.keys.catalog().catalog_log()).query_async(&mut conn).await.unwrap();
    assert_eq!(arena.put("cup-f", &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    let whole = reload(&arena, &warm, "a change after the log was lost").await;
    assert!(whole.board("cup-e").is_some() && whole.board("cup-f").is_some());
    assert!(Arc::ptr_eq(&parsed(&edited, "cup-a"), &parsed(&whole, "cup-a")), "read whole: what did not change is not parsed again");
    assert_eq!(arena.put("cup-g", &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    let after = reload(&arena, &warm, "a change once the log started again").await;
    assert!(Arc::ptr_eq(&parsed(&whole, "cup-a"), &parsed(&after, "cup-a")), "the log serves again");

    // A change made without the log (by a release from before it, while a deployment rolls):
    // the log's last change is not the catalog's latest, so the reload reads it all.
    let text = Definition::tournament("cup-h", &cup(now - Span::hours(1), 4, json!({})), now).unwrap().text;
    let catalog = app.keys.catalog();
    let _: () = redis::cmd("HSET").arg(catalog.definitions()).arg("cup-h").arg(text).query_async(&mut conn).await.unwrap();
    let _: () = redis::cmd("INCR").arg(catalog.catalog_version()).query_async(&mut conn).await.unwrap();
    let unlogged = reload(&arena, &warm, "a change made without the log").await;
    assert!(unlogged.board("cup-h").is_some(), "served");

    // The same, followed by a logged change before the function reloads: the count is short.
    let text = Definition::tournament("cup-i", &cup(now - Span::hours(1), 4, json!({})), now).unwrap().text;
    let _: () = redis::cmd("HSET").arg(catalog.definitions()).arg("cup-i").arg(text).query_async(&mut conn).await.unwrap();
    let _: () = redis::cmd("INCR").arg(catalog.catalog_version()).query_async(&mut conn).await.unwrap();
    assert_eq!(arena.put("cup-j", &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    let both = reload(&arena, &warm, "a change without the log, then one with it").await;
    assert!(both.board("cup-i").is_some() && both.board("cup-j").is_some(), "both served");
    assert_eq!(arena.put("cup-k", &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    let restarted = reload(&arena, &warm, "a change once the log started again").await;
    assert!(Arc::ptr_eq(&parsed(&both, "cup-a"), &parsed(&restarted, "cup-a")), "the log serves again");
}

/// The periodic whole read (issue 59: a warm function's catalog load ≤ 20 ms at 10,000 boards,
/// where a whole read takes ~150 ms) is made beside the requests, not in one: the request that
/// finds it due answers from the change log, and the whole read's catalog reaches the requests
/// after it. Shown by a change the log cannot see (a definition rewritten at the same version, as
/// a catalog restored under a frozen function is), which only the whole read heals.
#[tokio::test]
async fn the_periodic_whole_read_is_made_beside_the_requests_and_heals_what_the_log_cannot_see() {
    let arena = Arena::new().await;
    let (now, app) = (arena.app.now(), &arena.app);
    assert_eq!(arena.put("cup-a", &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    let warm = Catalog::new(app.config.clone(), app.keys.clone(), app.store.clone(), |_| ())
        .with_refresh(Duration::ZERO)
        .with_whole_read(Duration::ZERO);
    let title = |config: &Config| parsed(config, "cup-a").title.clone();
    assert_eq!(title(&*reload(&arena, &warm, "the first read").await), "Friday cup");

    let text = Definition::tournament("cup-a", &cup(now - Span::hours(1), 4, json!({"title": "Behind"})), now).unwrap().text;
    let mut conn = app.redis.clone();
    let _: () = redis::cmd("HSET").arg(app.keys.catalog().definitions()).arg("cup-a").arg(text).query_async(&mut conn).await.unwrap();
    let due = warm.config().await.unwrap();
    assert_eq!(title(&due), "Friday cup", "the request that finds the whole read due does not wait for it");
    warm.whole_read_settled().await;
    let healed = reload(&arena, &warm, "the whole read made beside the requests").await;
    assert_eq!(title(&healed), "Behind");

    // A change after a whole read: brought forward from what the whole read found.
    warm.whole_read_settled().await;
    assert_eq!(arena.put("cup-b", &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    let after = reload(&arena, &warm, "a change after a whole read").await;
    assert!(after.board("cup-b").is_some() && title(&after) == "Behind");
}

/// A catalog that went back to an older version (a snapshot restored, or its changes since the
/// last drain lost), then moved on past the version a warm function held: the function serves
/// it as it is, not the history it held.
#[tokio::test]
async fn a_catalog_that_went_back_is_served_as_it_is_now() {
    let arena = Arena::new().await;
    let (now, app) = (arena.app.now(), &arena.app);
    for id in ["cup-a", "cup-b", "cup-c"] {
        assert_eq!(arena.put(id, &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    }
    let warm = Catalog::new(app.config.clone(), app.keys.clone(), app.store.clone(), |_| ()).with_refresh(Duration::ZERO);
    assert!(reload(&arena, &warm, "the first read").await.board("cup-c").is_some());
    // Back to the catalog as it was after its first change (the guard stays: nothing is lost).
    let catalog = app.keys.catalog();
    let mut conn = app.redis.clone();
    let keys = [catalog.definitions(), catalog.ending(), catalog.catalog_version(), catalog.catalog_log()];
    let _: () = redis::cmd("DEL").arg(&keys).query_async(&mut conn).await.unwrap();
    assert_eq!(arena.put("cup-a", &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    assert_eq!(runtime(&warm.config().await.unwrap()).len(), 1, "cup-a alone, at version 1");
    for id in ["cup-x", "cup-y", "cup-z"] {
        assert_eq!(arena.put(id, &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    }
    let served = reload(&arena, &warm, "the catalog moved past the version held before").await;
    assert!(served.board("cup-b").is_none() && served.board("cup-z").is_some());
}

/// A request naming a board a function does not serve (issue 59, bounded): its record is read
/// by name once; a name with no tombstone is trusted as such for the refresh period, never
/// longer; at most `RETIRED_HELD` names and `COMPOSED_HELD` configs are kept.
#[tokio::test]
async fn names_read_by_name_are_held_bounded_and_trusted_only_for_the_refresh_period() {
    let arena = Arena::new().await;
    let (now, app) = (arena.app.now(), &arena.app);
    let gone: Vec<String> = (0..=COMPOSED_HELD).map(|i| format!("gone-{i}")).collect();
    for id in &gone {
        assert_eq!(arena.put(id, &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
        assert_eq!(arena.delete(id, "cancelled").await.0, StatusCode::ACCEPTED);
    }
    arena.runtime_run(None).await;
    let builds = Arc::new(AtomicUsize::new(0));
    let counted = builds.clone();
    let build = move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
    };
    let warm = Catalog::new(app.config.clone(), app.keys.clone(), app.store.clone(), build).with_refresh(Duration::from_secs(3600));
    let every = Catalog::new(app.config.clone(), app.keys.clone(), app.store.clone(), |_| ()).with_refresh(Duration::ZERO);
    warm.current().await.unwrap();
    let trips = || app.store.round_trips();
    let named = |config: Arc<Config>, name: &str| config.board(name).is_some();

    // A name with no tombstone: read once, then trusted for the refresh period.
    let before = trips();
    assert!(!named(warm.config_naming("late").await.unwrap(), "late"));
    assert_eq!(trips() - before, 1, "the name's record read");
    assert!(!named(every.config_naming("late").await.unwrap(), "late"));
    let before = trips();
    assert!(!named(warm.config_naming("late").await.unwrap(), "late"));
    assert_eq!(trips() - before, 0, "trusted within the refresh period: no round trip");
    // Defined and deleted since: a function refreshing at once sees its tombstone; one within its
    // refresh period still answers from what it read (stale by at most that period).
    assert_eq!(arena.put("late", &cup(now - Span::hours(1), 4, json!({}))).await.0, StatusCode::CREATED);
    assert_eq!(arena.delete("late", "cancelled").await.0, StatusCode::ACCEPTED);
    arena.runtime_run(None).await;
    assert!(named(every.config_naming("late").await.unwrap(), "late"), "a name without a tombstone is not remembered past the refresh");
    assert!(!named(warm.config_naming("late").await.unwrap(), "late"));

    // Tombstones: each read by name once; a config composed with it is kept, `COMPOSED_HELD` at most.
    let (first, last) = (&gone[0], &gone[COMPOSED_HELD]);
    for id in &gone[..COMPOSED_HELD] {
        let before = (trips(), builds.load(Ordering::SeqCst));
        assert!(named(warm.config_naming(id).await.unwrap(), id));
        assert_eq!((trips() - before.0, builds.load(Ordering::SeqCst) - before.1), (1, 1), "{id}: its record read, a config built");
    }
    let before = (trips(), builds.load(Ordering::SeqCst));
    assert!(named(warm.config_naming(first).await.unwrap(), first));
    assert_eq!((trips() - before.0, builds.load(Ordering::SeqCst) - before.1), (0, 0), "held: neither read nor built again");
    assert!(named(warm.config_naming(last).await.unwrap(), last));
    let before = (trips(), builds.load(Ordering::SeqCst));
    assert!(named(warm.config_naming(first).await.unwrap(), first));
    assert_eq!(
        (trips() - before.0, builds.load(Ordering::SeqCst) - before.1),
        (0, 1),
        "past `COMPOSED_HELD` configs the oldest are dropped: built again from the tombstone still held"
    );

    // Names not held, read together: one round trip (a queue batch naming several).
    let before = trips();
    warm.naming_all(&["fresh-a", "fresh-b", "fresh-c"]).await.unwrap();
    assert_eq!(trips() - before, 1, "three names, one read");

    // Past `RETIRED_HELD` names, what was held is dropped: read again by name.
    for i in 0..RETIRED_HELD {
        warm.config_naming(&format!("nobody-{i}")).await.unwrap();
    }
    let before = trips();
    assert!(named(warm.config_naming(first).await.unwrap(), first));
    assert_eq!(trips() - before, 1, "{first} read by name again");
}
