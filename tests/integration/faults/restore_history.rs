//! A restore of 30 days of history on a `maxmemory` Redis (`noeviction`): the server's clock is
//! moved forward a day at a time (tests/clockshift, its offset read from a file), the board is
//! written and drained every day, and keys expire as their days pass (markers after a day or
//! two, caps, day boards after their retention). Then everything is lost and the restore runs
//! with `maxmemory` a bounded margin above the live data: a restore that brought back what had
//! expired, or held every key of the history at once, would hit the limit and fail.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use chrono::{Duration, Utc};
use journal::{ObjectError, Objects, Put, Restorer, S3Objects, Status};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::redis::settings::RedisSettings;
use standings_tests::journal::{new_bucket, s3, spawn_journaled_at};
use standings_tests::servers::RedisServer;
use standings_tests::{TestApp, unique_prefix};

const DAYS: i64 = 30;
const USERS: usize = 100;

fn board() -> Config {
    Config::parse(
        r#"
        [[boards]]
        name = "campus"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["all", "week", "day"]
        top = 10
        statements = true
        rules = [
          { action = "lesson", points = 10, scope = "none", daily_cap = 30 },
          { action = "review", points = 4, scope = "user_target_day", reversible = true },
        ]
        "#,
    )
    .unwrap()
}

/// The clock shim, built for this test (gcc, as scripts/lib.sh builds it for the shifted pass).
fn clock_shim(dir: &std::path::Path) -> PathBuf {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clockshift/clockshift.c");
    let shim = dir.join("clockshift.so");
    let built = std::process::Command::new("gcc").args(["-shared", "-fPIC", "-O2", "-o"]).arg(&shim).arg(&source).status();
    assert!(built.is_ok_and(|s| s.success()), "gcc builds {}", source.display());
    shim
}

/// Moves the server's clock to `offset` seconds from the real one.
fn set_offset(file: &std::fs::File, offset: i64) {
    file.write_all_at(&offset.to_ne_bytes(), 0).unwrap();
}

async fn used_memory(app: &TestApp) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query_async(&mut app.redis.clone()).await.unwrap();
    info.lines().find_map(|l| l.strip_prefix("used_memory:")).unwrap().trim().parse().unwrap()
}

/// Every key but the journal's streams, read with SCAN (which drops keys whose time has come).
async fn state(app: &TestApp) -> Vec<(String, Vec<u8>, i64)> {
    app.keyspace().await.into_iter().filter(|(key, ..)| !key.ends_with(":journal")).collect()
}

