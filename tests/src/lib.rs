//! Test harness: a `spawn_app`-style helper that wires the real router to the real Redis
//! started by `scripts/test.sh`, with a key prefix of its own per test so tests run in
//! parallel on one server, and an injectable clock. Archive tests also get a DynamoDB table of
//! their own on the real moto_server the script starts (`ArchiveHarness`).
//!
//! The suite reaches Redis exactly as the functions do, through `REDIS_URL` / `REDIS_CLUSTER`
//! (`RedisSettings::from_env`): scripts/test.sh runs it once against a standalone server and
//! once against a 6-node cluster. The harness's own assertion connection is cluster-aware too.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use aws_lambda_events::eventbridge::EventBridgeEvent;
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use chrono::{DateTime, Utc};
use http_body_util::BodyExt;
use lambda_http::request::RequestContext;
use serde_json::{Value, json};
use standings::archive::table::SeasonTable;
use standings::domain::config::Config;
use standings::domain::period::Period;
use standings::domain::tiebreak;
use standings::http::{ADMIN_SCOPE, AuthMode, WRITE_SCOPE};
use standings::redis::keys::Keys;
use standings::redis::settings::RedisSettings;
use standings::redis::store::{Connection, Store};
use tower::ServiceExt;

pub mod archive;
pub use archive::{ArchiveHarness, Member, season_members, seed_board, unique_season_table};
pub mod cluster;
pub mod journal;
pub mod league;
pub use journal::spawn_journaled;
pub mod load;
pub mod model;
pub mod moves;
pub mod notify;
pub mod proxy;
pub mod queue;
pub mod runtime;
pub mod servers;
pub mod sharded;
pub mod sim;
pub mod tournament;

/// The Redis every integration test talks to.
pub fn redis_url() -> String {
    std::env::var("REDIS_URL").expect("REDIS_URL is not set: run the suite with scripts/test.sh, which starts redis-server")
}

/// The suite's Redis as the functions would read it from the environment (standalone or
/// cluster, plain or TLS).
pub fn redis_settings() -> RedisSettings {
    redis_url();
    RedisSettings::from_env().expect("the suite's REDIS_* variables are valid")
}

/// A prefix no other test (or earlier run) uses.
pub fn unique_prefix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("t{}-{}-{}", std::process::id(), nanos % 1_000_000_000, COUNTER.fetch_add(1, Ordering::Relaxed))
}

pub fn at(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339).expect("valid RFC 3339").with_timezone(&Utc)
}

/// The write (`ingest`) and read (`query`) functions over one Redis prefix and one clock.
pub struct TestApp {
    pub router: Router,
    pub query: Router,
    pub keys: Keys,
    pub store: Store,
    /// The assertion connection (standalone or cluster, like the app's).
    pub redis: Connection,
    pub(crate) now: Arc<Mutex<DateTime<Utc>>>,
    pub config: Arc<Config>,
    /// The EMF metric lines the `ingest` function wrote, parsed.
    pub metrics: Arc<Mutex<Vec<Value>>>,
}

/// Scopes a request carries, as API Gateway's JWT authorizer would pass them.
#[derive(Clone, Copy)]
pub enum Caller<'a> {
    Anonymous,
    Scopes(&'a [&'a str]),
}

pub const WRITER: Caller<'static> = Caller::Scopes(&[WRITE_SCOPE]);
/// An admin; its token's `sub` is `tester` (see `request_context`).
pub const ADMIN: Caller<'static> = Caller::Scopes(&[ADMIN_SCOPE]);

/// A configuration of one board, `arena`: all-time, UTC, top 10, with `rules` (a TOML array).
pub fn arena(rules: &str) -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"arena\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nrules = {rules}"
    ))
    .expect("a valid arena configuration")
}

pub async fn spawn_ingest() -> TestApp {
    spawn_ingest_with(Config::default_boards()).await
}

pub async fn spawn_ingest_with(config: Config) -> TestApp {
    spawn_ingest_at(config, &redis_settings()).await
}

/// An app whose store is at `store_url` (e.g. a port nothing listens on); assertions still
/// read the suite's Redis.
pub async fn spawn_ingest_on(config: Config, store_url: &str) -> TestApp {
    let store = Store::connect(&RedisSettings::standalone(store_url)).unwrap();
    spawn_ingest_with_stores(config, store, Store::connect(&redis_settings()).unwrap()).await
}

