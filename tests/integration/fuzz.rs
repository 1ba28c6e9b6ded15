//! Fuzzing request parsing and validation through the real ingest router and the suite's
//! real Redis: arbitrary bytes, arbitrary JSON, and mutations of the valid and tricky requests
//! kept in tests/fuzz/corpus. Whatever comes in, the answer is JSON with a 2xx or 4xx status
//! (Redis is up, so never a 5xx), a 4xx carries `{"error":{"code","message"}}`, and nothing
//! panics.
//!
//! A second test drives every route of both functions through API Gateway v2 events and checks
//! that a 4xx leaves the keyspace unchanged.
//!
//! CI runs a short pass (`STANDINGS_FUZZ_CASES`, default 3000). `./scripts/fuzz.sh [minutes]`
//! runs it for ten minutes or more (`STANDINGS_FUZZ_SECONDS`). A failing input's seed is
//! saved in tests/fuzz/regressions.txt and replayed first by every later run.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use axum::http::Method;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};
use standings_tests::{ADMIN, Caller, TestApp, WRITER, send_as_lambda, spawn_journaled};

const REGRESSIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/regressions.txt");
const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus");

const EVENT_FIELDS: [&str; 7] = ["event_id", "user_id", "action", "target", "active", "occurred_at", "points"];
const PROFILE_FIELDS: [&str; 3] = ["nickname", "avatar_url", "title"];
const SIGN_IN_FIELDS: [&str; 3] = ["event_id", "user_id", "date"];
const HEAT_FIELDS: [&str; 3] = ["event_id", "delta", "occurred_at"];
const SCORE_FIELDS: [&str; 4] = ["event_id", "user_id", "score", "occurred_at"];

#[derive(Debug, Clone)]
struct FuzzRequest {
    method: Method,
    path: String,
    body: Vec<u8>,
    writer: bool,
}

/// Every corpus file as bytes, and those that are JSON as values.
fn corpus() -> (Vec<Vec<u8>>, Vec<Value>) {
    let mut files: Vec<_> = std::fs::read_dir(CORPUS).unwrap().map(|entry| entry.unwrap().path()).collect();
    files.sort();
    let bytes: Vec<Vec<u8>> = files.iter().map(|path| std::fs::read(path).unwrap()).collect();
    let values = bytes.iter().filter_map(|b| serde_json::from_slice(b).ok()).collect();
    (bytes, values)
}

/// Actions of the default boards, and one no board scores.
const ACTIONS: [&str; 12] =
    ["page_view", "praise", "collect", "comment", "follow", "publish", "invite", "learning", "qa", "note", "review", "teleport"];

/// Strings that stress the id allow-lists, times and numbers.
fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z0-9_.:@-]{1,12}", any::<String>(), "[{}/ ?=&%+~#\t\n]{0,6}", "[a-z]{120,140}", time_text(),]
}

/// RFC 3339 times around the harness's clock (2026-11-22T02:00:00Z): late, on time, early.
fn time_text() -> impl Strategy<Value = String> {
    (-3_600i64..600).prop_map(|offset| (standings_tests::at("2026-11-22T02:00:00Z") + chrono::Duration::seconds(offset)).to_rfc3339())
}

/// Plausible values for a field, so mutations reach the checks behind the types.
fn value_for(field: &'static str) -> BoxedStrategy<Value> {
    match field {
        "action" => prop::sample::select(ACTIONS.to_vec()).prop_map(Value::from).boxed(),
        "active" => any::<bool>().prop_map(Value::from).boxed(),
        "points" | "delta" => (-5i64..5_000_000).prop_map(Value::from).boxed(),
        "score" => prop_oneof![(-5i64..100_000), (1_073_741_800i64..1_073_741_830)].prop_map(Value::from).boxed(),
        "occurred_at" => time_text().prop_map(Value::from).boxed(),
        "date" => (-3i64..3)
            .prop_map(|days| (standings_tests::at("2026-11-22T02:00:00Z") + chrono::Duration::days(days)).date_naive().to_string())
            .prop_map(Value::from)
            .boxed(),
        _ => text().prop_map(Value::from).boxed(),
    }
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-10i64..10).prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::vec((prop_oneof![prop::sample::select(EVENT_FIELDS.to_vec()).prop_map(String::from), text()], inner), 0..6)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

