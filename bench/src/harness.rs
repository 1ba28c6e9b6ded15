//! What every scenario shares: connections to the benchmark's Redis, a key prefix of its own,
//! timings and their percentiles, deterministic data, and the Markdown report with its targets.

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use chrono::{NaiveDate, Utc};
use chrono_tz::Asia::Shanghai;
use http_body_util::BodyExt;
use redis::AsyncCommands;
use standings::domain::period::{Period, PeriodKind};
use standings::domain::tiebreak;
use standings::redis::keys::Keys;
use standings::redis::settings::RedisSettings;
use standings::redis::store::{Connection, Store};
use tower::ServiceExt;

pub use crate::report::*;

pub type BenchError = Box<dyn std::error::Error + Send + Sync>;

/// Members per ZADD while loading a sorted set, and ZADDs per pipelined round trip.
const ZADD_CHUNK: usize = 1_000;
const ZADDS_PER_ROUND_TRIP: usize = 50;

pub struct Bench {
    pub store: Store,
    /// Keys of this run: every key a scenario writes starts with `keys.prefix()`, and the run
    /// deletes them after each scenario.
    pub keys: Keys,
    pub repetitions: usize,
    /// Members of the around-me scenario's big board (`--around-members`).
    pub around_members: u64,
    /// For processes the benchmark starts (the functions' cold starts).
    pub redis_url: String,
    settings: RedisSettings,
    redis_pid: u32,
}

impl Bench {
    pub async fn connect(repetitions: usize, around_members: u64) -> Result<Self, BenchError> {
        let url = std::env::var("REDIS_URL").map_err(|_| "REDIS_URL is not set: run scripts/bench.sh, which starts redis-server")?;
        let mut settings = RedisSettings::standalone(&url);
        // A single command over millions of entries takes seconds, not the API's 2 s budget.
        settings.response_timeout = Duration::from_secs(120);
        let keys = Keys::new(&format!("bench-{}", std::process::id()))?;
        let store = Store::connect(&settings)?;
        let info: String = redis::cmd("INFO").arg("server").query_async(&mut store.connection().await?).await?;
        let redis_pid = info
            .lines()
            .find_map(|line| line.strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse().ok())
            .ok_or("INFO server has no process_id")?;
        Ok(Self { store, keys, repetitions, around_members, redis_url: url, settings, redis_pid })
    }

    /// CPU time used so far by this process and by redis-server (same machine: bench.sh
    /// starts it), to tell where an operation's cost lies.
    pub fn cpu(&self) -> Cpu {
        Cpu { client: cpu_time("self"), redis: cpu_time(&self.redis_pid.to_string()) }
    }

    pub async fn connection(&self) -> Result<Connection, BenchError> {
        Ok(self.store.connection().await?)
    }

    /// A store with a connection of its own, as one Lambda container has: one per simulated
    /// client, so concurrent clients are not pipelined onto one socket.
    pub fn client(&self) -> Result<Store, BenchError> {
        Ok(Store::connect(&self.settings)?)
    }

    /// What the journal's first drain does for a new deployment (docs/journal.md#fence): every
    /// board of `config` takes journaled writes.
    pub async fn born(&self, config: &standings::domain::config::Config) -> Result<(), BenchError> {
        let mut conn = self.connection().await?;
        for board in config.boards() {
            let keys = self.keys.board(&board.name);
            standings::redis::restore::mark_born(&mut conn, &keys).await?;
            // As a drain of this release leaves a board it trimmed: its writes record packed
            // effects (docs/journal.md#effects).
            let () = conn.hset(keys.guard(), standings::domain::guard::COMPACT, standings::domain::guard::PACKED).await?;
        }
        Ok(())
    }

    /// Deletes every key of this run (DEL, not UNLINK: memory is back before the next scenario).
    pub async fn clean(&self) -> Result<(), BenchError> {
        let mut conn = self.connection().await?;
        let keys = scan(&mut conn, &format!("{}:*", self.keys.prefix())).await?;
        for chunk in keys.chunks(1_000) {
            let () = conn.del(chunk).await?;
        }
        Ok(())
    }
}

/// CPU time (user + system) of one process, from `/proc/<pid>/stat`, in clock ticks of 1/100 s
/// (Linux's `USER_HZ` on every mainstream architecture): precise enough over windows of a second.
fn cpu_time(pid: &str) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name in parentheses start at field 3 (state); utime and stime
    // are fields 14 and 15.
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().skip(11).take(2).filter_map(|f| f.parse().ok()).collect())
        .unwrap_or_default();
    Duration::from_millis(fields.iter().sum::<u64>() * 10)
}

/// CPU time of the benchmark (client) and of redis-server at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Cpu {
    pub client: Duration,
    pub redis: Duration,
}

impl std::ops::Sub for Cpu {
    type Output = Cpu;

    fn sub(self, earlier: Cpu) -> Cpu {
        Cpu { client: self.client.saturating_sub(earlier.client), redis: self.redis.saturating_sub(earlier.redis) }
    }
}

impl std::ops::AddAssign for Cpu {
    fn add_assign(&mut self, other: Cpu) {
        self.client += other.client;
        self.redis += other.redis;
    }
}

impl Cpu {
    pub const ZERO: Cpu = Cpu { client: Duration::ZERO, redis: Duration::ZERO };

