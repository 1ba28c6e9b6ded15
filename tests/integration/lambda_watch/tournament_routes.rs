//! Issue 59's routes as API Gateway routes them: through `cargo lambda watch`'s router (the
//! paths of the template, not `/lambda-url/<function>`), a live edit, an attempts grant and the
//! paged list, each checked by what it changed.

use serde_json::{Value, json};

use super::{watch_client, watch_url};

async fn call(method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = watch_client().request(method, format!("{}{path}", watch_url()));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Reads `path` until `done` holds of its answer (the `seasons` function's catalog is at most
/// 5 s old), at most 30 s.
async fn read_until(path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = std::time::Instant::now();
    loop {
        let (status, body) = call(reqwest::Method::GET, path, None).await;
        if status == 200 && done(&body) {
            return body;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "{path}: {status} {body}");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn a_live_edit_a_grant_and_the_paged_list_through_the_watch_router() {
    let pid = std::process::id();
    let category = format!("watch-{pid}");
    let now = chrono::Utc::now();
    let ids: Vec<String> = ["a", "b", "c"].iter().map(|s| format!("routes-{pid}-{s}")).collect();
    for id in &ids {
        let cup = json!({"title": "Routes cup", "category": category, "keep": "best", "start": now - chrono::Duration::minutes(5),
            "end": now + chrono::Duration::hours(1), "max_entries": 1, "join_required": false});
        let (status, created) = call(reqwest::Method::PUT, &format!("/v1/admin/tournaments/{id}"), Some(cup)).await;
        assert_eq!(status, 201, "{created}");
    }
    let first = &ids[0];

    // A live edit: the title changes where every reader sees it.
    let (status, edited) = call(reqwest::Method::PATCH, &format!("/v1/admin/tournaments/{first}"), Some(json!({"title": "Renamed"}))).await;
    assert_eq!((status, &edited["definition"]["title"]), (200, &json!("Renamed")), "{edited}");
    read_until(&format!("/v1/tournaments/{first}"), |view| view["title"] == "Renamed").await;

    // One attempt, spent; a grant gives one more, which a score then takes.
    let play = |n: u32| json!({"event_id": format!("{first}-{n}"), "user_id": format!("{first}-ann"), "score": 10 * n});
    let (status, played) = call(reqwest::Method::POST, &format!("/v1/tournaments/{first}/scores"), Some(play(1))).await;
    assert_eq!((status, &played["entries_left"]), (200, &json!(0)), "{played}");
    let (status, refused) = call(reqwest::Method::POST, &format!("/v1/tournaments/{first}/scores"), Some(play(2))).await;
    assert_eq!((status, &refused["error"]["code"]), (422, &json!("entry_limit")), "{refused}");
    let grant = json!({"user_id": format!("{first}-ann"), "add": 1, "reason": "watch", "grant_id": format!("{first}-g")});
    let (status, granted) = call(reqwest::Method::POST, &format!("/v1/admin/tournaments/{first}/attempts"), Some(grant)).await;
    assert_eq!((status, &granted["added"], &granted["entries_left"]), (200, &json!(1), &json!(1)), "{granted}");
    let (status, played) = call(reqwest::Method::POST, &format!("/v1/tournaments/{first}/scores"), Some(play(3))).await;
    assert_eq!((status, &played["score"], &played["entries_left"]), (200, &json!(30), &json!(0)), "{played}");

    // The list, two a page, filtered to this test's category: every tournament once, in name order.
    let page = format!("/v1/tournaments?category={category}&limit=2");
    let one = read_until(&page, |page| page["tournaments"].as_array().is_some_and(|t| t.len() == 2)).await;
    let cursor = one["next_cursor"].as_str().expect("a second page").to_owned();
    let two = read_until(&format!("{page}&cursor={cursor}"), |_| true).await;
    let listed: Vec<&str> =
        [&one, &two].iter().flat_map(|page| page["tournaments"].as_array().unwrap()).filter_map(|t| t["tournament_id"].as_str()).collect();
    assert_eq!(listed, ids.iter().map(String::as_str).collect::<Vec<_>>(), "{one} {two}");
    assert_eq!(two["next_cursor"], Value::Null, "{two}");
    assert!(one["tournaments"][0].get("prizes").is_none(), "no prizes in a list: {one}");
    let (status, bad) = call(reqwest::Method::GET, "/v1/tournaments?limit=101", None).await;
    assert_eq!((status, &bad["error"]["code"]), (400, &json!("out_of_range")), "{bad}");
}
