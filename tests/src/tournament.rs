//! Tournaments (docs/tournaments.md) on a test app: the `ingest` routes as usual, the reads
//! through a `seasons` function with a results table of the test's own and a catalog read
//! before every request, and the archive function's every-minute end of instances.

use std::time::Duration;

use axum::Router;
use axum::http::{Method, StatusCode};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use standings::archive::bus::{Announce, BusError, EventBridgeBus};
use standings::archive::ends_known::EndsKnown;
use standings::archive::job::Archiver;
use standings::archive::table::SeasonTable;
use standings::archive::tournament_end::InstanceEnd;
use standings::services::catalog::Catalog;
use standings::services::runtime_boards::{EndReport, RuntimeBoards, limit_from_env};

use crate::runtime::call_on;
use crate::{ADMIN, ArchiveHarness, Caller, TestApp, WRITER, clock_of, read_router, unique_season_table};

pub struct Arena {
    pub app: TestApp,
    pub table: SeasonTable,
    pub reads: Router,
}

impl Arena {
    /// A fresh app and table.
    pub async fn new() -> Self {
        Self::on(ArchiveHarness::new().await.app().await, unique_season_table().await)
    }

    /// Tournaments on `app` (journaled or not), read with `table`.
    pub fn on(app: TestApp, table: SeasonTable) -> Self {
        Self::refreshed(app, table, Duration::ZERO)
    }

    /// The reads through functions whose catalog is read again after `refresh` (a warm
    /// function's, with an hour: what a request costs on its own).
    pub fn refreshed(app: TestApp, table: SeasonTable, refresh: Duration) -> Self {
        let mut query = query::App::new(app.config.clone(), app.keys.clone(), app.store.clone(), clock_of(&app.now));
        query.catalog = query.catalog.with_refresh(refresh);
        let mut seasons =
            seasons::App::new(app.config.clone(), app.keys.clone(), app.store.clone(), Some(table.clone()), clock_of(&app.now));
        seasons.catalog = seasons.catalog.with_refresh(refresh);
        let reads = read_router(query, seasons);
        Self { app, table, reads }
    }

    pub async fn put(&self, id: &str, body: &Value) -> (StatusCode, Value) {
        self.app.call(Method::PUT, &format!("/v1/admin/tournaments/{id}"), body.to_string(), ADMIN).await
    }

    /// `put` with the clock at `at` (an operator defining it then, before its first instance
    /// ended: no instance that ended before the definition runs), the clock put back after.
    pub async fn put_at(&self, id: &str, body: &Value, at: chrono::DateTime<chrono::Utc>) -> (StatusCode, Value) {
        let now = self.app.now();
        self.app.set_now(at);
        let answer = self.put(id, body).await;
        self.app.set_now(now);
        answer
    }

    pub async fn join(&self, id: &str, user: &str) -> (StatusCode, Value) {
        self.app.call(Method::POST, &format!("/v1/tournaments/{id}/join"), json!({"user_id": user}).to_string(), WRITER).await
    }

    pub async fn play(&self, id: &str, event: &str, user: &str, score: i64) -> (StatusCode, Value) {
        let body = json!({"event_id": event, "user_id": user, "score": score});
        self.app.call(Method::POST, &format!("/v1/tournaments/{id}/scores"), body.to_string(), WRITER).await
    }

    pub async fn end(&self, id: &str, reason: &str) -> (StatusCode, Value) {
        self.app.call(Method::POST, &format!("/v1/admin/tournaments/{id}/end"), json!({"reason": reason}).to_string(), ADMIN).await
    }

    /// A read route, as anybody.
    pub async fn read(&self, path: &str) -> (StatusCode, Value) {
        call_on(&self.reads, Method::GET, path, &Value::Null, Caller::Anonymous).await
    }

    /// The archive function's every-minute run on the catalog as it is now, at the app's time.
    pub async fn end_run(&self, bus: Option<&EventBridgeBus>) -> Vec<InstanceEnd> {
        self.end_run_until(bus, Utc::now() + chrono::Duration::minutes(5)).await
    }

    /// `end_run` through any bus, stopping at `deadline`.
    pub async fn end_run_until<B: Announce>(&self, bus: Option<&B>, deadline: DateTime<Utc>) -> Vec<InstanceEnd> {
        self.archiver().await.end_tournaments(bus, deadline).await
    }

    /// `end_run` of a warm function, knowing the watermarks `known` holds from its earlier runs.
    pub async fn end_run_knowing(&self, known: &EndsKnown) -> Vec<InstanceEnd> {
        let deadline = Utc::now() + chrono::Duration::minutes(5);
        self.archiver().await.with_ends_known(known.clone()).end_tournaments(None::<&EventBridgeBus>, deadline).await
    }