#[derive(Debug, Clone)]
enum Mutation {
    Set(&'static str, Value),
    Remove(&'static str),
    AddUnknown(String, Value),
}

/// A corpus object with `fields` set to plausible or odd values, removed, or joined by an
/// unknown field.
fn mutated(objects: Vec<Value>, fields: &'static [&'static str]) -> impl Strategy<Value = Value> + Clone {
    let mutation = prop_oneof![
        6 => prop::sample::select(fields)
            .prop_flat_map(|field| prop_oneof![2 => value_for(field), 1 => json_leaf().boxed()].prop_map(move |v| Mutation::Set(field, v))),
        1 => prop::sample::select(fields).prop_map(Mutation::Remove),
        1 => ("[a-z_]{1,12}", json_leaf()).prop_map(|(f, v)| Mutation::AddUnknown(f, v)),
    ];
    (prop::sample::select(objects), prop::collection::vec(mutation, 0..4)).prop_map(|(mut value, mutations)| {
        let object: &mut Map<String, Value> = value.as_object_mut().unwrap();
        for mutation in mutations {
            match mutation {
                Mutation::Set(field, v) => object.insert(field.to_owned(), v),
                Mutation::Remove(field) => object.remove(field),
                Mutation::AddUnknown(field, v) => object.insert(field, v),
            };
        }
        value
    })
}

/// Corpus bytes with a few bytes overwritten, inserted or cut.
fn byte_mutated(files: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (prop::sample::select(files), prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4)).prop_map(
        |(mut bytes, edits)| {
            for (at, byte, kind) in edits {
                let i = at.index(bytes.len() + 1);
                match kind {
                    0 if i < bytes.len() => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    _ if i < bytes.len() => drop(bytes.remove(i)),
                    _ => {}
                }
            }
            bytes
        },
    )
}

/// Percent-encodes everything but unreserved characters, so any text makes a valid path.
fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

fn requests() -> impl Strategy<Value = FuzzRequest> {
    let (files, values) = corpus();
    // The corpus objects made of `fields` only.
    let of = |fields: &[&str]| {
        let objects = values.iter().filter(|v| v.as_object().is_some_and(|o| o.keys().all(|k| fields.contains(&k.as_str()))));
        objects.cloned().collect::<Vec<_>>()
    };
    let event = mutated(of(&EVENT_FIELDS), &EVENT_FIELDS);
    let junk = prop_oneof![
        json_value().prop_map(|v| v.to_string().into_bytes()),
        byte_mutated(files),
        prop::collection::vec(any::<u8>(), 0..256),
    ];
    let any_route = prop_oneof![
        Just((Method::POST, "/v1/events".to_owned())),
        Just((Method::POST, "/v1/events:batch".to_owned())),
        Just((Method::POST, "/v1/boards/high-scores/scores".to_owned())),
        Just((Method::POST, "/v1/boards/lap-times/scores:batch".to_owned())),
        text().prop_map(|user| (Method::PUT, format!("/v1/users/{}/profile", encode(&user)))),
        (prop::sample::select(vec![Method::GET, Method::DELETE, Method::PATCH, Method::POST]), text())
            .prop_map(|(method, tail)| (method, format!("/v1/{}", encode(&tail)))),
    ];
    let request = prop_oneof![
        4 => event.clone().prop_map(|e| (Method::POST, "/v1/events".to_owned(), e.to_string().into_bytes())),
        1 => prop::collection::vec(event, 0..4)
            .prop_map(|events| (Method::POST, "/v1/events:batch".to_owned(), json!({ "events": events }).to_string().into_bytes())),
        1 => (text(), mutated(of(&PROFILE_FIELDS), &PROFILE_FIELDS))
            .prop_map(|(user, p)| (Method::PUT, format!("/v1/users/{}/profile", encode(&user)), p.to_string().into_bytes())),
        1 => mutated(of(&SIGN_IN_FIELDS), &SIGN_IN_FIELDS).prop_map(|s| (Method::POST, "/v1/sign-ins".to_owned(), s.to_string().into_bytes())),
        1 => (prop_oneof![Just("hot-videos".to_owned()), text()], text(), mutated(of(&HEAT_FIELDS), &HEAT_FIELDS)).prop_map(
            |(board, item, h)| (Method::POST, format!("/v1/hot/{}/items/{}", encode(&board), encode(&item)), h.to_string().into_bytes())
        ),
        2 => (prop::sample::select(vec!["high-scores", "lap-times", "points", "nope"]), mutated(of(&SCORE_FIELDS), &SCORE_FIELDS))
            .prop_map(|(board, s)| (Method::POST, format!("/v1/boards/{board}/scores"), s.to_string().into_bytes())),
        1 => (prop::sample::select(vec!["high-scores", "lap-times"]), prop::collection::vec(mutated(of(&SCORE_FIELDS), &SCORE_FIELDS), 0..4))
            .prop_map(|(board, scores)| (Method::POST, format!("/v1/boards/{board}/scores:batch"), json!({ "scores": scores }).to_string().into_bytes())),
        2 => (any_route, junk).prop_map(|((method, path), body)| (method, path, body)),
    ];
    (request, prop::bool::weighted(0.95)).prop_map(|((method, path, body), writer)| FuzzRequest { method, path, body, writer })
}