/// An app, and assertions, on the Redis `settings` describe (a server a test started itself).
/// Assertions use a store of their own, so they never count as the app's round trips.
pub async fn spawn_ingest_at(config: Config, settings: &RedisSettings) -> TestApp {
    spawn_ingest_with_stores(config, Store::connect(settings).unwrap(), Store::connect(settings).unwrap()).await
}

/// An app on `store`, with assertions on `assertions`.
pub async fn spawn_ingest_with_stores(config: Config, store: Store, assertions: Store) -> TestApp {
    spawn_app(config, Keys::new(&unique_prefix()).unwrap(), store, assertions, None).await
}

/// The app on given keys; its `seasons` function reads archived seasons from `archive`, if any.
pub(crate) async fn spawn_app(config: Config, keys: Keys, store: Store, assertions: Store, archive: Option<SeasonTable>) -> TestApp {
    spawn_app_born(config, keys, store, assertions, archive, true).await
}

/// `spawn_app`; a journaled one's boards marked born (what a function's start does for a new
/// deployment, `births::at_start`) only when `born`.
pub(crate) async fn spawn_app_born(
    config: Config,
    keys: Keys,
    store: Store,
    assertions: Store,
    archive: Option<SeasonTable>,
    born: bool,
) -> TestApp {
    let now = Arc::new(Mutex::new(at("2026-11-22T10:00:00+08:00")));
    let config = Arc::new(config);
    let clock = clock_of(&now);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let metrics = standings::runtime::metrics::Metrics::with_sink(
        "ingest",
        Arc::new(move |line: String| sink.lock().unwrap().push(serde_json::from_str(&line).expect("an EMF line is JSON"))),
    );
    let ingest = ingest::App::new(config.clone(), keys.clone(), store.clone(), clock.clone(), AuthMode::Jwt, metrics);
    let query = query::App::new(config.clone(), keys.clone(), store.clone(), clock.clone());
    let seasons = seasons::App::new(config.clone(), keys.clone(), store.clone(), archive, clock);
    let mut redis = assertions.connection().await.expect("the assertion connection reaches Redis");
    // What the journal's first drain does for a new deployment: no profile of the layout before
    // profile shards to move (docs/journal.md#profiles).
    let _: () = redis::cmd("SET").arg(keys.profiles_moved()).arg(1).query_async(&mut redis).await.unwrap();
    if keys.journal_on() && born {
        // What a function's start does for a new deployment (docs/journal.md#fence): its
        // journal holds nothing yet, so every board takes journaled writes.
        // The runtime boards' catalog (docs/runtime-boards.md) likewise.
        let catalog = [(keys.catalog(), standings::redis::keys::CATALOG_JOURNAL.to_owned())];
        let layouts = config.boards().iter().map(|board| keys.layout(&board.name, board.shards));
        for (shard, name) in layouts.flat_map(|layout| layout.all().into_iter().zip(layout.journals())).chain(catalog) {
            let role = standings::redis::restore::birth::role(&mut redis, &keys, &name).await.unwrap();
            let _: () =
                redis::cmd("HSET").arg(shard.guard()).arg(standings::domain::guard::BORN).arg(1).query_async(&mut redis).await.unwrap();
            // A new board's sharded layout is recorded as it is born, as the start does.
            if role == standings::redis::restore::birth::Role::Unrecorded {
                standings::services::journal::births::record_birth(&mut redis, &config, &keys, &name, &shard).await.unwrap();
            }
        }
    }
    TestApp {
        router: ingest::router(Arc::new(ingest)),
        query: read_router(query, seasons),
        keys,
        store,
        redis,
        now,
        config,
        metrics: lines,
    }
}

/// The read functions behind one router, as the HTTP API puts them behind one host.
pub(crate) fn read_router(query: query::App, seasons: seasons::App) -> axum::Router {
    let routes = query::routes().into_router().with_state(Arc::new(query));
    standings::http::finish(routes.merge(seasons::routes().into_router().with_state(Arc::new(seasons))))
}

pub(crate) fn clock_of(now: &Arc<Mutex<DateTime<Utc>>>) -> standings::Clock {
    let now = now.clone();
    Arc::new(move || *now.lock().unwrap())
}

/// The EventBridge schedule's event for the minute of `at`.
pub fn scheduled_event(at: DateTime<Utc>) -> EventBridgeEvent {
    let mut event = EventBridgeEvent::default();
    event.detail_type = "Scheduled Event".into();
    event.source = "aws.events".into();
    event.time = Some(at);
    event
}

