//! The `journal` function's drain on a test app, its bucket on moto_server (S3, through the
//! real SDK), and the objects read back.

use std::sync::{Arc, Mutex};

use aws_sdk_s3::Client;
use journal::{Drainer, Jobs, ObjectError, Objects, Put, Resharder, S3Objects};
use serde_json::Value;
use standings::http::AuthMode;
use standings::runtime::metrics::Metrics;

use standings::domain::config::Config;
use standings::redis::keys::Keys;
use standings::redis::store::Store;

use crate::{Caller, TestApp, clock_of, redis_settings, spawn_app, unique_prefix};

/// A call to `router` (another function's, such as `void_router`'s): its status and JSON body.
pub async fn call(
    router: &axum::Router,
    method: axum::http::Method,
    path: &str,
    body: &Value,
    caller: Caller<'_>,
) -> (axum::http::StatusCode, Value) {
    let (status, _, value) = crate::send(router, method, path, body.to_string().into(), caller).await;
    (status, value)
}

/// An S3 client for moto_server (`AWS_ENDPOINT_URL_S3`, set by scripts/lib.sh).
pub async fn s3() -> Client {
    journal::s3_client().await
}

/// A new, empty bucket of its own; its name.
pub async fn new_bucket(client: &Client) -> String {
    let name = format!("journal-{}", unique_prefix().replace([':', '_'], "-"));
    client.create_bucket().bucket(&name).send().await.expect("moto creates the bucket");
    name
}

/// Drains `app`'s journal into a new bucket, `chunk` entries an object, with five minutes to go;
/// every board must drain.
pub async fn drain_to_new_bucket(app: &TestApp, chunk: usize) -> (Client, String) {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let deadline = chrono::Utc::now() + chrono::Duration::minutes(5);
    let report = app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).with_chunk(chunk).drain(deadline).await;
    assert!(report.boards.iter().all(|b| b.error.is_none()), "{report:?}");
    (client, bucket)
}

/// An app whose writes are journaled (docs/journal.md), on the suite's Redis.
pub async fn spawn_journaled(config: Config) -> TestApp {
    let settings = redis_settings();
    let keys = Keys::new(&unique_prefix()).unwrap().with_journal(true);
    spawn_app(config, keys, Store::connect(&settings).unwrap(), Store::connect(&settings).unwrap(), None).await
}

/// A journaling app of a new deployment as it stands before any function's start judged its
/// boards (`births::at_start`): none born.
pub async fn spawn_journaled_unborn(config: Config) -> TestApp {
    let settings = redis_settings();
    let keys = Keys::new(&unique_prefix()).unwrap().with_journal(true);
    crate::spawn_app_born(config, keys, Store::connect(&settings).unwrap(), Store::connect(&settings).unwrap(), None, false).await
}

/// A journaling app on `keys` (another configuration over the same prefix: a rule change).
pub async fn spawn_journaled_on(config: Config, keys: Keys) -> TestApp {
    let settings = redis_settings();
    spawn_app(config, keys.with_journal(true), Store::connect(&settings).unwrap(), Store::connect(&settings).unwrap(), None).await
}

/// A journaling app on `keys` that marks nothing born: a deploy whose start judges its boards
/// (`births::at_start`) against the journal as it is.
pub async fn spawn_journaled_unborn_on(config: Config, keys: Keys) -> TestApp {
    let settings = redis_settings();
    let (store, assertions) = (Store::connect(&settings).unwrap(), Store::connect(&settings).unwrap());
    crate::spawn_app_born(config, keys.with_journal(true), store, assertions, None, false).await
}

/// `spawn_journaled_unborn_on` on the Redis `settings` name (a server of the test's own).
pub async fn spawn_journaled_unborn_at(config: Config, keys: Keys, settings: &standings::redis::settings::RedisSettings) -> TestApp {
    let (store, assertions) = (Store::connect(settings).unwrap(), Store::connect(settings).unwrap());
    crate::spawn_app_born(config, keys.with_journal(true), store, assertions, None, false).await
}