async fn check(app: &TestApp, request: FuzzRequest, statuses: &RefCell<BTreeMap<u16, u64>>) -> Result<(), TestCaseError> {
    let caller = if request.writer { WRITER } else { Caller::Anonymous };
    // The harness fails the case on a body that is not JSON.
    let (status, body) = app.call(request.method.clone(), &request.path, request.body.clone(), caller).await;
    *statuses.borrow_mut().entry(status.as_u16()).or_default() += 1;
    prop_assert!(status.is_success() || status.is_client_error(), "{status} for {request:?}: {body}");
    if status.is_client_error() {
        let error = &body["error"];
        prop_assert!(error["code"].as_str().is_some_and(|c| !c.is_empty()), "{request:?}: {body}");
        prop_assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{request:?}: {body}");
    } else if request.path == "/v1/events" {
        let sent: Value = serde_json::from_slice(&request.body).unwrap();
        prop_assert_eq!(&body["event_id"], &sent["event_id"]);
        prop_assert!(body["results"].as_array().is_some_and(|r| !r.is_empty()), "{body}");
    }
    Ok(())
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name} must be a number")))
}

/// Runs `check` on `cases` generated requests against one app (the variable `cases_var`, else
/// `default_cases`), then more rounds while `STANDINGS_FUZZ_SECONDS` lasts; a failing seed is
/// kept in the regressions file. Prints what was answered.
fn campaign<T: std::fmt::Debug, S: Strategy<Value = T>, F: std::future::Future<Output = Result<(), TestCaseError>>>(
    name: &str,
    cases_var: &str,
    default_cases: u64,
    strategy: impl Fn() -> S,
    check: impl Fn(Rc<TestApp>, T, Rc<RefCell<BTreeMap<u16, u64>>>) -> F,
) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // Journaled, so the void route reads a journal (and every write appends to one).
    let app = Rc::new(runtime.block_on(spawn_journaled(standings::domain::config::Config::default_boards())));
    let cases = env_number(cases_var).unwrap_or(default_cases) as u32;
    let budget = env_number("STANDINGS_FUZZ_SECONDS").map(Duration::from_secs);
    let started = Instant::now();
    let statuses = Rc::new(RefCell::new(BTreeMap::new()));
    let mut rounds = 0u64;
    loop {
        let config =
            Config { cases, failure_persistence: Some(Box::new(FileFailurePersistence::Direct(REGRESSIONS))), ..Config::default() };
        if let Err(failure) =
            TestRunner::new(config).run(&strategy(), |request| runtime.block_on(check(app.clone(), request, statuses.clone())))
        {
            panic!("{failure}");
        }
        rounds += 1;
        if budget.is_none_or(|budget| started.elapsed() >= budget) {
            break;
        }
    }
    println!("{name}: {} cases in {:.0?}, answers by status: {:?}", rounds * u64::from(cases), started.elapsed(), statuses.borrow());
}

#[test]
fn any_request_gets_json_with_a_2xx_or_4xx_status() {
    campaign("fuzz", "STANDINGS_FUZZ_CASES", 3000, requests, |app, request, statuses| async move { check(&app, request, &statuses).await });
}

/// One request to any route of either function, as the route table lists them.
#[derive(Debug, Clone)]
struct RouteRequest {
    function: &'static str,
    method: Method,
    path: String,
    query: String,
    body: Vec<u8>,
    caller: u8,
}

/// Query parameters the read routes take, with values of every kind.
const QUERY_KEYS: [&str; 9] = ["period", "at", "limit", "offset", "around", "rank_mode", "month", "include_missing", "buckets"];

/// Fills a route template's `{param}` segments: mostly names the boards and users really
/// have, otherwise anything.
fn filled(template: &'static str) -> impl Strategy<Value = String> {
    let segments: Vec<BoxedStrategy<String>> = template
        .split('/')
        .map(|segment| match segment {
            "{board}" => {
                prop_oneof![prop::sample::select(vec!["activity", "invites", "points", "hot-videos"]).prop_map(str::to_owned), text()]
                    .prop_map(|s| encode(&s))
                    .boxed()
            }
            "{season}" => prop_oneof![Just("2026-10".to_owned()), time_text(), text()].prop_map(|s| encode(&s)).boxed(),
            s if s.starts_with('{') => prop_oneof![Just("u1".to_owned()), text()].prop_map(|s| encode(&s)).boxed(),
            s => Just(s.to_owned()).boxed(),
        })
        .collect();
    segments.prop_map(|parts| parts.join("/"))
}