    /// The whole every-minute run (`{"runtime": {}}`): tournaments' ends, then deleted runtime
    /// boards' (a deleted tournament's included).
    pub async fn runtime_run(&self, bus: Option<&EventBridgeBus>) -> (Vec<InstanceEnd>, Vec<EndReport>) {
        let ended = self.end_run(bus).await;
        let archiver = self.archiver().await;
        let boards = RuntimeBoards::new(self.app.config.clone(), self.app.keys.clone(), self.app.store.clone(), limit_from_env());
        let deadline = Utc::now() + chrono::Duration::minutes(5);
        (ended, archive::end_boards(&boards, &archiver, self.app.now(), deadline).await.unwrap())
    }

    /// The archive function's archiver on the boards as it reads them (its catalog: retired
    /// boards included), at the app's time.
    async fn archiver(&self) -> Archiver<SeasonTable> {
        let catalog = Catalog::new(self.app.config.clone(), self.app.keys.clone(), self.app.store.clone(), |_| ());
        let config = catalog.with_refresh(Duration::ZERO).config().await.unwrap();
        let (keys, store, table) = (self.app.keys.clone(), self.app.store.clone(), self.table.clone());
        Archiver::new(config, keys, store, table.clone(), table, clock_of(&self.app.now), ArchiveHarness::settings())
    }

    /// `DELETE /v1/admin/tournaments/{id}` as an admin.
    pub async fn delete(&self, id: &str, reason: &str) -> (StatusCode, Value) {
        self.app.call(Method::DELETE, &format!("/v1/admin/tournaments/{id}?reason={reason}"), String::new(), ADMIN).await
    }
}

/// A bus that keeps the pages it takes, and fails once it has taken `left`.
#[derive(Default)]
pub struct Flaky {
    pub pages: Mutex<Vec<String>>,
    pub left: AtomicUsize,
}

impl Announce for Flaky {
    async fn announce(&self, pages: &[String]) -> Result<(), BusError> {
        for page in pages {
            if self.left.load(Ordering::SeqCst) == 0 {
                return Err(BusError("the bus is down".into()));
            }
            self.left.fetch_sub(1, Ordering::SeqCst);
            self.pages.lock().unwrap().push(page.clone());
        }
        Ok(())
    }
}

/// A tournament's definition opening at `start` for `hours`, with the fields a test changes.
pub fn cup(start: DateTime<Utc>, hours: i64, extra: Value) -> Value {
    let mut body = json!({
        "title": "Friday cup",
        "category": "racing",
        "keep": "best",
        "order": "desc",
        "start": start,
        "end": start + chrono::Duration::hours(hours),
        "join_required": false,
    });
    for (key, value) in extra.as_object().into_iter().flatten() {
        body[key] = value.clone();
    }
    body
}

/// An arena journaling on a redis-server of its own (kept while the returned server lives).
pub async fn journaled_arena_of_its_own() -> (crate::servers::RedisServer, Arena) {
    let server = crate::servers::RedisServer::start(&[]).await;
    let settings = standings::redis::settings::RedisSettings::standalone(&server.url());
    let app: TestApp = crate::journal::spawn_journaled_at(standings::domain::config::Config::default_boards(), &settings).await;
    (server, Arena::on(app, unique_season_table().await))
}

/// Verify replays `board`'s journal and finds Redis as it says, refusing no line.
pub async fn assert_verified(arena: &Arena, client: &aws_sdk_s3::Client, bucket: &str, board: &str) {
    let config =
        std::sync::Arc::new(standings::services::catalog::boards_now(&arena.app.config, &arena.app.keys, &arena.app.store).await.unwrap());
    let sink = standings::runtime::metrics::Metrics::with_sink(journal::FUNCTION, std::sync::Arc::new(|_| ()));
    let objects = journal::S3Objects::new(client.clone(), bucket);
    let jobs = journal::Jobs::new(config, arena.app.keys.clone(), arena.app.store.clone(), objects, sink, arena.app.clock());
    let report = jobs.checker.verify(Some(board), Utc::now() + chrono::Duration::minutes(5)).await.unwrap();
    assert_eq!((report.mismatches, report.boards[0].refused), (0, 0), "{report:?}");
}

/// Every key but the journal streams (drained), with values and expiries.
pub async fn state(arena: &Arena) -> Vec<(String, Vec<u8>, i64)> {
    arena.app.keyspace().await.into_iter().filter(|(key, ..)| !key.ends_with(":journal")).collect()
}

/// The loss (a literal FLUSHALL), then a restore of everything from `bucket`, to completion.
pub async fn flush_and_restore(arena: &Arena, client: &aws_sdk_s3::Client, bucket: &str) {
    let mut conn = arena.app.redis.clone();
    let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    let jobs = arena.app.journal_jobs(client, bucket, std::sync::Arc::default());
    let report = jobs.restorer.restore(None, Utc::now() + chrono::Duration::minutes(5)).await.unwrap();
    assert_eq!(report.status, journal::Status::Complete, "{report:?}");
}
