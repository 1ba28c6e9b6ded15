//! The OpenAPI document against the routers. Both functions build their routers from
//! `routes()`; the document must describe exactly those (method, path) pairs. An operation
//! marked `x-standings-pending: true` is specified but not routed yet: it must stay unrouted
//! while marked, so the marker is dropped the moment its route lands.

use std::collections::BTreeSet;

use axum::http::Method;
use serde_json::Value;
use standings_tests::spawn_ingest;

type Operation = (String, String);

const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

fn document() -> Value {
    serde_json::from_str(query::web::OPENAPI).expect("functions/query/src/openapi.json is JSON")
}

/// (described and routed, described but pending)
fn described(document: &Value) -> (BTreeSet<Operation>, BTreeSet<Operation>) {
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

fn operations(routes: &[(Method, &'static str)]) -> Vec<Operation> {
    routes.iter().map(|(method, path)| (method.as_str().to_lowercase(), path.to_string())).collect()
}

fn routed() -> Vec<Operation> {
    [operations(ingest::routes().listed()), operations(query::routes().listed())].concat()
}

#[test]
fn the_document_describes_exactly_the_routes_of_both_functions() {
    let routed_list = routed();
    let routed: BTreeSet<Operation> = routed_list.iter().cloned().collect();
    assert_eq!(routed.len(), routed_list.len(), "ingest and query share one API: no (method, path) may be routed twice");
    let (ready, pending) = described(&document());

    let undescribed: Vec<_> = routed.iter().filter(|op| !ready.contains(*op) && !pending.contains(*op)).collect();
    assert!(undescribed.is_empty(), "routed but missing from functions/query/src/openapi.json: {undescribed:?}");
    let landed: Vec<_> = routed.intersection(&pending).collect();
    assert!(landed.is_empty(), "routed now: drop `x-standings-pending` from {landed:?}");
    let unrouted: Vec<_> = ready.difference(&routed).collect();
    assert!(unrouted.is_empty(), "described but routed by neither function (mark `x-standings-pending: true` until it lands): {unrouted:?}");
}

fn scopes(document: &Value, (method, path): &Operation) -> Vec<String> {
    let requirements = document["paths"][path][method]["security"].as_array().cloned().unwrap_or_default();
    requirements.iter().flat_map(|r| r["jwt"].as_array().unwrap().clone()).map(|s| s.as_str().unwrap().to_owned()).collect()
}

/// Every `ingest` route needs a scope (admin routes `standings/admin`), every `query` route is
/// open: the document says what the routers enforce.
#[test]
fn the_document_names_the_scope_each_route_needs() {
    let document = document();
    for operation in operations(ingest::routes().listed()) {
        let scope = if operation.1.starts_with("/v1/admin/") { "standings/admin" } else { "standings/write" };
        assert_eq!(scopes(&document, &operation), [scope], "{operation:?}");
    }
    for operation in operations(query::routes().listed()) {
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
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../functions/query/src/openapi.json");
    let output = std::process::Command::new("python3")
        .args(["-m", "openapi_spec_validator", path])
        .output()
        .expect("python3 runs");
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
