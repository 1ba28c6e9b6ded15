//! Ranking a given list of members, and when boards reset.

use axum::http::Method;
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings::domain::tiebreak;
use standings_tests::{TestApp, at, spawn_ingest, spawn_ingest_with};

async fn ranks(app: &TestApp, board: &str, body: Value) -> (u16, Value) {
    let (status, value) = app.call_query(Method::POST, &format!("/v1/boards/{board}/ranks"), body.to_string()).await;
    (status.as_u16(), value)
}

/// `count` members m000.. on today's activity day board with points 1 + i % 50.
async fn seed_board(app: &TestApp, count: usize) -> Vec<(String, i64, f64)> {
    let day = Period::containing(PeriodKind::Day, app.now(), chrono_tz::Asia::Shanghai);
    let key = app.keys.board("activity").period(&day);
    let members: Vec<(String, i64, f64)> = (0..count)
        .map(|i| {
            let points = 1 + (i % 50) as i64;
            let composite = tiebreak::encode(points, app.now() - chrono::Duration::seconds(i as i64)).unwrap();
            (format!("m{i:03}"), points, composite)
        })
        .collect();
    let mut pipe = redis::pipe();
    for (member, _, composite) in &members {
        pipe.zadd(&key, member, *composite).ignore();
    }
    let () = pipe.query_async(&mut app.redis.clone()).await.unwrap();
    members
}

#[tokio::test]
async fn five_hundred_ids_ranked_unranked_and_repeated() {
    let app = spawn_ingest().await;
    let members = seed_board(&app, 300).await;
    let mut oracle = members.clone();
    oracle.sort_by(|a, b| b.2.partial_cmp(&a.2).unwrap());
    let global_rank = |m: &str| oracle.iter().position(|o| o.0 == m).unwrap() as u64 + 1;

    // 200 ranked (two of every three members, listed in member order, not board order),
    // 250 unknown, 50 repeats.
    let ranked: Vec<String> = members.iter().enumerate().filter(|(i, _)| i % 3 != 0).map(|(_, m)| m.0.clone()).collect();
    let unknown: Vec<String> = (0..250).map(|i| format!("stranger{i}")).collect();
    let mut ids: Vec<String> = ranked.iter().chain(&unknown).cloned().collect();
    ids.extend(ranked.iter().take(25).cloned());
    ids.extend(unknown.iter().take(25).cloned());
    assert_eq!(ids.len(), 500);

    // The first call in a fresh Redis also loads the script (NOSCRIPT, LOAD, retry).
    ranks(&app, "activity", json!({ "user_ids": ids })).await;
    let before = app.store.round_trips();
    let (status, body) = ranks(&app, "activity", json!({ "user_ids": ids })).await;
    assert_eq!(status, 200, "{body}");
    let listed = body["entries"].as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap());
    let profiles = app.profile_requests(listed).await;
    assert_eq!(
        app.store.round_trips() - before,
        1 + profiles,
        "one script for the ranks, one pipeline for profiles (per node on a cluster)"
    );
    assert_eq!(body["total"], 300);
    let entries = body["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 450, "each distinct id once");

    let mut in_board_order = ranked.clone();
    in_board_order.sort_by_key(|m| global_rank(m));
    for (i, (entry, member)) in entries.iter().zip(&in_board_order).enumerate() {
        assert_eq!(entry["user_id"], member.as_str());
        assert_eq!(entry["rank"].as_u64().unwrap(), global_rank(member));
        assert_eq!(entry["relative_rank"].as_u64().unwrap(), i as u64 + 1);
        assert_eq!(entry["score"].as_i64().unwrap(), members.iter().find(|m| &m.0 == member).unwrap().1);
    }
    for (entry, stranger) in entries[200..].iter().zip(&unknown) {
        assert_eq!(entry["user_id"], stranger.as_str(), "the absent follow in request order");
        assert_eq!((&entry["rank"], &entry["relative_rank"], entry["score"].as_i64()), (&Value::Null, &Value::Null, Some(0)));
    }

    let (_, only_ranked) = ranks(&app, "activity", json!({ "user_ids": ids, "include_missing": false })).await;
    assert_eq!(only_ranked["entries"].as_array().unwrap().len(), 200);
}

#[tokio::test]
async fn ties_share_ranks_in_competition_mode_globally_and_within_the_list() {
    let app = spawn_ingest().await;
    seed_board(&app, 100).await; // points 1..=50, each twice (m00x and m05x)
    let ids = ["m049", "m099", "m048", "m010"];
    let (_, body) = ranks(&app, "activity", json!({"user_ids": ids, "rank_mode": "competition"})).await;
    let summary: Vec<(&str, u64, u64, i64)> = body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["user_id"].as_str().unwrap(),
                e["rank"].as_u64().unwrap(),
                e["relative_rank"].as_u64().unwrap(),
                e["score"].as_i64().unwrap(),
            )
        })
        .collect();
    // m099 reached 50 points 50 s before m049: first in board order, same competition rank.
    assert_eq!(summary, [("m099", 1, 1, 50), ("m049", 1, 1, 50), ("m048", 3, 3, 49), ("m010", 79, 4, 11)]);
}

#[tokio::test]
async fn bad_lists_are_refused() {
    let app = spawn_ingest().await;
    let too_many: Vec<String> = (0..501).map(|i| format!("u{i}")).collect();
    assert_eq!(ranks(&app, "activity", json!({ "user_ids": too_many })).await.0, 413);
    assert_eq!(ranks(&app, "activity", json!({ "user_ids": [] })).await.0, 400);
    let (status, body) = ranks(&app, "activity", json!({ "user_ids": ["ok", "not ok"] })).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid_id")));
    assert!(body["error"]["message"].as_str().unwrap().contains("user_ids[1]"));
    assert_eq!(ranks(&app, "nope", json!({ "user_ids": ["a"] })).await.0, 404);
}