#[tokio::test]
async fn a_restore_of_30_days_of_history_fits_a_maxmemory_redis_and_brings_back_only_what_lives() {
    let base = std::env::var_os("STANDINGS_TEST_TMP").map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = base.join(format!("history-{}", unique_prefix()));
    std::fs::create_dir_all(&dir).unwrap();
    let shim = clock_shim(&dir);
    let offset_path = dir.join("offset");
    let offset = std::fs::File::create(&offset_path).unwrap();
    set_offset(&offset, -(DAYS - 1) * 86_400);
    let server = RedisServer::start_with_env(
        &["--maxmemory-policy", "noeviction"],
        &[("LD_PRELOAD", shim.to_str().unwrap()), ("STANDINGS_CLOCK_OFFSET_FILE", offset_path.to_str().unwrap())],
    )
    .await;
    let app = spawn_journaled_at(board(), &RedisSettings::standalone(&server.url())).await;
    let client = s3().await;
    let bucket = new_bucket(&client).await;

    let mut written = 0;
    for day in 0..DAYS {
        let shift = -(DAYS - 1 - day) * 86_400;
        set_offset(&offset, shift);
        app.set_now(Utc::now() + Duration::seconds(shift));
        let events: Vec<Value> = (0..USERS)
            .flat_map(|u| {
                let user = format!("u{u}");
                let lessons =
                    (0..4).map(move |i| json!({"event_id": format!("d{day}-l{i}-{u}"), "user_id": format!("u{u}"), "action": "lesson"}));
                let reviews = (0..2).map(move |i| {
                    json!({"event_id": format!("d{day}-r{i}-{user}"), "user_id": user, "action": "review", "target": format!("c{i}")})
                });
                lessons.chain(reviews)
            })
            .collect();
        for chunk in events.chunks(500) {
            let (status, body) = app.post("/v1/events:batch", &json!({ "events": chunk })).await;
            assert_eq!(status, 200, "{body}");
            assert!(body["results"].as_array().unwrap().iter().all(|r| r["error"].is_null()), "{body}");
        }
        written += events.len();
        let report = app
            .drainer(S3Objects::new(client.clone(), &bucket), Arc::default())
            .with_chunk(2_000)
            .drain(Utc::now() + Duration::minutes(5))
            .await;
        assert!(report.boards.iter().all(|b| b.error.is_none()), "{report:?}");
    }

    let before = state(&app).await;
    let live = used_memory(&app).await;
    let () = redis::cmd("FLUSHALL").query_async(&mut app.redis.clone()).await.unwrap();
    let empty = used_memory(&app).await;
    let data = live.saturating_sub(empty);
    // The live data, plus a quarter of it and 2 MB for the restore's claims, its call in flight
    // and the server's own buffers: what history would add is many times that.
    let limit = empty + data + data / 4 + 2 * 1024 * 1024;
    let () = redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(limit).query_async(&mut app.redis.clone()).await.unwrap();

    let (done, peak) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let sampler = {
        let (done, peak, mut conn) = (done.clone(), peak.clone(), app.redis.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let info: String = redis::cmd("INFO").arg("memory").query_async(&mut conn).await.unwrap();
                let used: u64 = info.lines().find_map(|l| l.strip_prefix("used_memory:")).unwrap().trim().parse().unwrap();
                peak.fetch_max(used, Ordering::Relaxed);
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        })
    };
    let restorer = Restorer::new(Arc::new(board()), app.keys.clone(), app.store.clone(), S3Objects::new(client.clone(), &bucket));
    let report = restorer.restore(Some("campus"), Utc::now() + Duration::minutes(5)).await.expect("the restore fits");
    done.store(true, Ordering::Relaxed);
    sampler.await.unwrap();
    let peak = peak.load(Ordering::Relaxed).max(used_memory(&app).await);
    eprintln!(
        "30 days, {written} lines: live data {data} B, restore peak {} B ({:.2}x), limit {} B",
        peak - empty,
        (peak - empty) as f64 / data as f64,
        limit - empty
    );
    assert_eq!((report.status, report.boards[0].replayed), (Status::Complete, written), "{report:?}");
    assert!(peak <= limit, "the restore stayed under maxmemory: peak {peak}, limit {limit}");

    let after = state(&app).await;
    let names = |s: &[(String, Vec<u8>, i64)]| s.iter().map(|(k, ..)| k.clone()).collect::<Vec<_>>();
    assert_eq!(names(&after), names(&before), "the same keys: nothing expired came back, nothing live was lost");
    for ((key, dump, expiry), (_, dump_after, expiry_after)) in before.iter().zip(&after) {
        assert!(dump == dump_after, "{key} differs after the restore");
        assert!((expiry - expiry_after).abs() <= 2_000, "{key}: expiry {expiry} then {expiry_after}");
    }
}

/// Objects that move the Redis server's clock past `offset` when the restore reads the
/// `at`-th object: between two of the restore's runs, after it read Redis's clock.
struct ClockMovingObjects {
    inner: S3Objects,
    file: std::fs::File,
    offset: i64,
    at: usize,
    gets: std::sync::Mutex<usize>,
}

