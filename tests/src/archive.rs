//! Season archives under test: a DynamoDB table of the test's own on the suite's moto_server,
//! seeded season boards, and `ArchiveHarness` (the archive job with an injectable clock beside
//! the ingest and query functions on the same keys and table).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use standings::archive::job::{Archiver, Settings};
use standings::archive::schedule::Backoff;
use standings::archive::table::{ArchiveSink, ArchivedEntry, SeasonTable};
use standings::domain::config::Config;
use standings::domain::period::Period;
use standings::domain::tiebreak;
use standings::redis::keys::Keys;
use standings::redis::store::{Connection, Store};

use crate::{TestApp, at, clock_of, redis_settings, spawn_app, unique_prefix};

/// A season table of the test's own on the suite's moto_server, created from the one definition
/// in `standings::archive::table`.
pub async fn unique_season_table() -> SeasonTable {
    std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
        .expect("AWS_ENDPOINT_URL_DYNAMODB is not set: run the suite with scripts/test.sh, which starts moto_server");
    // moto answers large pages far slower than DynamoDB: give each attempt a minute.
    let table = SeasonTable::connect_with_attempt_timeout(format!("seasons-{}", unique_prefix()), Duration::from_secs(60)).await;
    table.create_if_missing().await.unwrap();
    table
}

/// A member as ingest leaves it on a season board: whole points, and when they were reached.
pub type Member = (String, i64, DateTime<Utc>);

/// `n` members spread over `season`, with many equal points and groups of three that reached
/// the same points in the same second, so every tie-break rule is exercised.
pub fn season_members(n: u64, season: &Period) -> Vec<Member> {
    let start = season.start.unwrap().with_timezone(&Utc);
    (0..n)
        .map(|i| {
            let points = 1 + (i / 6 * 7_919 % 3_000) as i64;
            let reached_at = start + chrono::Duration::seconds((i / 3 * 7_907 % (25 * 86_400)) as i64);
            (format!("u{i:06}"), points, reached_at)
        })
        .collect()
}

/// Puts `members` on the sorted set `key`, scored as ingest scores them.
pub async fn seed_board(key: &str, members: &[Member]) {
    let mut conn = Store::connect(&redis_settings()).unwrap().connection().await.unwrap();
    for chunk in members.chunks(1000) {
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(key);
        for (user, points, reached_at) in chunk {
            zadd.arg(tiebreak::encode(*points, *reached_at).unwrap()).arg(user);
        }
        let _: u64 = zadd.query_async(&mut conn).await.unwrap();
    }
}

/// Redis keys and a DynamoDB table of the test's own, the archive job with an injectable clock,
/// and the ingest and query apps on the same keys and table.
pub struct ArchiveHarness {
    pub config: Arc<Config>,
    pub keys: Keys,
    pub store: Store,
    pub table: SeasonTable,
    pub redis: Connection,
    pub(crate) now: Arc<Mutex<DateTime<Utc>>>,
}

impl ArchiveHarness {
    /// A harness whose boards are `config`'s instead of the defaults.
    pub async fn with_config(config: Config) -> Self {
        Self { config: Arc::new(config), ..Self::new().await }
    }

    /// The archive job's clock starts past October 2026's end plus grace (Asia/Shanghai).
    pub async fn new() -> Self {
        let store = Store::connect(&redis_settings()).unwrap();
        Self {
            config: Arc::new(Config::default_boards()),
            keys: Keys::new(&unique_prefix()).unwrap(),
            redis: store.connection().await.unwrap(),
            store,
            table: unique_season_table().await,
            now: Arc::new(Mutex::new(at("2026-11-01T01:00:00+08:00"))),
        }
    }

    pub fn set_now(&self, now: DateTime<Utc>) {
        *self.now.lock().unwrap() = now;
    }

    /// The job's settings, with millisecond backoff so retries stay quick.
    pub fn settings() -> Settings {
        let backoff = Backoff { base: Duration::from_millis(1), cap: Duration::from_millis(20), max_attempts: 10 };
        Settings { backoff, ..Settings::default() }
    }

    /// The archive job writing through `sink` (the table itself, or a wrapper around it).
    pub fn archiver<S: ArchiveSink>(&self, sink: S) -> Archiver<S> {
        self.archiver_with_clock(sink, clock_of(&self.now))
    }

    pub fn archiver_with_clock<S: ArchiveSink>(&self, sink: S, clock: standings::Clock) -> Archiver<S> {
        let (config, keys, store, table) = (self.config.clone(), self.keys.clone(), self.store.clone(), self.table.clone());
        Archiver::new(config, keys, store, table, sink, clock, Self::settings())
    }

    /// A season of the `points` board (Asia/Shanghai).
    pub fn season(id: &str) -> Period {
        standings::archive::freeze::season_named(id, chrono_tz::Asia::Shanghai).unwrap()
    }

    /// Puts `members` on the live `points` board of `season`.
    pub async fn seed(&self, season: &str, members: &[Member]) {
        seed_board(&self.keys.board("points").period(&Self::season(season)), members).await;
    }

    /// A board in rank order, straight from Redis: the oracle archived seasons are held to.
    pub async fn board_in_rank_order(&self, key: &str) -> Vec<Member> {
        let members: Vec<(String, f64)> =
            redis::cmd("ZREVRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES").query_async(&mut self.redis.clone()).await.unwrap();
        members
            .into_iter()
            .map(|(user, composite)| {
                let (points, reached_at) = tiebreak::decode(composite).unwrap();
                (user, points, reached_at)
            })
            .collect()
    }

    /// Every archived entry of a `points` season, in rank order (one Query over all ranks).
    pub async fn archived(&self, season: &str) -> Vec<ArchivedEntry> {
        self.table.ranks("points", season, 1, 9_999_999_999).await.unwrap()
    }

    /// The ingest and query functions (with its own clock) on this harness's keys and table.
    pub async fn app(&self) -> TestApp {
        let (store, assertions) = (Store::connect(&redis_settings()).unwrap(), Store::connect(&redis_settings()).unwrap());
        spawn_app((*self.config).clone(), self.keys.clone(), store, assertions, Some(self.table.clone())).await
    }
}