    /// Microseconds of (client, Redis) CPU per operation.
    pub fn per(&self, operations: u64) -> (f64, f64) {
        let per = |d: Duration| d.as_secs_f64() * 1e6 / operations.max(1) as f64;
        (per(self.client), per(self.redis))
    }
}

/// Every key matching `pattern`.
pub async fn scan(conn: &mut Connection, pattern: &str) -> Result<Vec<String>, BenchError> {
    let mut keys = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) =
            redis::cmd("SCAN").arg(cursor).arg("MATCH").arg(pattern).arg("COUNT").arg(10_000).query_async(conn).await?;
        keys.extend(batch);
        if next == 0 {
            return Ok(keys);
        }
        cursor = next;
    }
}

/// Redis's own accounting (`INFO commandstats`) since the last reset: calls and microseconds
/// per command. A command a script runs counts under its own name too, and within the script's.
#[derive(Default, Clone)]
pub struct CommandStats(HashMap<String, (u64, u64)>);

impl CommandStats {
    pub async fn reset(bench: &Bench) -> Result<(), BenchError> {
        let () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut bench.connection().await?).await?;
        Ok(())
    }

    pub async fn read(bench: &Bench) -> Result<Self, BenchError> {
        let info: String = redis::cmd("INFO").arg("commandstats").query_async(&mut bench.connection().await?).await?;
        let mut stats = HashMap::new();
        for line in info.lines() {
            let Some((name, fields)) = line.strip_prefix("cmdstat_").and_then(|l| l.split_once(':')) else { continue };
            let field = |key: &str| fields.split(',').find_map(|f| f.strip_prefix(key)?.parse::<u64>().ok()).unwrap_or(0);
            // The benchmark's own bookkeeping is not part of what it measures.
            if !matches!(name, "info" | "config|resetstat" | "ping" | "script|load") {
                stats.insert(name.to_owned(), (field("calls="), field("usec=")));
            }
        }
        Ok(Self(stats))
    }

    /// (calls, microseconds) of one command.
    pub fn of(&self, command: &str) -> (u64, u64) {
        self.0.get(command).copied().unwrap_or_default()
    }

    /// (calls, microseconds) of every command but `excluded`.
    pub fn all_but(&self, excluded: &[&str]) -> (u64, u64) {
        self.0
            .iter()
            .filter(|(name, _)| !excluded.contains(&name.as_str()))
            .fold((0, 0), |(c, u), (_, (calls, usec))| (c + calls, u + usec))
    }
}

impl std::ops::AddAssign<&CommandStats> for CommandStats {
    fn add_assign(&mut self, other: &CommandStats) {
        for (name, (calls, usec)) in &other.0 {
            let entry = self.0.entry(name.clone()).or_default();
            entry.0 += calls;
            entry.1 += usec;
        }
    }
}

/// Loads a sorted set fast: multi-member ZADDs, pipelined.
pub async fn zadd_all(conn: &mut Connection, key: &str, members: impl Iterator<Item = (f64, String)>) -> Result<(), BenchError> {
    let mut members = members.peekable();
    while members.peek().is_some() {
        let mut pipe = redis::pipe();
        for _ in 0..ZADDS_PER_ROUND_TRIP {
            let chunk: Vec<(f64, String)> = members.by_ref().take(ZADD_CHUNK).collect();
            if chunk.is_empty() {
                break;
            }
            pipe.zadd_multiple(key, &chunk).ignore();
        }
        let () = pipe.query_async(conn).await?;
    }
    Ok(())
}

/// Loads the day board of `date` (Asia/Shanghai) with `members` members `u0000000…` and
/// composite scores (`tiebreak::encode`): points skewed like a real board (few high scorers:
/// `1,000,000 · x⁴` for uniform `x`), each reached at some second of that day.
pub async fn load_board(conn: &mut Connection, key: &str, members: u64, date: NaiveDate) -> Result<(), BenchError> {
    let day = Period::on_date(PeriodKind::Day, date, Shanghai);
    let start = day.start.ok_or("a day starts")?.with_timezone(&Utc);
    let mut rng = Rng::new(members);
    let scored = (0..members).map(move |i| {
        let x = rng.below(1 << 20) as f64 / (1 << 20) as f64;
        let points = (1_000_000.0 * x.powi(4)) as i64;
        let reached_at = start + chrono::Duration::seconds(rng.below(86_400) as i64);
        let composite = tiebreak::encode(points, reached_at).expect("points and times within the composite's range");
        (composite, member(i))
    });
    zadd_all(conn, key, scored).await
}

/// The id of the `i`th member of a board loaded by `load_board`.
pub fn member(i: u64) -> String {
    format!("u{i:07}")
}

/// One in-process request to a function's router; the body of a 200 answer.
pub async fn call(router: &Router, request: Request<Body>) -> Result<Bytes, BenchError> {
    let response = router.clone().oneshot(request).await?;
    let status = response.status();
    let bytes = response.into_body().collect().await?.to_bytes();
    if status != StatusCode::OK {
        return Err(format!("the router answered {status}: {}", String::from_utf8_lossy(&bytes)).into());
    }
    Ok(bytes)
}

/// xorshift64: deterministic data without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform enough in `0..bound` for benchmark data.
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// Wall-clock time of one awaited operation, as seen by the client (one round trip included).
pub async fn time<T, E>(operation: impl Future<Output = Result<T, E>>) -> Result<(Duration, T), E> {
    let started = Instant::now();
    let value = operation.await?;
    Ok((started.elapsed(), value))
}