fn every_route() -> impl Strategy<Value = RouteRequest> {
    let (files, values) = corpus();
    let mut routes: Vec<(&'static str, Method, &'static str)> = Vec::new();
    routes.extend(ingest::routes().listed().iter().map(|(m, p)| ("ingest", m.clone(), *p)));
    routes.extend(query::routes().listed().iter().map(|(m, p)| ("query", m.clone(), *p)));
    routes.extend(seasons::routes().listed().iter().map(|(m, p)| ("seasons", m.clone(), *p)));
    routes.extend(void::routes().listed().iter().map(|(m, p)| ("void", m.clone(), *p)));
    let route = prop::sample::select(routes).prop_flat_map(|(function, method, template)| (Just(function), Just(method), filled(template)));
    let query = prop::collection::vec((prop::sample::select(QUERY_KEYS.to_vec()), prop_oneof![text(), "[0-9-]{1,12}"]), 0..3)
        .prop_map(|pairs| pairs.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect::<Vec<_>>().join("&"));
    let body = prop_oneof![
        3 => prop::sample::select(values).prop_map(|v| v.to_string().into_bytes()),
        2 => json_value().prop_map(|v| v.to_string().into_bytes()),
        1 => byte_mutated(files),
        1 => prop::collection::vec(any::<u8>(), 0..64),
        1 => Just(Vec::new()),
    ];
    (route, query, body, 0u8..3).prop_map(|((function, method, path), query, body, caller)| RouteRequest {
        function,
        method,
        path,
        query,
        body,
        caller,
    })
}

async fn check_route(app: &TestApp, request: RouteRequest, statuses: &RefCell<BTreeMap<u16, u64>>) -> Result<(), TestCaseError> {
    let caller = [Caller::Anonymous, WRITER, ADMIN][usize::from(request.caller)];
    // The void function's router, over the campaign's one app, reading a bucket of its own.
    static VOID: tokio::sync::OnceCell<axum::Router> = tokio::sync::OnceCell::const_new();
    let void = VOID
        .get_or_init(|| async {
            let client = standings_tests::journal::s3().await;
            let bucket = standings_tests::journal::new_bucket(&client).await;
            app.void_router(&client, Some(&bucket), 30)
        })
        .await;
    let router = match request.function {
        "ingest" => &app.router,
        "void" => void,
        _ => &app.query,
    };
    let before = app.keyspace().await;
    let (status, body) = send_as_lambda(router, &request.method, &request.path, &request.query, &request.body, caller).await;
    *statuses.borrow_mut().entry(status.as_u16()).or_default() += 1;
    prop_assert!(status.is_success() || status.is_client_error(), "{status} for {request:?}: {body}");
    if status.is_client_error() {
        prop_assert!(body["error"]["code"].as_str().is_some_and(|c| !c.is_empty()), "{request:?}: {body}");
        // Keys that expire meanwhile (short-lived markers) are not a write: both snapshots are
        // compared on the keys still alive after the second (-1: no expiry; -2: gone while a
        // snapshot was taken).
        let after = app.keyspace().await;
        let (now_s, now_us): (i64, i64) = redis::cmd("TIME").query_async(&mut app.redis.clone()).await.unwrap();
        let now_ms = now_s * 1000 + now_us / 1000;
        let alive = |state: Vec<(String, Vec<u8>, i64)>| -> Vec<_> {
            state.into_iter().filter(|(_, _, expires)| *expires == -1 || *expires > now_ms).collect()
        };
        let (still_alive, after) = (alive(before), alive(after));
        let changed: Vec<_> = after
            .iter()
            .filter(|k| !still_alive.contains(k))
            .chain(still_alive.iter().filter(|k| !after.contains(k)))
            .map(|(key, _, expires)| (key, expires))
            .collect();
        prop_assert!(changed.is_empty(), "a {status} wrote to the store ({changed:?}, now {now_ms}): {request:?}: {body}");
    }
    Ok(())
}

/// Every route of both functions (read, write and admin), driven through the API Gateway v2
/// event path Lambda uses: never a 5xx or a panic, and a 4xx leaves the keyspace exactly as it
/// was (every key, value and expiry). `STANDINGS_FUZZ_ROUTE_CASES` cases (default 300), more
/// while `STANDINGS_FUZZ_SECONDS` lasts.
#[test]
fn every_route_answers_2xx_or_4xx_and_a_4xx_writes_nothing() {
    campaign("fuzz (every route)", "STANDINGS_FUZZ_ROUTE_CASES", 300, every_route, |app, request, statuses| async move {
        check_route(&app, request, &statuses).await
    });
}
