//! The OpenAPI document against the routers. The API functions build their routers from
//! `routes()`; the document must describe exactly those (method, path) pairs. An operation
//! marked `x-standings-pending: true` is specified but not routed yet: it must stay unrouted
//! while marked, so the marker is dropped the moment its route lands.

use std::collections::BTreeSet;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::{ADMIN, Caller, WRITER, arena, spawn_ingest, spawn_ingest_on, spawn_ingest_with};

pub(crate) type Operation = (String, String);

const DOCUMENT_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../functions/query/src/openapi.json");

const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

pub(crate) fn document() -> Value {
    serde_json::from_str(query::web::OPENAPI).expect("functions/query/src/openapi.json is JSON")
}

/// (described and routed, described but pending)
pub(crate) fn described(document: &Value) -> (BTreeSet<Operation>, BTreeSet<Operation>) {
    let mut ready = BTreeSet::new();
    let mut pending = BTreeSet::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in METHODS.iter().filter(|method| item.get(**method).is_some()) {
            let operation = (method.to_string(), path.clone());
            if item[*method]["x-standings-pending"] == true {
                pending.insert(operation);
            } else {
                ready.insert(operation);
            }
        }
    }
    (ready, pending)
}

pub(crate) fn operations(routes: &[(Method, &'static str)]) -> Vec<Operation> {
    routes.iter().map(|(method, path)| (method.as_str().to_lowercase(), path.to_string())).collect()
}

fn routed() -> Vec<Operation> {
    [
        operations(ingest::routes().listed()),
        operations(query::routes().listed()),
        operations(seasons::routes().listed()),
        operations(void::routes().listed()),
    ]
    .concat()
}

#[test]
fn the_document_describes_exactly_the_routes_of_the_api_functions() {
    let routed_list = routed();
    let routed: BTreeSet<Operation> = routed_list.iter().cloned().collect();
    assert_eq!(routed.len(), routed_list.len(), "the functions share one API: no (method, path) may be routed twice");
    let (ready, pending) = described(&document());

    let undescribed: Vec<_> = routed.iter().filter(|op| !ready.contains(*op) && !pending.contains(*op)).collect();
    assert!(undescribed.is_empty(), "routed but missing from functions/query/src/openapi.json: {undescribed:?}");
    let landed: Vec<_> = routed.intersection(&pending).collect();
    assert!(landed.is_empty(), "routed now: drop `x-standings-pending` from {landed:?}");
    let unrouted: Vec<_> = ready.difference(&routed).collect();
    assert!(unrouted.is_empty(), "described but routed by no function (mark `x-standings-pending: true` until it lands): {unrouted:?}");
}

fn scopes(document: &Value, (method, path): &Operation) -> Vec<String> {
    let requirements = document["paths"][path][method]["security"].as_array().cloned().unwrap_or_default();
    requirements.iter().flat_map(|r| r["jwt"].as_array().unwrap().clone()).map(|s| s.as_str().unwrap().to_owned()).collect()
}

/// Every `ingest` route needs a scope (admin routes `standings/admin`), every `query` and
/// `seasons` route is open: the document says what the routers enforce.
#[test]
fn the_document_names_the_scope_each_route_needs() {
    let document = document();
    for operation in [operations(ingest::routes().listed()), operations(void::routes().listed())].concat() {
        let scope = if operation.1.starts_with("/v1/admin/") { "standings/admin" } else { "standings/write" };
        assert_eq!(scopes(&document, &operation), [scope], "{operation:?}");
    }
    for operation in [operations(query::routes().listed()), operations(seasons::routes().listed())].concat() {
        assert_eq!(scopes(&document, &operation), Vec::<String>::new(), "{operation:?} is open");
    }
    let (ready, pending) = described(&document);
    for operation in ready.iter().chain(&pending).filter(|(_, path)| path.starts_with("/v1/admin/")) {
        assert_eq!(scopes(&document, operation), ["standings/admin"], "{operation:?}");
    }
}

/// The real OpenAPI 3.1 schema, through `openapi-spec-validator` (installed by scripts/test.sh):
/// structure, `$ref`s that resolve, every path parameter declared.
#[test]
fn the_document_is_valid_openapi_3_1() {
    let output =
        std::process::Command::new("python3").args(["-m", "openapi_spec_validator", DOCUMENT_PATH]).output().expect("python3 runs");
    assert!(
        output.status.success(),
        "openapi-spec-validator refused the document:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(document()["openapi"], "3.1.0");
}

#[tokio::test]
async fn query_serves_the_document_with_a_cache_header() {
    let app = spawn_ingest().await;
    let (status, headers, body) = app.fetch_query(Method::GET, "/v1/openapi.json").await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["cache-control"], "public, max-age=300");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), document());
}