/// The `requestContext` API Gateway (HTTP API, payload v2) attaches after its JWT authorizer.
pub fn request_context(caller: Caller<'_>) -> Option<RequestContext> {
    let Caller::Scopes(_) = caller else { return None };
    Some(serde_json::from_value(context_json(&Method::POST, "/", caller)).expect("a valid API Gateway v2 request context"))
}

/// API Gateway v2's request context for `method` `path`, with `caller`'s scopes as the JWT
/// authorizer's claims.
fn context_json(method: &Method, path: &str, caller: Caller<'_>) -> Value {
    let mut context = json!({
        "routeKey": "$default", "accountId": "123456789012", "stage": "$default", "requestId": "r",
        "apiId": "api", "domainName": "example.com", "domainPrefix": "example", "time": "", "timeEpoch": 0,
        "http": {"method": method.as_str(), "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "t"},
    });
    if let Caller::Scopes(scopes) = caller {
        context["authorizer"] = json!({"jwt": {"claims": {"sub": "tester", "scope": scopes.join(" ")}, "scopes": null}});
    }
    context
}

pub(crate) async fn send(
    router: &Router,
    method: Method,
    path: &str,
    body: Body,
    caller: Caller<'_>,
) -> (StatusCode, axum::http::HeaderMap, Value) {
    let mut request = Request::builder().method(method).uri(path).header("content-type", "application/json");
    if let Some(context) = request_context(caller) {
        request = request.extension(context);
    }
    let response = router.clone().oneshot(request.body(body).unwrap()).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("non-JSON body: {:?}", String::from_utf8_lossy(&bytes)));
    (status, headers, value)
}

/// `router` called the way Lambda calls it: an API Gateway v2 HTTP event (the body base64
/// encoded, the caller's scopes as the JWT authorizer's claims), parsed and converted by
/// `lambda_http` exactly as the runtime does before the router sees it.
pub async fn send_as_lambda(
    router: &Router,
    method: &Method,
    path: &str,
    query: &str,
    body: &[u8],
    caller: Caller<'_>,
) -> (StatusCode, Value) {
    use base64::Engine;
    let context = context_json(method, path, caller);
    let event = json!({
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": query,
        "headers": {"content-type": "application/json", "host": "example.com"},
        "requestContext": context,
        "body": base64::engine::general_purpose::STANDARD.encode(body), "isBase64Encoded": true,
    });
    let request = lambda_http::request::from_str(&event.to_string()).expect("lambda_http takes the event");
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, value)
}

impl TestApp {
    /// The `hotness` function on this app's key prefix, store, configuration and clock.
    pub fn hotness(&self) -> hotness::App {
        self.hotness_reporting_to(standings::runtime::metrics::Metrics::with_sink(hotness::FUNCTION, Arc::new(|_| ())))
    }

    /// `hotness` whose metric lines go to `metrics`.
    pub fn hotness_reporting_to(&self, metrics: standings::runtime::metrics::Metrics) -> hotness::App {
        hotness::App::new(self.config.clone(), self.keys.clone(), self.store.clone(), clock_of(&self.now), metrics)
    }

    pub fn set_now(&self, now: DateTime<Utc>) {
        *self.now.lock().unwrap() = now;
    }

