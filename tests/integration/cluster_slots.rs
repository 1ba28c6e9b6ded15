//! Every key a board's script touches hashes to the board's one cluster slot. In cluster mode
//! the server says which slot a key is in (`CLUSTER KEYSLOT`), and the whole suite running
//! there shows Redis accepted every script's keys (it refuses a script that touches a key in
//! another slot); standalone, the client's own CRC16 (what redis-rs routes by) stands in.

use std::collections::{BTreeMap, BTreeSet};

use axum::http::Method;
use redis::cluster_routing::Slot;
use serde_json::json;
use standings_tests::{TestApp, WRITER, spawn_ingest};

async fn slot_of(app: &TestApp, key: &str) -> Slot {
    if !app.store.is_cluster() {
        return Slot::for_key(key);
    }
    let slot: u16 = redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query_async(&mut app.redis.clone()).await.unwrap();
    let slot = Slot::new(slot).unwrap();
    assert_eq!(slot, Slot::for_key(key), "the client routes {key} where the server keeps it");
    slot
}

/// `<prefix>:v1:{<tag>}:…` → `<tag>`: the board (or `_profiles-<n>` for profiles).
fn tag_of(key: &str) -> &str {
    let rest = key.split_once(":v1:{").expect("every key has the layout <prefix>:v1:{tag}:…").1;
    rest.split_once('}').unwrap().0
}

#[tokio::test]
async fn every_key_a_board_writes_hashes_to_that_boards_slot() {
    let app = spawn_ingest().await;
    // Every kind of key: period boards of each board, day/lifetime/target ledgers, cap
    // counters, rate logs, event markers, sign-in bitmaps, hot buckets, and a profile.
    let events = [
        json!({"event_id": "c1", "user_id": "u1", "action": "comment", "target": "a1"}),
        json!({"event_id": "c2", "user_id": "u1", "action": "comment", "target": "a1", "active": false}),
        json!({"event_id": "p1", "user_id": "u2", "action": "publish", "target": "a2"}),
        json!({"event_id": "i1", "user_id": "u3", "action": "invite", "target": "u9"}),
        json!({"event_id": "l1", "user_id": "u4", "action": "learning"}),
        json!({"event_id": "v1", "user_id": "u5", "action": "page_view", "target": "/p/1?x=1"}),
    ];
    for event in events {
        let (status, body) = app.event(event).await;
        assert_eq!(status, 200, "{body}");
    }
    for (path, body) in [
        ("/v1/sign-ins", json!({"event_id": "s1", "user_id": "u7"})),
        ("/v1/hot/hot-videos/items/v1", json!({"event_id": "h1", "delta": 2})),
    ] {
        let (status, reply) = app.post(path, &body).await;
        assert_eq!(status, 200, "{path}: {reply}");
    }
    let (status, _) = app.call(Method::PUT, "/v1/users/u1/profile", json!({"nickname": "One"}).to_string(), WRITER).await;
    assert_eq!(status, 200);

    let mut slots_by_tag: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for key in app.written_keys().await {
        let slot = slot_of(&app, &key).await;
        slots_by_tag.entry(tag_of(&key).to_owned()).or_default().insert(format!("{slot:?}"));
        assert_eq!(slot, slot_of(&app, &format!("{{{}}}", tag_of(&key))).await, "{key} is in its tag's slot");
    }
    let tags: Vec<&str> = slots_by_tag.keys().map(String::as_str).collect();
    let profile_shard = tag_of(&app.keys.profile("u1")).to_owned();
    assert!(profile_shard.starts_with("_profiles-"), "{profile_shard}");
    assert_eq!(
        tags,
        ["_profiles-", "activity", "hot-videos", "invites", "points"].map(|t| if t == "_profiles-" { profile_shard.as_str() } else { t })
    );
    for (tag, slots) in &slots_by_tag {
        assert_eq!(slots.len(), 1, "{tag}'s keys span slots {slots:?}");
    }
}

/// The ranges docs/scaling.md's shard spread is tested against are the ones `redis-cli
/// --cluster create` gave this suite's cluster (3 primaries).
#[tokio::test]
async fn the_primaries_hold_the_slot_ranges_redis_cli_gives() {
    let app = standings_tests::spawn_ingest().await;
    if !app.store.is_cluster() {
        return;
    }
    let slots: Vec<redis::Value> = redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut app.redis.clone()).await.unwrap();
    let mut ranges: Vec<(u32, u32)> = slots
        .iter()
        .map(|range| {
            let redis::Value::Array(parts) = range else { panic!("CLUSTER SLOTS answers arrays: {range:?}") };
            let [redis::Value::Int(first), redis::Value::Int(last), ..] = parts.as_slice() else { panic!("a range: {parts:?}") };
            (u32::try_from(*first).unwrap(), u32::try_from(*last).unwrap())
        })
        .collect();
    ranges.sort_unstable();
    assert_eq!(ranges, standings::redis::keys::redis_cli_ranges(3));
}