#[tokio::test]
async fn resets_at_month_and_year_end_in_shanghai() {
    let app = spawn_ingest().await;
    app.set_now(at("2026-12-31T23:59:30+08:00"));
    let (_, day) = app.get("/v1/boards/activity/top").await;
    assert_eq!(
        (day["period_id"].as_str(), day["period_start"].as_str(), day["next_reset"].as_str()),
        (Some("2026-12-31"), Some("2026-12-31T00:00:00+08:00"), Some("2027-01-01T00:00:00+08:00"))
    );
    let (_, month) = app.get("/v1/boards/activity/users/u1?period=month").await;
    assert_eq!(
        (month["period_start"].as_str(), month["next_reset"].as_str()),
        (Some("2026-12-01T00:00:00+08:00"), Some("2027-01-01T00:00:00+08:00"))
    );
    let (_, november) = app.get("/v1/boards/activity/top?period=month&at=2026-11-30").await;
    assert_eq!(november["next_reset"], "2026-12-01T00:00:00+08:00");
    let (_, all_time) = app.get("/v1/boards/invites/top").await;
    assert_eq!((&all_time["period_start"], &all_time["next_reset"]), (&Value::Null, &Value::Null));
}

#[tokio::test]
async fn resets_in_a_half_hour_timezone_across_a_leap_day() {
    let config = Config::parse(
        r#"[[boards]]
           name = "cricket"
           kind = "cumulative"
           timezone = "Asia/Kolkata"
           periods = ["day", "month"]
           top = 10
           rules = [{ action = "run", points = 1, scope = "none" }]"#,
    )
    .unwrap();
    let app = spawn_ingest_with(config).await;
    app.set_now(at("2028-02-28T19:00:00Z")); // 00:30 on Feb 29th in Kolkata
    let (_, day) = app.get("/v1/boards/cricket/top").await;
    assert_eq!(
        (day["period_id"].as_str(), day["period_start"].as_str(), day["next_reset"].as_str()),
        (Some("2028-02-29"), Some("2028-02-29T00:00:00+05:30"), Some("2028-03-01T00:00:00+05:30"))
    );
    let (_, month) = app.get("/v1/boards/cricket/top?period=month").await;
    assert_eq!(month["next_reset"], "2028-03-01T00:00:00+05:30");
    let (_, catalog) = app.get("/v1/boards").await;
    assert_eq!(catalog["boards"][0]["periods"][1]["next_reset"], "2028-03-01T00:00:00+05:30");
}

#[tokio::test]
async fn the_board_list_matches_the_configuration_file() {
    let app = spawn_ingest().await;
    let (status, headers, _) = app.get_with_headers("/v1/boards").await;
    assert_eq!(status, 200);
    assert_eq!(headers["cache-control"], "public, max-age=10");
    let file: toml::Value = toml::from_str(include_str!("../../shared/boards.toml")).unwrap();
    // In name order, a page of at most 100 (docs/api.md): the file's boards, sorted.
    let (_, catalog) = app.get("/v1/boards?limit=100").await;
    let mut configured: Vec<&toml::Value> = file["boards"].as_array().unwrap().iter().collect();
    configured.sort_by_key(|board| board["name"].as_str().unwrap().to_owned());
    let listed = catalog["boards"].as_array().unwrap();
    assert_eq!(listed.len(), configured.len());
    for (listed, configured) in listed.iter().zip(configured) {
        let name = configured["name"].as_str().unwrap();
        assert_eq!(listed["name"], name);
        assert_eq!(listed["kind"], configured["kind"].as_str().unwrap());
        assert_eq!(listed["timezone"], configured["timezone"].as_str().unwrap());
        assert_eq!(listed["top"].as_i64(), configured["top"].as_integer());
        let periods: Vec<&str> = listed["periods"].as_array().unwrap().iter().map(|p| p["period"].as_str().unwrap()).collect();
        let configured_periods: Vec<&str> = configured["periods"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
        assert_eq!(periods, configured_periods, "{name}");
        let order = configured.get("order").and_then(toml::Value::as_str).unwrap_or("desc");
        assert_eq!(listed["order"], order, "{name}");
        assert_eq!(listed.get("keep").and_then(Value::as_str), configured.get("keep").and_then(toml::Value::as_str), "{name}");
        let mut rules: Vec<(String, i64, Option<i64>, bool)> = configured
            .get("rules")
            .and_then(toml::Value::as_array)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|r| {
                let reversible = r.get("reversible").and_then(toml::Value::as_bool).unwrap_or(false);
                (
                    r["action"].as_str().unwrap().to_owned(),
                    r["points"].as_integer().unwrap(),
                    r.get("daily_cap").and_then(toml::Value::as_integer),
                    reversible,
                )
            })
            .collect();
        rules.sort();
        let mut listed_rules: Vec<(String, i64, Option<i64>, bool)> = listed["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["action"].as_str().unwrap().to_owned(),
                    r["points"].as_i64().unwrap(),
                    r["daily_cap"].as_i64(),
                    r["reversible"].as_bool().unwrap(),
                )
            })
            .collect();
        listed_rules.sort();
        assert_eq!(listed_rules, rules, "{name}");
    }
    let named = |name: &str| listed.iter().find(|board| board["name"] == name).unwrap();
    assert_eq!(named("points")["sign_in"]["streak_bonuses"], json!([[7, 10], [14, 20], [28, 40]]));
    assert_eq!(named("hot-videos")["decay"]["window_hours"], 24);
}