    pub fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap()
    }

    pub async fn call(&self, method: Method, path: &str, body: impl Into<Body>, caller: Caller<'_>) -> (StatusCode, Value) {
        let (status, _, value) = self.call_with_headers(method, path, body, caller).await;
        (status, value)
    }

    pub async fn call_with_headers(
        &self,
        method: Method,
        path: &str,
        body: impl Into<Body>,
        caller: Caller<'_>,
    ) -> (StatusCode, axum::http::HeaderMap, Value) {
        send(&self.router, method, path, body.into(), caller).await
    }

    /// Any call to the `query` function (read routes are open).
    pub async fn call_query(&self, method: Method, path: &str, body: impl Into<Body>) -> (StatusCode, Value) {
        let (status, _, value) = send(&self.query, method, path, body.into(), Caller::Anonymous).await;
        (status, value)
    }

    /// A read through the `query` function.
    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let (status, _, value) = self.get_with_headers(path).await;
        (status, value)
    }

    pub async fn get_with_headers(&self, path: &str) -> (StatusCode, axum::http::HeaderMap, Value) {
        send(&self.query, Method::GET, path, Body::empty(), Caller::Anonymous).await
    }

    /// A request to the `query` function whose answer need not be JSON (the page, its assets).
    pub async fn fetch_query(&self, method: Method, path: &str) -> (StatusCode, axum::http::HeaderMap, String) {
        let request = Request::builder().method(method).uri(path).body(Body::empty()).unwrap();
        let response = self.query.clone().oneshot(request).await.unwrap();
        let (status, headers) = (response.status(), response.headers().clone());
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, headers, String::from_utf8(bytes.to_vec()).expect("a text body"))
    }

    pub async fn post(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, body.to_string(), WRITER).await
    }

    pub async fn event(&self, body: Value) -> (StatusCode, Value) {
        self.post("/v1/events", &body).await
    }

    /// Whole points of `user` on `board`'s period sorted set, straight from Redis.
    pub async fn points(&self, board: &str, period: standings::domain::period::Period, user: &str) -> Option<i64> {
        let key = self.keys.board(board).period(&period);
        let composite: Option<f64> = redis::cmd("ZSCORE").arg(key).arg(user).query_async(&mut self.redis.clone()).await.unwrap();
        composite.map(standings::domain::tiebreak::points_of)
    }

    /// Requests one profile read for `user_ids` makes: one pipeline standalone; on a cluster one
    /// per node holding a profile's slot (or the flag that profiles were moved, read beside
    /// them), all sent at once (see `profiles::get_many`).
    pub async fn profile_requests<'a>(&self, user_ids: impl IntoIterator<Item = &'a str>) -> u64 {
        let keys: Vec<String> = user_ids.into_iter().map(|user| self.keys.profile(user)).collect();
        if keys.is_empty() {
            return 0;
        }
        self.nodes_holding(&keys.into_iter().chain([self.keys.profiles_moved()]).collect::<Vec<_>>()).await
    }

    /// How many nodes hold the slots of `keys`: 1 standalone, the primaries holding them on a
    /// cluster (as `CLUSTER SLOTS` says).
    pub async fn nodes_holding(&self, keys: &[String]) -> u64 {
        if !self.store.is_cluster() {
            return 1;
        }
        let ranges: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut self.redis.clone()).await.unwrap();
        let number = |value: &redis::Value| match value {
            redis::Value::Int(n) => *n as u32,
            other => panic!("a slot: {other:?}"),
        };
        let nodes: std::collections::BTreeSet<String> = keys
            .iter()
            .map(|key| {
                let slot = standings::redis::keys::slot(key);
                let range =
                    ranges.iter().find(|range| (number(&range[0])..=number(&range[1])).contains(&slot)).expect("every slot is held");
                format!("{:?}", range[2])
            })
            .collect();
        nodes.len() as u64
    }

    /// A deployment upgraded from a release before profile shards: its profiles are not moved.
    pub async fn unmark_profiles_moved(&self) {
        let _: () = redis::cmd("DEL").arg(self.keys.profiles_moved()).query_async(&mut self.redis.clone()).await.unwrap();
    }

    /// Every key this test wrote (on every primary, in cluster mode).
    pub async fn written_keys(&self) -> Vec<String> {
        // Not the flag that profiles were moved to their shards, which the spawn set as a first
        // drain would (and a drain sets again after a loss): no write makes it.
        // Nor the runtime boards' catalog's guard, which says (as a first drain would) that its
        // journal holds nothing Redis lacks.
        let (moved, catalog) = (self.keys.profiles_moved(), self.keys.catalog().guard());
        let mut keys: Vec<String> = cluster::scan_all(&self.redis, &self.keys.all_pattern())
            .await
            .into_iter()
            .filter(|key| *key != moved && *key != catalog)
            .collect();
        keys.sort();
        keys
    }

    /// Redis lost: deletes every key `written_keys` lists, one `DEL` each (a cluster's keys are
    /// on several nodes).
    pub async fn lose_written_keys(&self) {
        let mut conn = self.redis.clone();
        for key in self.written_keys().await {
            let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.unwrap();
        }
    }

    /// Every key this test wrote with its value (`DUMP`) and absolute expiry: what "writes
    /// nothing" compares before and after.
    pub async fn keyspace(&self) -> Vec<(String, Vec<u8>, i64)> {
        let mut conn = self.redis.clone();
        let mut state = Vec::new();
        for key in self.written_keys().await {
            // A restore's campaign (its record, each journal's mark): its bookkeeping, like its lock.
            if key.ends_with(":restore-done") || key.contains(":restore-campaign:") {
                continue;
            }
            // A guard's fields by name: a restore sets `born` after the fields it brings back,
            // where the first drain of a new deployment set it before them.
            let value: Option<Vec<u8>> = if key.ends_with(":guard") {
                let mut fields: std::collections::BTreeMap<String, String> =
                    redis::cmd("HGETALL").arg(&key).query_async(&mut conn).await.unwrap();
                // How far the drain trimmed: the journal's bookkeeping (raised by a drain or a
                // restore), like its stream, not the board's state.
                fields.remove(standings::domain::guard::DRAINED);
                // Which form of effects the drain reads: set by its trim, like `drained`.
                fields.remove(standings::domain::guard::COMPACT);
                Some(serde_json::to_vec(&fields).unwrap())
            } else {
                redis::cmd("DUMP").arg(&key).query_async(&mut conn).await.unwrap()
            };
            let expiry: i64 = redis::cmd("PEXPIRETIME").arg(&key).query_async(&mut conn).await.unwrap();
            state.push((key, value.unwrap_or_default(), expiry));
        }
        state
    }

    /// When `key` expires, as Unix time on the injected clock that stood at `written` when the
    /// key got its TTL: keys get TTLs counted from the function's clock, never absolute times,
    /// so this is `written` plus the TTL (rounded to the second: a test takes far less than
    /// half a second between the write and this read).
    pub async fn expiry_from(&self, key: &str, written: DateTime<Utc>) -> i64 {
        let pttl: i64 = redis::cmd("PTTL").arg(key).query_async(&mut self.redis.clone()).await.unwrap();
        assert!(pttl >= 0, "{key} has no TTL ({pttl})");
        written.timestamp() + (pttl + 500) / 1000
    }

    /// The composite score of `user` on `board`'s period, decoded: whole points and when they
    /// were reached.
    pub async fn standing(&self, board: &str, period: &Period, user: &str) -> Option<(i64, DateTime<Utc>)> {
        let key = self.keys.board(board).period(period);
        let composite: Option<f64> = redis::cmd("ZSCORE").arg(key).arg(user).query_async(&mut self.redis.clone()).await.unwrap();
        composite.map(|c| tiebreak::decode(c).expect("a composite in range"))
    }

    /// Members of `board`'s period, best first.
    pub async fn ranking(&self, board: &str, period: &Period) -> Vec<String> {
        let key = self.keys.board(board).period(period);
        redis::cmd("ZREVRANGE").arg(key).arg(0).arg(-1).query_async(&mut self.redis.clone()).await.unwrap()
    }
}