/// One recorded answer: the operation as the document names it, and what came back.
pub(crate) fn sample(method: &str, template: &str, (status, body): (StatusCode, Value)) -> Value {
    json!({"method": method, "path": template, "status": status.as_u16(), "body": body})
}

/// Real answers of both routers, success and error, checked against the document's schemas
/// by tests/openapi/conforms.py (JSON Schema 2020-12): the schemas cannot drift either.
#[tokio::test]
async fn real_answers_match_the_documented_schemas() {
    let app = spawn_ingest().await;
    let event =
        |id: &str, user: &str, action: &str, target: &str| json!({"event_id": id, "user_id": user, "action": action, "target": target});
    let first = event("e1", "u1", "comment", "a1");
    let mut samples = vec![
        sample("post", "/v1/events", app.event(first.clone()).await),
        sample("post", "/v1/events", app.event(first.clone()).await),
        sample("post", "/v1/events", app.event(event("e1", "u1", "praise", "a1")).await),
        sample("post", "/v1/events", app.event(event("e2", "u1", "dance", "a1")).await),
        sample("post", "/v1/events", app.call(Method::POST, "/v1/events", "{", WRITER).await),
        sample("post", "/v1/events", app.call(Method::POST, "/v1/events", first.to_string(), Caller::Anonymous).await),
        sample("post", "/v1/events", app.call(Method::POST, "/v1/events", first.to_string(), Caller::Scopes(&["other"])).await),
        sample("post", "/v1/events", app.event(event("e3", "u2", "praise", "a1")).await),
        sample("post", "/v1/events", app.event(event("e4", "u3", "invite", "u3-friend")).await),
    ];
    let batch = json!({"events": [event("b1", "u2", "comment", "a2"), event("e1", "u1", "follow", "a1")]});
    samples.push(sample("post", "/v1/events:batch", app.post("/v1/events:batch", &batch).await));
    let too_many: Vec<Value> = (0..501).map(|i| event(&format!("x{i}"), "u9", "comment", "a")).collect();
    samples.push(sample("post", "/v1/events:batch", app.post("/v1/events:batch", &json!({"events": too_many})).await));
    let profile = json!({"nickname": "One", "avatar_url": "https://example.com/1.png", "title": "Champion"});
    samples.push(sample(
        "put",
        "/v1/users/{user_id}/profile",
        app.call(Method::PUT, "/v1/users/u1/profile", profile.to_string(), WRITER).await,
    ));
    let bad_profile = json!({"avatar_url": "ftp://example.com/1.png"}).to_string();
    samples.push(sample("put", "/v1/users/{user_id}/profile", app.call(Method::PUT, "/v1/users/u1/profile", bad_profile, WRITER).await));

    for path in ["/v1/boards/activity/top", "/v1/boards/invites/top", "/v1/boards/nope/top", "/v1/boards/activity/top?limit=0"] {
        samples.push(sample("get", "/v1/boards/{board}/top", app.get(path).await));
    }
    for path in ["/v1/boards/activity/users/u1?around=2", "/v1/boards/activity/users/nobody", "/v1/boards/activity/users/u1?period=week"] {
        samples.push(sample("get", "/v1/boards/{board}/users/{user_id}", app.get(path).await));
    }
    let ranks = json!({"user_ids": ["u1", "u2", "nobody"]}).to_string();
    samples.push(sample("post", "/v1/boards/{board}/ranks", app.call_query(Method::POST, "/v1/boards/activity/ranks", ranks).await));
    let too_many = json!({"user_ids": (0..501).map(|i| format!("u{i}")).collect::<Vec<_>>()}).to_string();
    samples.push(sample("post", "/v1/boards/{board}/ranks", app.call_query(Method::POST, "/v1/boards/activity/ranks", too_many).await));
    for path in
        ["/v1/boards/activity/distribution?buckets=3", "/v1/boards/points/distribution", "/v1/boards/activity/distribution?buckets=0"]
    {
        samples.push(sample("get", "/v1/boards/{board}/distribution", app.get(path).await));
    }
    samples.push(sample("get", "/v1/boards", app.get("/v1/boards").await));
    samples.push(sample("get", "/assets/{file}", app.get("/assets/nope").await));
    let heat = json!({"event_id": "h1", "delta": 2}).to_string();
    samples.push(sample(
        "post",
        "/v1/hot/{board}/items/{item_id}",
        app.call(Method::POST, "/v1/hot/hot-videos/items/v1", heat, WRITER).await,
    ));
    let too_hot = json!({"delta": 10_001}).to_string();
    samples.push(sample(
        "post",
        "/v1/hot/{board}/items/{item_id}",
        app.call(Method::POST, "/v1/hot/hot-videos/items/v1", too_hot, WRITER).await,
    ));
    for path in ["/v1/hot/hot-videos", "/v1/hot/activity", "/v1/hot/hot-videos?limit=0"] {
        samples.push(sample("get", "/v1/hot/{board}", app.get(path).await));
    }
    samples.push(sample("get", "/v1/health", app.get("/v1/health").await));
    // The league board (`xp`, weekly cohorts): its week read like any period, and its routes.
    for (id, user) in [("x1", "u1"), ("x2", "u2"), ("x3", "u2")] {
        let lesson = json!({"event_id": id, "user_id": user, "action": "lesson", "target": id});
        samples.push(sample("post", "/v1/events", app.event(lesson).await));
    }
    samples.push(sample("get", "/v1/boards/{board}/top", app.get("/v1/boards/xp/top?period=week").await));
    samples.push(sample("get", "/v1/boards/{board}/users/{user_id}", app.get("/v1/boards/xp/users/u1?period=week").await));
    for path in ["/v1/boards/xp/users/u1/league", "/v1/boards/xp/users/nobody/league", "/v1/boards/activity/users/u1/league"] {
        samples.push(sample("get", "/v1/boards/{board}/users/{user_id}/league", app.get(path).await));
    }
    samples.push(sample(
        "get",
        "/v1/boards/{board}/users/{user_id}/league/history",
        app.get("/v1/boards/xp/users/u1/league/history").await,
    ));
    for path in ["/v1/boards/xp/leagues", "/v1/boards/xp/leagues?tier=bronze", "/v1/boards/xp/leagues?tier=nope"] {
        samples.push(sample("get", "/v1/boards/{board}/leagues", app.get(path).await));
    }
    for path in ["/v1/boards/points/users/u1/statement?period=season", "/v1/boards/nope/users/u1/statement"] {
        samples.push(sample("get", "/v1/boards/{board}/users/{user_id}/statement", app.get(path).await));
    }

    let sign_in = json!({"event_id": "s1", "user_id": "u1"});
    samples.push(sample("post", "/v1/sign-ins", app.post("/v1/sign-ins", &sign_in).await));
    samples.push(sample("post", "/v1/sign-ins", app.post("/v1/sign-ins", &sign_in).await));
    samples.push(sample("post", "/v1/sign-ins", app.post("/v1/sign-ins", &json!({"event_id": "s1", "user_id": "u2"})).await));
    samples.push(sample(
        "post",
        "/v1/sign-ins",
        app.post("/v1/sign-ins", &json!({"event_id": "s2", "user_id": "u1", "date": "2026-01-01"})).await,
    ));
    samples.push(sample("post", "/v1/sign-ins", app.post("/v1/sign-ins", &json!({"event_id": "s3", "user_id": "u1", "day": "x"})).await));
    for path in ["/v1/users/u1/sign-ins", "/v1/users/u1/sign-ins?month=2026-10", "/v1/users/u1/sign-ins?month=2026-13"] {
        samples.push(sample("get", "/v1/users/{user_id}/sign-ins", app.get(path).await));
    }
    let correction = |delta: i64| json!({"delta": delta, "reason": "manual fix"}).to_string();
    let corrections = "/v1/admin/boards/activity/users/u1/corrections";
    samples.push(sample(
        "post",
        "/v1/admin/boards/{board}/users/{user_id}/corrections",
        app.call(Method::POST, corrections, correction(2), ADMIN).await,
    ));
    samples.push(sample(
        "post",
        "/v1/admin/boards/{board}/users/{user_id}/corrections",
        app.call(Method::POST, corrections, correction(-1000), ADMIN).await,
    ));
    let unknown = "/v1/admin/boards/nope/users/u1/corrections";
    samples.push(sample(
        "post",
        "/v1/admin/boards/{board}/users/{user_id}/corrections",
        app.call(Method::POST, unknown, correction(1), ADMIN).await,
    ));
    samples.push(sample(
        "post",
        "/v1/admin/boards/{board}/users/{user_id}/corrections",
        app.call(Method::POST, corrections, correction(1), WRITER).await,
    ));
    samples.push(sample("post", "/v1/admin/users/{user_id}/ban", app.call(Method::POST, "/v1/admin/users/u3/ban", "", ADMIN).await));
    samples.push(sample(
        "post",
        "/v1/admin/users/{user_id}/ban",
        app.call(Method::POST, "/v1/admin/users/u3/ban", "", Caller::Anonymous).await,
    ));
    samples.push(sample("delete", "/v1/admin/users/{user_id}/ban", app.call(Method::DELETE, "/v1/admin/users/u3/ban", "", ADMIN).await));
    samples.push(sample("get", "/v1/admin/audit", app.call(Method::GET, "/v1/admin/audit?board=activity", "", ADMIN).await));
    samples.push(sample("get", "/v1/admin/audit", app.call(Method::GET, "/v1/admin/audit?board=activity&limit=0", "", ADMIN).await));

    let limited =
        spawn_ingest_with(arena(r#"[{ action = "win", points = 1, scope = "none", rate_limit = { max = 1, per_secs = 60 } }]"#)).await;
    let win = |id: &str| json!({"event_id": id, "user_id": "u1", "action": "win"});
    limited.event(win("w1")).await;
    samples.push(sample("post", "/v1/events", limited.event(win("w2")).await));
    samples.push(sample("post", "/v1/events:batch", limited.post("/v1/events:batch", &json!({"events": [win("w3")]})).await));

    let down = spawn_ingest_on(Config::default_boards(), "redis://127.0.0.1:1").await;
    samples.push(sample("post", "/v1/events", down.event(event("e5", "u1", "comment", "a1")).await));
    samples.push(sample("get", "/v1/boards/{board}/top", down.get("/v1/boards/activity/top").await));
    samples.push(sample("get", "/v1/health", down.get("/v1/health").await));

    let statuses: BTreeSet<u64> = samples.iter().map(|s| s["status"].as_u64().unwrap()).collect();
    assert_eq!(statuses, BTreeSet::from([200, 400, 401, 403, 404, 409, 413, 422, 429, 503]), "every documented status is exercised");

    conform(&samples);
}

/// Checks recorded answers against the document's schemas (tests/openapi/conforms.py).
pub(crate) fn conform(samples: &[Value]) {
    let file = std::env::temp_dir().join(format!("standings-openapi-samples-{}.json", standings_tests::unique_prefix()));
    std::fs::write(&file, serde_json::to_vec(samples).unwrap()).unwrap();
    let output = std::process::Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/conforms.py"))
        .arg(DOCUMENT_PATH)
        .arg(&file)
        .output()
        .expect("python3 runs");
    std::fs::remove_file(&file).unwrap();
    assert!(
        output.status.success(),
        "answers that do not match the document:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