/// A journaling app on `keys` serving archived seasons from `table`.
pub async fn spawn_journaled_archiving(config: Config, keys: Keys, table: standings::archive::table::SeasonTable) -> TestApp {
    let settings = redis_settings();
    spawn_app(config, keys.with_journal(true), Store::connect(&settings).unwrap(), Store::connect(&settings).unwrap(), Some(table)).await
}

/// A journaling app on the Redis `settings` name (e.g. a server of the test's own).
pub async fn spawn_journaled_at(config: Config, settings: &standings::redis::settings::RedisSettings) -> TestApp {
    let keys = Keys::new(&unique_prefix()).unwrap().with_journal(true);
    spawn_app(config, keys, Store::connect(settings).unwrap(), Store::connect(settings).unwrap(), None).await
}

impl TestApp {
    /// The app's injected clock, for jobs run beside it.
    pub fn clock(&self) -> standings::Clock {
        clock_of(&self.now)
    }

    /// The journal function's drainer over this app's boards and keys, into `objects`; its
    /// metric lines go to `metrics`.
    pub fn drainer<O: Objects>(&self, objects: O, metrics: Arc<Mutex<Vec<Value>>>) -> Drainer<O> {
        let sink = Metrics::with_sink(
            journal::FUNCTION,
            Arc::new(move |line: String| metrics.lock().unwrap().push(serde_json::from_str(&line).expect("an EMF line is JSON"))),
        );
        // Writes record packed effects after its first trim at once (deployed: 16 minutes on).
        Drainer::new(self.config.clone(), self.keys.clone(), self.store.clone(), objects, sink).with_packed_after_ms(0)
    }

    /// Everything the journal function does, over this app's boards and keys, into `bucket`, on
    /// this app's clock; metric lines to `metrics`.
    pub fn journal_jobs(&self, client: &Client, bucket: &str, metrics: Arc<Mutex<Vec<Value>>>) -> Jobs<S3Objects> {
        self.journal_jobs_over(S3Objects::new(client.clone(), bucket), metrics)
    }

    /// `journal_jobs` whose moves end a round within `round_ms` of its start before their
    /// fence (`Resharder::with_round_ms`; 0: only a round that finds nothing new).
    pub fn journal_jobs_rounds(&self, client: &Client, bucket: &str, round_ms: i64) -> Jobs<S3Objects> {
        let mut jobs = self.journal_jobs(client, bucket, Arc::default());
        let objects = S3Objects::new(client.clone(), bucket);
        jobs.resharder = Resharder::new(self.config.clone(), self.keys.clone(), self.store.clone(), objects).with_round_ms(round_ms);
        jobs
    }

    /// `journal_jobs` over `objects` (a fault's wrapper of S3).
    pub fn journal_jobs_over<O: Objects + Clone>(&self, objects: O, metrics: Arc<Mutex<Vec<Value>>>) -> Jobs<O> {
        let sink = Metrics::with_sink(
            journal::FUNCTION,
            Arc::new(move |line: String| metrics.lock().unwrap().push(serde_json::from_str(&line).expect("an EMF line is JSON"))),
        );
        let mut jobs = Jobs::new(self.config.clone(), self.keys.clone(), self.store.clone(), objects, sink, self.clock());
        // As `drainer`: writes record packed effects after the first trim at once.
        jobs.drainer = jobs.drainer.with_packed_after_ms(0);
        jobs
    }

    /// The `void` function over this app's boards, keys and clock, reading the journal in
    /// `bucket` (`None`: the journal is off), which keeps objects `retention_days`.
    pub fn void_router(&self, client: &Client, bucket: Option<&str>, retention_days: i64) -> axum::Router {
        let objects = bucket.map(|bucket| S3Objects::new(client.clone(), bucket));
        let app = void::App::new(
            self.config.clone(),
            self.keys.clone(),
            self.store.clone(),
            objects,
            retention_days,
            self.clock(),
            AuthMode::Jwt,
        );
        void::router(Arc::new(app))
    }

