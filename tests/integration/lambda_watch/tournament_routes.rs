//! Issue 59's routes as API Gateway routes them: through `cargo lambda watch`'s router (the
//! paths of the template, not `/lambda-url/<function>`), each numbered item checked by what it
//! changed: the paged list (1), bounded definitions (2), a deleted name kept (3), a stale
//! function's code (4), a start in the past (5), a cron schedule in a timezone (6), a live edit
//! and an attempts grant (7), moderation (8). Results by default (9) are read in
//! `played_ended_and_read`; item 10 is the sharding issue's `reshard` (score_rescale.rs).
//! Each asserts what a reader then sees, not only the status.

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
    // One more than the default page.
    let ids: Vec<String> = (0..21).map(|i| format!("routes-{pid}-{i:02}")).collect();
    for id in &ids {
        let cup = json!({"title": "Routes cup", "category": category, "keep": "best", "start": now - chrono::Duration::minutes(5),
            "end": now + chrono::Duration::hours(1), "max_entries": 1, "max_size": 100, "join_required": false});
        let (status, created) = call(reqwest::Method::PUT, &format!("/v1/admin/tournaments/{id}"), Some(cup)).await;
        assert_eq!(status, 201, "{created}");
    }
    let first = &ids[0];

    // A live edit: the title changes where every reader sees it.
    let (status, edited) = call(reqwest::Method::PATCH, &format!("/v1/admin/tournaments/{first}"), Some(json!({"title": "Renamed"}))).await;
    assert_eq!((status, &edited["definition"]["title"]), (200, &json!("Renamed")), "{edited}");
    read_until(&format!("/v1/tournaments/{first}"), |view| view["title"] == "Renamed").await;
    // Extended by a day, then shortened to half an hour from now: the instance open now ends
    // then; an end before now is refused, naming `end`, and changes nothing.
    let edit = format!("/v1/admin/tournaments/{first}");
    for hours in [25, 0] {
        let end = (now + chrono::Duration::hours(hours) + chrono::Duration::minutes(30)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let (status, edited) = call(reqwest::Method::PATCH, &edit, Some(json!({"end": end}))).await;
        assert_eq!(status, 200, "{edited}");
        read_until(&format!("/v1/tournaments/{first}"), |view| {
            view["end"].as_str().and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
                == chrono::DateTime::parse_from_rfc3339(&end).ok()
        })
        .await;
    }
    let (status, refused) = call(reqwest::Method::PATCH, &edit, Some(json!({"end": now - chrono::Duration::hours(1)}))).await;
    let field = refused["error"]["message"].as_str().unwrap_or_default();
    assert_eq!((status, code(&refused), field.starts_with("end")), (400, Some("invalid_tournament"), true), "{refused}");
    // The other fields an edit changes, each where a reader sees it; `null` removes a description.
    let prizes = json!([{"ranks": [1, 1], "reward": {"gems": 50}}]);
    let details = json!({"description": "Edited live", "metadata": {"season": 2}, "max_size": 200, "prizes": prizes});
    let (status, edited) = call(reqwest::Method::PATCH, &edit, Some(details)).await;
    assert_eq!(status, 200, "{edited}");
    let view = read_until(&format!("/v1/tournaments/{first}"), |view| view["max_size"] == 200).await;
    assert_eq!(
        (&view["description"], &view["metadata"], &view["prizes"]),
        (&json!("Edited live"), &json!({"season": 2}), &prizes),
        "{view}"
    );
    let (status, edited) = call(reqwest::Method::PATCH, &edit, Some(json!({"description": null}))).await;
    assert_eq!((status, edited["definition"].get("description")), (200, None), "{edited}");
    read_until(&format!("/v1/tournaments/{first}"), |view| view["description"].is_null()).await;

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

    // The list, filtered to this test's category, 20 a page by default: every tournament once, in
    // name order, without prizes and metadata; `limit` asks fewer.
    let page = format!("/v1/tournaments?category={category}");
    let one = read_until(&page, |page| page["tournaments"].as_array().is_some_and(|t| t.len() == 20)).await;
    let cursor = one["next_cursor"].as_str().expect("a second page").to_owned();
    let two = read_until(&format!("{page}&cursor={cursor}"), |_| true).await;
    let listed: Vec<&str> =
        [&one, &two].iter().flat_map(|page| page["tournaments"].as_array().unwrap()).filter_map(|t| t["tournament_id"].as_str()).collect();
    assert_eq!(listed, ids.iter().map(String::as_str).collect::<Vec<_>>(), "{one} {two}");
    assert_eq!(two["next_cursor"], Value::Null, "{two}");
    let entry = &one["tournaments"][0];
    assert_eq!((entry.get("prizes"), entry.get("metadata"), &entry["max_size"]), (None, None, &json!(200)), "{entry}");
    let (_, two_only) = call(reqwest::Method::GET, &format!("{page}&limit=2"), None).await;
    assert_eq!(two_only["next_cursor"], json!(ids[1]), "{two_only}");
    let (status, bad) = call(reqwest::Method::GET, "/v1/tournaments?limit=101", None).await;
    assert_eq!((status, &bad["error"]["code"]), (400, &json!("out_of_range")), "{bad}");

    // The live page's two pages: `state=open` lists the 21, `state=upcoming` the one defined
    // for tomorrow, each of this category alone.
    let upcoming = format!("routes-{pid}-later");
    let cup = json!({"title": "Later cup", "category": category, "keep": "best", "start": now + chrono::Duration::days(1),
        "end": now + chrono::Duration::days(1) + chrono::Duration::hours(1), "join_required": false});
    let (status, created) = call(reqwest::Method::PUT, &format!("/v1/admin/tournaments/{upcoming}"), Some(cup)).await;
    assert_eq!(status, 201, "{created}");
    let names = |page: &Value| -> Vec<String> {
        page["tournaments"].as_array().unwrap().iter().filter_map(|t| t["tournament_id"].as_str().map(str::to_owned)).collect()
    };
    let later = read_until(&format!("/v1/tournaments?state=upcoming&category={category}"), |page| !names(page).is_empty()).await;
    assert_eq!((names(&later), &later["tournaments"][0]["state"]), (vec![upcoming.clone()], &json!("upcoming")), "{later}");
    let open = read_until(&format!("/v1/tournaments?state=open&category={category}&limit=100"), |_| true).await;
    assert_eq!(names(&open), ids, "{open}");

    // The board catalogue pages the same way: a walk of 7 a page lists every board once, in
    // name order, the declared ones among them.
    let (mut boards, mut cursor) = (Vec::new(), String::new());
    loop {
        let (status, page) = call(reqwest::Method::GET, &format!("/v1/boards?limit=7{cursor}"), None).await;
        assert_eq!(status, 200, "{page}");
        let names: Vec<String> = page["boards"].as_array().unwrap().iter().map(|b| b["name"].as_str().unwrap().to_owned()).collect();
        assert!(names.len() <= 7, "{page}");
        boards.extend(names);
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert!(boards.windows(2).all(|pair| pair[0] < pair[1]), "once each, in name order: {boards:?}");
    assert!(["points", "high-scores", "activity"].iter().all(|name| boards.iter().any(|b| b == name)), "{boards:?}");
}

/// The watch's keys (journaled, as its functions' are: scripts/test.sh names a bucket).
fn watch_keys() -> standings::redis::keys::Keys {
    let prefix = std::env::var("STANDINGS_WATCH_KEY_PREFIX").expect("scripts/test.sh names the watch's key prefix");
    standings::redis::keys::Keys::new(&prefix).unwrap().with_journal(true)
}

fn code(body: &Value) -> Option<&str> {
    body["error"]["code"].as_str()
}

#[tokio::test]
async fn a_definition_past_its_limits_a_deleted_name_and_a_stale_ingest_through_the_watch_router() {
    let id = format!("gone-{}", std::process::id());
    let now = chrono::Utc::now();
    let cup = json!({"title": "Gone cup", "keep": "best", "start": now - chrono::Duration::minutes(5),
        "end": now + chrono::Duration::hours(1), "join_required": false});

    // Item 2: past a documented limit, refused naming it, nothing stored.
    let prizes: Vec<Value> = (1..=100).map(|rank| json!({"ranks": [rank, rank], "reward": "x".repeat(3000)})).collect();
    for (field, value, named) in [("metadata", json!({"blob": "x".repeat(5000)}), "metadata"), ("prizes", json!(prizes), "16384")] {
        let mut big = cup.clone();
        big[field] = value;
        let (status, refused) = call(reqwest::Method::PUT, &format!("/v1/admin/tournaments/{id}"), Some(big)).await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert_eq!((status, code(&refused), message.contains(named)), (400, Some("invalid_tournament"), true), "{field}: {refused}");
        assert_eq!(call(reqwest::Method::GET, &format!("/v1/admin/tournaments/{id}"), None).await.0, 404, "{field}: nothing stored");
    }

    let (status, created) = call(reqwest::Method::PUT, &format!("/v1/admin/tournaments/{id}"), Some(cup.clone())).await;
    assert_eq!(status, 201, "{created}");
    let play = |n: u32| json!({"event_id": format!("{id}-{n}"), "user_id": format!("{id}-ann"), "score": n});
    let (status, played) = call(reqwest::Method::POST, &format!("/v1/tournaments/{id}/scores"), Some(play(1))).await;
    assert_eq!(status, 200, "the watch's ingest now holds the tournament: {played}");

    // Item 4: deleted by another instance of the function (a second Lambda container); the
    // watch's, its catalog up to 5 s old, answers with the tournament's code.
    let declared = std::sync::Arc::new(standings::domain::config::Config::parse(standings::domain::config::DEFAULT_CONFIG).unwrap());
    let store = standings::redis::store::Store::connect(&standings_tests::redis_settings()).unwrap();
    let elsewhere = standings::services::tournaments::TournamentAdmin::new(declared, watch_keys(), store, 10_000);
    elsewhere.delete(&id, Some("elsewhere"), chrono::Utc::now()).await.unwrap();
    let (status, late) = call(reqwest::Method::POST, &format!("/v1/tournaments/{id}/scores"), Some(play(2))).await;
    assert_eq!((status, code(&late)), (409, Some("tournament_closed")), "{late}");

    // Item 3: the name is never defined again, the same body included.
    let (status, again) = call(reqwest::Method::PUT, &format!("/v1/admin/tournaments/{id}"), Some(cup)).await;
    assert_eq!((status, code(&again)), (409, Some("board_exists")), "{again}");
    let top = read_until(&format!("/v1/tournaments/{id}/top?instance=all"), |top| top["entries"].is_array()).await;
    let scores: Vec<i64> = top["entries"].as_array().into_iter().flatten().filter_map(|e| e["score"].as_i64()).collect();
    assert_eq!(scores, [1], "the score before the deletion alone: {top}");

    // Its end done by the archive's every-minute run once its journal is drained (the
    // definition forgotten, 404): the name stays taken.
    let admin = format!("/v1/admin/tournaments/{id}");
    let mut runs = Vec::new();
    for _ in 0..3 {
        if call(reqwest::Method::GET, &admin, None).await.0 == 404 {
            break;
        }
        runs.push(super::invoke("journal", "drain-event.json"));
        runs.push(super::invoke("archive", "runtime-event.json"));
    }
    let (status, gone) = call(reqwest::Method::GET, &admin, None).await;
    assert_eq!((status, code(&gone)), (404, Some("unknown_tournament")), "its end done: {gone}; runs: {runs:?}");
    let (status, again) = call(
        reqwest::Method::PUT,
        &admin,
        Some(json!({"title": "Again", "keep": "best",
        "start": now, "end": now + chrono::Duration::hours(1), "join_required": false})),
    )
    .await;
    assert_eq!((status, code(&again)), (409, Some("board_exists")), "{again}");
    // A board's rules are bounded too (item 2), refused naming the limit, nothing stored.
    let rules: Vec<Value> = (0..101).map(|i| json!({"action": format!("a{i}"), "points": 1, "scope": "none"})).collect();
    let many = json!({"kind": "cumulative", "timezone": "UTC", "periods": ["day"], "top": 10, "rules": rules});
    let board = format!("/v1/admin/boards/rules-{}", std::process::id());
    let (status, refused) = call(reqwest::Method::PUT, &board, Some(many)).await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert_eq!((status, code(&refused), message.starts_with("rules: at most 100")), (400, Some("invalid_board"), true), "{refused}");
    assert_eq!(call(reqwest::Method::GET, &board, None).await.0, 404, "nothing stored");
}

/// Items 5 and 6: an hourly `cron` tournament in Kolkata (UTC+05:30) whose `start` is 30 days
/// back opens the instance of now, named by its local minute; none before it exists, and the
/// archive's run stores none of them.
#[tokio::test]
async fn a_cron_tournament_in_a_timezone_started_in_the_past_opens_the_current_instance_only_through_the_watch_router() {
    let id = format!("kolkata-{}", std::process::id());
    let now = chrono::Utc::now();
    let body = json!({"title": "Hourly", "keep": "best", "start": now - chrono::Duration::days(30), "end": now + chrono::Duration::days(30),
        "cron": "0 * * * *", "timezone": "Asia/Kolkata", "duration_secs": 3600, "join_required": false});
    let (status, created) = call(reqwest::Method::PUT, &format!("/v1/admin/tournaments/{id}"), Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let view = read_until(&format!("/v1/tournaments/{id}"), |view| view["state"] == "open").await;
    let start = chrono::DateTime::parse_from_rfc3339(view["start"].as_str().unwrap()).unwrap();
    let local = start.with_timezone(&chrono_tz::Asia::Kolkata);
    assert_eq!((local.format("%M").to_string(), start.format("%M").to_string()), ("00".to_owned(), "30".to_owned()), "{view}");
    let instance = local.format("%Y-%m-%dT%H%M").to_string();
    let played = json!({"event_id": format!("{id}-1"), "user_id": format!("{id}-ann"), "score": 5});
    let (status, score) = call(reqwest::Method::POST, &format!("/v1/tournaments/{id}/scores"), Some(played)).await;
    assert_eq!((status, &score["instance"]), (200, &json!(instance)), "{score}");
    let earlier = (local - chrono::Duration::hours(1)).format("%Y-%m-%dT%H%M").to_string();
    let (status, before) = call(reqwest::Method::GET, &format!("/v1/tournaments/{id}/results?instance={earlier}"), None).await;
    assert_eq!((status, code(&before)), (404, Some("unknown_instance")), "{before}");

    // A run that worked on no instance leaves `tournaments` out (as when another test's run
    // ended every instance due first): nothing stored is what is asserted, not a list.
    let run = super::invoke("archive", "runtime-event.json");
    let stored: Vec<&str> = run["tournaments"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["tournament_id"] == id.as_str())
        .filter_map(|r| r["instance"].as_str())
        .collect();
    assert!(stored.iter().all(|stored| *stored >= instance.as_str()), "nothing from before the definition: {run}");
}

/// Item 6: a monthly tournament in New York (clocks changed twice a year) runs its whole local
/// month, from the 1st's midnight to the next 1st's, whatever the month's length: its
/// `duration_secs` of 31 days and an hour is cut at the next instance's start.
#[tokio::test]
async fn a_monthly_tournament_covers_its_whole_local_month_through_the_watch_router() {
    use chrono::{Datelike, TimeZone};
    let id = format!("monthly-{}", std::process::id());
    let zone = chrono_tz::America::New_York;
    let before = chrono::Utc::now();
    let body = json!({"title": "Monthly", "keep": "best", "start": before - chrono::Duration::days(40), "end": before + chrono::Duration::days(100),
        "reset": "month", "timezone": "America/New_York", "duration_secs": 31 * 86_400 + 3_600, "join_required": false});
    let (status, created) = call(reqwest::Method::PUT, &format!("/v1/admin/tournaments/{id}"), Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let view = read_until(&format!("/v1/tournaments/{id}"), |view| view["state"] == "open").await;
    let played = json!({"event_id": format!("{id}-1"), "user_id": format!("{id}-ann"), "score": 5});
    let (status, score) = call(reqwest::Method::POST, &format!("/v1/tournaments/{id}/scores"), Some(played)).await;
    let after = chrono::Utc::now();
    assert_eq!(status, 200, "{score}");
    // The month of `before`, or of `after` when a month began between them.
    let months: Vec<_> = [before, after]
        .iter()
        .map(|at| {
            let local = at.with_timezone(&zone);
            let first =
                zone.with_ymd_and_hms(local.year(), local.month(), 1, 0, 0, 0).single().expect("midnight on a 1st is never skipped");
            let next = if local.month() == 12 { (local.year() + 1, 1) } else { (local.year(), local.month() + 1) };
            let next = zone.with_ymd_and_hms(next.0, next.1, 1, 0, 0, 0).single().expect("midnight on a 1st is never skipped");
            (first.format("%Y-%m").to_string(), first.with_timezone(&chrono::Utc), next.with_timezone(&chrono::Utc))
        })
        .collect();
    let window = |view: &Value| {
        let at = |field: &str| {
            chrono::DateTime::parse_from_rfc3339(view[field].as_str().unwrap_or_default()).map(|t| t.with_timezone(&chrono::Utc)).ok()
        };
        (at("start"), at("end"))
    };
    assert!(months.iter().any(|(_, first, next)| window(&view) == (Some(*first), Some(*next))), "the whole month {months:?}: {view}");
    assert!(months.iter().any(|(name, _, _)| score["instance"] == name.as_str()), "{months:?}: {score}");
}

/// Item 8: a ban frees the banned player's seat; a correction after the instance's end is 422
/// `period_closed` and writes nothing.
#[tokio::test]
async fn moderation_reaches_a_tournament_through_the_watch_router() {
    let id = format!("mod-{}", std::process::id());
    let (ann, bo) = (format!("{id}-ann"), format!("{id}-bo"));
    let now = chrono::Utc::now();
    let cup = json!({"title": "Moderated", "category": id, "keep": "best", "start": now - chrono::Duration::minutes(5),
        "end": now + chrono::Duration::hours(1), "max_size": 1, "max_entries": 5, "join_required": true});
    assert_eq!(call(reqwest::Method::PUT, &format!("/v1/admin/tournaments/{id}"), Some(cup)).await.0, 201);
    let join = |user: &str| {
        let (path, body) = (format!("/v1/tournaments/{id}/join"), json!({"user_id": user}));
        async move { call(reqwest::Method::POST, &path, Some(body)).await }
    };
    assert_eq!(join(&ann).await.0, 200);
    let scored = json!({"event_id": format!("{id}-0"), "user_id": ann, "score": 9});
    assert_eq!(call(reqwest::Method::POST, &format!("/v1/tournaments/{id}/scores"), Some(scored)).await.0, 200);
    let (status, full) = join(&bo).await;
    assert_eq!((status, code(&full)), (409, Some("tournament_full")), "{full}");
    let (status, banned) = call(reqwest::Method::POST, &format!("/v1/admin/users/{ann}/ban"), None).await;
    assert_eq!(status, 200, "{banned}");
    let (status, joined) = join(&bo).await;
    assert_eq!((status, &joined["size"]), (200, &json!(1)), "the seat freed: {joined}");

    let play = json!({"event_id": format!("{id}-1"), "user_id": bo, "score": 7});
    assert_eq!(call(reqwest::Method::POST, &format!("/v1/tournaments/{id}/scores"), Some(play)).await.0, 200);
    let (status, ended) = call(reqwest::Method::POST, &format!("/v1/admin/tournaments/{id}/end"), Some(json!({"reason": "watch"}))).await;
    assert_eq!(status, 202, "{ended}");
    let (status, late) = call(reqwest::Method::PATCH, &format!("/v1/admin/tournaments/{id}"), Some(json!({"title": "Too late"}))).await;
    assert_eq!((status, code(&late)), (409, Some("tournament_closed")), "no edit once its instance ended: {late}");
    let grant = json!({"user_id": bo, "add": 1, "reason": "late"});
    let (status, late) = call(reqwest::Method::POST, &format!("/v1/admin/tournaments/{id}/attempts"), Some(grant)).await;
    assert_eq!((status, code(&late)), (409, Some("tournament_closed")), "no grant once its instance ended: {late}");
    let ended = read_until(&format!("/v1/tournaments?state=ended&category={id}"), |page| page["tournaments"][0].is_object()).await;
    assert_eq!((&ended["tournaments"][0]["tournament_id"], &ended["tournaments"][0]["state"]), (&json!(id), &json!("ended")), "{ended}");
    let correction = json!({"set": 20, "reason": "late"});
    let (status, late) = call(reqwest::Method::POST, &format!("/v1/admin/boards/{id}/users/{bo}/corrections"), Some(correction)).await;
    assert_eq!((status, code(&late)), (422, Some("period_closed")), "{late}");
    let top = read_until(&format!("/v1/tournaments/{id}/top?instance=all"), |top| top["entries"].is_array()).await;
    let scores: Vec<i64> = top["entries"].as_array().into_iter().flatten().filter_map(|e| e["score"].as_i64()).collect();
    assert_eq!(scores, [7], "ann's score went with the ban; the correction wrote nothing: {top}");
}