impl Objects for ClockMovingObjects {
    async fn put_new(&self, key: &str, body: Vec<u8>) -> Result<Put, ObjectError> {
        self.inner.put_new(key, body).await
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, ObjectError> {
        let n = {
            let mut gets = self.gets.lock().unwrap();
            *gets += 1;
            *gets
        };
        if n == self.at {
            set_offset(&self.file, self.offset);
        }
        self.inner.get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, ObjectError> {
        self.inner.list(prefix).await
    }
}

/// Restore × time (issue 56): the restore reads Redis's clock once. When Redis's clock passes a
/// key's recorded expiry during the restore (here the day board's), the run that brought the
/// key back gives it that expiry (gone at once), and a later run of the same restore wrote it
/// again with no `PEXPIREAT` (the claims said it had one): the board lived for ever with part of
/// its points. Each run now checks the recorded expiries against Redis's own clock.
#[tokio::test]
async fn a_key_whose_life_ends_during_a_restore_does_not_come_back_without_its_expiry() {
    let base = std::env::var_os("STANDINGS_TEST_TMP").map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = base.join(format!("restore-time-{}", unique_prefix()));
    std::fs::create_dir_all(&dir).unwrap();
    let shim = clock_shim(&dir);
    let offset_path = dir.join("offset");
    let offset = std::fs::File::create(&offset_path).unwrap();
    set_offset(&offset, 0);
    let server = RedisServer::start_with_env(
        &[],
        &[("LD_PRELOAD", shim.to_str().unwrap()), ("STANDINGS_CLOCK_OFFSET_FILE", offset_path.to_str().unwrap())],
    )
    .await;
    let config = Config::parse(
        r#"
        [[boards]]
        name = "sprint"
        kind = "cumulative"
        timezone = "UTC"
        periods = ["day"]
        top = 10
        rules = [{ action = "lap", points = 1, scope = "none" }]
        "#,
    )
    .unwrap();
    let app = spawn_journaled_at(config.clone(), &RedisSettings::standalone(&server.url())).await;
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    // Three objects of 150 lines: the restore's runs (200 lines) span them.
    for object in 0..3 {
        let events: Vec<Value> =
            (0..150).map(|i| json!({"event_id": format!("o{object}-{i}"), "user_id": format!("u{}", i % 7), "action": "lap"})).collect();
        let (status, body) = app.post("/v1/events:batch", &json!({ "events": events })).await;
        assert_eq!(status, 200, "{body}");
        let report = app.drainer(S3Objects::new(client.clone(), &bucket), Arc::default()).drain(Utc::now() + Duration::minutes(5)).await;
        assert!(report.boards.iter().all(|b| b.error.is_none()), "{report:?}");
    }
    let day = app.keys.board("sprint").period(&standings::domain::period::Period::containing(
        standings::domain::period::PeriodKind::Day,
        app.now(),
        chrono_tz::UTC,
    ));
    let mut conn = app.redis.clone();
    let expiry: i64 = redis::cmd("PEXPIRETIME").arg(&day).query_async(&mut conn).await.unwrap();
    assert!(expiry > 0, "the day's board has an expiry");
    let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();

    // Redis's clock passes the board's expiry once the restore is under way; the restore's
    // lock is leased for longer than the jump.
    let jump = (expiry - Utc::now().timestamp_millis()) / 1000 + 60;
    let objects =
        ClockMovingObjects { inner: S3Objects::new(client.clone(), &bucket), file: offset, offset: jump, at: 2, gets: Default::default() };
    let restorer = Restorer::new(Arc::new(config), app.keys.clone(), app.store.clone(), objects)
        .with_lease_ms(u64::try_from(jump + 600).unwrap() * 1000);
    let report = restorer.restore(Some("sprint"), Utc::now() + Duration::minutes(5)).await.expect("the restore runs");
    assert_eq!((report.status, report.boards[0].replayed), (Status::Complete, 450), "{report:?}");
    let ttl: i64 = redis::cmd("PTTL").arg(&day).query_async(&mut conn).await.unwrap();
    assert_eq!(ttl, -2, "the day's board ended during the restore: gone, not back for ever");
}