    /// Entries waiting in a board's journal.
    pub async fn journal_len(&self, board: &str) -> usize {
        let mut conn = self.redis.clone();
        standings::redis::journal::len(&mut conn, &self.keys.board(board)).await.expect("XLEN")
    }
}

/// The names of every object of this app's journal in `bucket`, in name order.
pub async fn object_names(client: &Client, bucket: &str, app: &TestApp) -> Vec<String> {
    let prefix = format!("journal/prefix={}/", app.keys.prefix());
    let mut names = Vec::new();
    let mut token = None;
    loop {
        let page = client.list_objects_v2().bucket(bucket).prefix(&prefix).set_continuation_token(token).send().await.expect("moto lists");
        names.extend(page.contents().iter().filter_map(|o| o.key().map(str::to_owned)));
        match page.next_continuation_token() {
            Some(next) => token = Some(next.to_owned()),
            None => break,
        }
    }
    names.sort();
    names
}

/// Every line of every object of this app's journal, object by object.
pub async fn lines(client: &Client, bucket: &str, app: &TestApp) -> Vec<Value> {
    let objects = S3Objects::new(client.clone(), bucket);
    let mut lines = Vec::new();
    for name in object_names(client, bucket, app).await {
        let body = objects.get(&name).await.expect("moto serves the object");
        for line in String::from_utf8(body).expect("UTF-8").lines() {
            lines.push(serde_json::from_str(line).expect("every line is JSON"));
        }
    }
    lines
}

/// Objects that store each chunk and then fail, as a drain killed between writing to S3 and
/// trimming Redis would.
pub struct CrashAfterPut {
    pub inner: S3Objects,
    pub puts: Mutex<usize>,
}

impl Objects for CrashAfterPut {
    async fn put_new(&self, key: &str, body: Vec<u8>) -> Result<Put, ObjectError> {
        self.inner.put_new(key, body).await?;
        *self.puts.lock().unwrap() += 1;
        Err(ObjectError("killed after the object was stored".into()))
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, ObjectError> {
        self.inner.get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, ObjectError> {
        self.inner.list(prefix).await
    }
}

/// An app whose writes are journaled and record rank moves, every key a write can touch.
pub async fn spawn_recording(config: Config) -> TestApp {
    let settings = redis_settings();
    let keys = Keys::new(&unique_prefix()).unwrap().with_journal(true).with_notices(true);
    spawn_app(config, keys, Store::connect(&settings).unwrap(), Store::connect(&settings).unwrap(), None).await
}

/// Objects that overlap, as a store rolled back and drained again leaves them: `board`'s one
/// object in `bucket` (its lines `lines` in all) gets a copy of its third and fourth lines stored
/// apart, named by the third's id, so the first object holds lines after the next one's first.
pub async fn store_overlapping_copy(client: &Client, bucket: &str, board: &str, lines: usize) {
    let listed = client.list_objects_v2().bucket(bucket).send().await.expect("a listing");
    let names: Vec<String> = listed
        .contents()
        .iter()
        .filter_map(|o| o.key())
        .filter(|key| key.contains(&format!("/board={board}/")))
        .map(str::to_owned)
        .collect();
    let [name] = names.as_slice() else { panic!("one object of {board}: {names:?}") };
    let body = client.get_object().bucket(bucket).key(name).send().await.expect("the object").body.collect().await.expect("its body");
    let text = String::from_utf8(body.into_bytes().to_vec()).expect("text");
    let read: Vec<&str> = text.lines().collect();
    assert_eq!(read.len(), lines, "{text}");
    let id = |line: &str| serde_json::from_str::<Value>(line).expect("a line")["id"].as_str().expect("its id").to_owned();
    let (folder, _) = name.rsplit_once('/').expect("a folder");
    let copy = format!("{}\n{}\n", read[2], read[3]).into_bytes();
    client.put_object().bucket(bucket).key(format!("{folder}/{}.jsonl", id(read[2]))).body(copy.into()).send().await.expect("stored");
}