fn period_on(kind: standings::domain::period::PeriodKind, board_tz_date: &str) -> standings::domain::period::Period {
    let date = chrono::NaiveDate::parse_from_str(board_tz_date, "%Y-%m-%d").unwrap();
    standings::domain::period::Period::on_date(kind, date, chrono_tz::Asia::Shanghai)
}

pub fn day(board_tz_date: &str) -> standings::domain::period::Period {
    period_on(standings::domain::period::PeriodKind::Day, board_tz_date)
}

pub fn month(board_tz_date: &str) -> standings::domain::period::Period {
    period_on(standings::domain::period::PeriodKind::Month, board_tz_date)
}

pub fn season(board_tz_date: &str) -> standings::domain::period::Period {
    period_on(standings::domain::period::PeriodKind::Season, board_tz_date)
}

/// An answer of board `solo` or `wide` as both give it, to compare a sharded board with the
/// same board in one slot: without board names, and (`ranks`) without ranks, which a sharded
/// board's write does not answer (docs/scaling.md#what-a-write-answers).
pub fn as_either_board(mut value: Value, ranks: bool) -> Value {
    fn strip(value: &mut Value, ranks: bool) {
        match value {
            Value::Object(object) => {
                object.remove("board");
                if ranks {
                    object.remove("rank");
                }
                object.values_mut().for_each(|v| strip(v, ranks));
            }
            Value::Array(items) => items.iter_mut().for_each(|v| strip(v, ranks)),
            _ => {}
        }
    }
    strip(&mut value, ranks);
    serde_json::from_str(&value.to_string().replace("solo", "B").replace("wide", "B")).expect("JSON stays JSON")
}
