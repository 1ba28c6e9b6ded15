//! One board over a whole Redis Cluster (scenario 13, docs/scaling.md): the same score board
//! with 1 shard and with 12, on the 6-node cluster bench.sh starts (3 primaries, 3 replicas;
//! `STANDINGS_BENCH_CLUSTER_URL`). Writes: 50 clients submitting through `Scores::submit` for
//! a fixed window; the busiest primary's Redis CPU per submission (`INFO cpu` of each primary),
//! submissions/s and round trips per submission. Reads at 1,000,000 members: top-100 and a
//! user's rank and around-me (`Reader::page`, `Reader::around`), p99; a rank among 200,000
//! members tied on one composite against raw `ZREVRANK` in one slot. Memory per member:
//! `MEMORY USAGE` of the period sets over their members.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings::domain::scores::Submission;
use standings::domain::tiebreak::Scale;
use standings::redis::keys::Keys;
use standings::redis::settings::RedisSettings;
use standings::redis::store::Store;
use standings::services::reads::{RankMode, Reader};
use standings::services::scores::Scores;

use crate::harness::Bench;
use crate::harness::{BenchError, Measurement, Report, Rng, Table, Target, grouped, ratio, time};

const CLIENTS: usize = 50;
const WINDOW: Duration = Duration::from_secs(10);
const MEMBERS: u64 = 1_000_000;
const SAMPLES: usize = 300;
const SHARDS: u32 = 12;

fn config() -> Result<Config, BenchError> {
    let board = |name: &str, shards: u32| {
        format!(
            "[[boards]]\nname = \"{name}\"\nkind = \"scores\"\nkeep = \"best\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 100\nshards = {shards}\n"
        )
    };
    Ok(Config::parse(&format!("{}{}{}{}", board("one", 1), board("twelve", SHARDS), board("tied", SHARDS), board("tied-one", 1)))?)
}

/// Members of the tied board, every one at the same composite (256-second ties on a board of
/// wide scores hold that many in a busy window).
const TIED: u64 = 200_000;

/// Loads `TIED` members at one composite into `tied`'s shards and into `tied-one`'s one slot,
/// whose set raw `ZREVRANK` reads too.
async fn load_tied(store: &Store, keys: &Keys, period: &Period, composite: i64) -> Result<String, BenchError> {
    let mut conn = store.connection().await?;
    let layout = keys.layout("tied", SHARDS);
    let shards: Vec<String> = layout.all().iter().map(|shard| shard.period(period)).collect();
    let raw = keys.board("tied-one").period(period);
    for key in shards.iter().chain([&raw]) {
        let _: () = redis::cmd("DEL").arg(key).query_async(&mut conn).await?;
    }
    // Its layout recorded, as a first write records it: a read then probes it once, as
    // `twelve`'s (written through `Scores::submit`) do.
    standings::redis::layout::record_if_absent(&mut conn, keys, "tied", SHARDS, 0).await?;
    let users: Vec<String> = (0..TIED).map(|i| format!("t{i}")).collect();
    for chunk in users.chunks(10_000) {
        let mut by_shard: Vec<Vec<String>> = vec![Vec::new(); SHARDS as usize];
        for user in chunk {
            by_shard[layout.shard_of(user)].extend([composite.to_string(), user.clone()]);
        }
        for (key, args) in shards.iter().zip(by_shard).filter(|(_, args)| !args.is_empty()) {
            let _: () = redis::cmd("ZADD").arg(key).arg(args).query_async(&mut conn).await?;
        }
        let all: Vec<String> = chunk.iter().flat_map(|user| [composite.to_string(), user.clone()]).collect();
        let _: () = redis::cmd("ZADD").arg(&raw).arg(all).query_async(&mut conn).await?;
    }
    Ok(raw)
}

/// Each primary's Redis CPU seconds (user + system) so far.
async fn primaries_cpu(store: &Store) -> Result<Vec<f64>, BenchError> {
    // CLUSTER NODES lists them in the order of the node asked: sorted, so two reads pair up.
    let mut nodes = store.connection().await?.primaries().await?;
    nodes.sort();
    let mut cpu = Vec::new();
    for node in nodes.into_iter().flatten() {
        let mut conn = redis::Client::open(format!("redis://{}:{}", node.0, node.1))?.get_multiplexed_async_connection().await?;
        let info: String = redis::cmd("INFO").arg("cpu").query_async(&mut conn).await?;
        let field = |name: &str| info.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse::<f64>().ok()).unwrap_or(0.0);
        cpu.push(field("used_cpu_sys:") + field("used_cpu_user:"));
    }
    Ok(cpu)
}

struct Writes {
    per_second: f64,
    busiest_cpu_per_write: Duration,
    /// Every primary's, summed: what a submission costs the cluster.
    total_cpu_per_write: Duration,
    round_trips: f64,
}

async fn writes(settings: &RedisSettings, keys: &Keys, config: &Arc<Config>, board: &'static str) -> Result<Writes, BenchError> {
    let mut clients = Vec::new();
    for index in 0..CLIENTS {
        let store = Store::connect(settings)?;
        let scores = Scores::new(config.clone(), keys.clone(), store.clone());
        let warm = Submission { event_id: format!("{board}-warm-{index}"), user_id: format!("u{index}"), score: 1, occurred_at: None };
        scores.submit(board, &warm, Utc::now()).await?;
        clients.push((scores, store));
    }
    let before: u64 = clients.iter().map(|(_, store)| store.round_trips()).sum();
    let probe = Store::connect(settings)?;
    let cpu_before = primaries_cpu(&probe).await?;
    let started = Instant::now();
    let deadline = started + WINDOW;
    let tasks: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(index, (scores, _))| {
            let scores = scores.clone();
            tokio::spawn(async move {
                let mut rng = Rng::new(index as u64 + 1);
                let mut sent = 0u64;
                while Instant::now() < deadline {
                    let submission = Submission {
                        event_id: format!("{board}-{index}-{sent}"),
                        user_id: format!("u{}", rng.below(MEMBERS)),
                        score: rng.below(1_000_000) as i64,
                        occurred_at: None,
                    };
                    scores.submit(board, &submission, Utc::now()).await?;
                    sent += 1;
                }
                Ok::<_, BenchError>(sent)
            })
        })
        .collect();
    let mut sent = 0;
    for task in tasks {
        sent += task.await??;
    }
    let elapsed = started.elapsed();
    let cpu_after = primaries_cpu(&probe).await?;
    let used: Vec<f64> = cpu_after.iter().zip(&cpu_before).map(|(after, before)| after - before).collect();
    let busiest = used.iter().copied().fold(0.0, f64::max);
    let round_trips = clients.iter().map(|(_, store)| store.round_trips()).sum::<u64>() - before;
    Ok(Writes {
        per_second: sent as f64 / elapsed.as_secs_f64(),
        busiest_cpu_per_write: Duration::from_secs_f64(busiest / sent.max(1) as f64),
        total_cpu_per_write: Duration::from_secs_f64(used.iter().sum::<f64>() / sent.max(1) as f64),
        round_trips: round_trips as f64 / sent.max(1) as f64,
    })
}

/// Loads `MEMBERS` members into the all-time set of each board (by shard on `twelve`), the
/// composites a submission would write; the bytes per member of each.
async fn load(store: &Store, keys: &Keys, scale: &Scale) -> Result<(f64, f64), BenchError> {
    let period = Period::containing(PeriodKind::All, Utc::now(), chrono_tz::UTC);
    let mut conn = store.connection().await?;
    let one = keys.board("one").period(&period);
    let layout = keys.layout("twelve", SHARDS);
    let twelve: Vec<String> = layout.all().iter().map(|shard| shard.period(&period)).collect();
    let mut rng = Rng::new(7);
    let reached = scale.time_part(Utc::now())?;
    let mut batches: Vec<Vec<(f64, String)>> = vec![Vec::new(); SHARDS as usize + 1];
    for i in 0..MEMBERS {
        let user = format!("m{i}");
        let composite = (rng.below(1_000_000) as i64 * scale.span + reached) as f64;
        batches[0].push((composite, user.clone()));
        batches[1 + layout.shard_of(&user)].push((composite, user));
        if i % 10_000 == 9_999 || i == MEMBERS - 1 {
            for (b, batch) in batches.iter_mut().enumerate() {
                if batch.is_empty() {
                    continue;
                }
                let key = if b == 0 { &one } else { &twelve[b - 1] };
                let _: () = redis::cmd("ZADD")
                    .arg(key)
                    .arg(batch.iter().flat_map(|(c, m)| [c.to_string(), m.clone()]).collect::<Vec<_>>())
                    .query_async(&mut conn)
                    .await?;
                batch.clear();
            }
        }
    }
    let usage = |key: String| {
        let mut conn = conn.clone();
        async move { redis::cmd("MEMORY").arg("USAGE").arg(key).arg("SAMPLES").arg(0).query_async::<u64>(&mut conn).await }
    };
    let one_bytes = usage(one).await?;
    let mut twelve_bytes = 0;
    for key in twelve {
        twelve_bytes += usage(key).await?;
    }
    Ok((one_bytes as f64 / MEMBERS as f64, twelve_bytes as f64 / MEMBERS as f64))
}

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let url = std::env::var("STANDINGS_BENCH_CLUSTER_URL")
        .map_err(|_| "STANDINGS_BENCH_CLUSTER_URL is not set: bench.sh starts a 6-node cluster")?;
    let mut settings = RedisSettings::standalone(&url);
    settings.cluster = true;
    settings.response_timeout = Duration::from_secs(120);
    let keys = Keys::new(&format!("{}:sharded", bench.keys.prefix()))?;
    let config = Arc::new(config()?);
    let one_writes = writes(&settings, &keys, &config, "one").await?;
    let twelve_writes = writes(&settings, &keys, &config, "twelve").await?;

    let store = Store::connect(&settings)?;
    let (one, twelve) = (config.board("one").ok_or("board one")?, config.board("twelve").ok_or("board twelve")?);
    let period = Period::containing(PeriodKind::All, Utc::now(), chrono_tz::UTC);
    let scale = standings::domain::scores::scale(one, &period);
    for board in ["one", "twelve"] {
        for shard in keys.layout(board, if board == "one" { 1 } else { SHARDS }).all() {
            let _: () = redis::cmd("DEL").arg(shard.period(&period)).query_async(&mut store.connection().await?).await?;
        }
    }
    let (one_bytes, twelve_bytes) = load(&store, &keys, &scale).await?;
    let reader = Reader::new(keys.clone(), store.clone());
    let (tied, tied_one) = (config.board("tied").ok_or("board tied")?, config.board("tied-one").ok_or("board tied-one")?);
    let raw_tied = load_tied(&store, &keys, &period, scale.time_part(Utc::now())? + 500 * scale.span).await?;
    let mut raw_conn = store.connection().await?;
    let mut measured: Vec<Measurement> = [
        "top-100, 1 shard",
        "top-100, 12 shards",
        "a user's rank, 1 shard",
        "a user's rank, 12 shards",
        "around-me (5 each side), 1 shard",
        "around-me (5 each side), 12 shards",
        "raw `ZREVRANK`, 200,000 tied, 1 slot",
        "a user's rank, 200,000 tied, 1 shard",
        "a user's rank, 200,000 tied, 12 shards",
    ]
    .into_iter()
    .map(Measurement::new)
    .collect();
    let mut rng = Rng::new(11);
    for sample in 0..=SAMPLES * bench.repetitions {
        let user = format!("m{}", rng.below(MEMBERS));
        let tied_user = format!("t{}", rng.below(TIED));
        let mut zrevrank = redis::cmd("ZREVRANK");
        zrevrank.arg(&raw_tied).arg(&tied_user);
        let timings = [
            time(reader.page(one, &period, 0, 100, RankMode::Unique)).await?.0,
            time(reader.page(twelve, &period, 0, 100, RankMode::Unique)).await?.0,
            time(reader.around(one, &period, &user, 0, RankMode::Unique)).await?.0,
            time(reader.around(twelve, &period, &user, 0, RankMode::Unique)).await?.0,
            time(reader.around(one, &period, &user, 5, RankMode::Unique)).await?.0,
            time(reader.around(twelve, &period, &user, 5, RankMode::Unique)).await?.0,
            time(zrevrank.query_async::<Option<u64>>(&mut raw_conn)).await?.0,
            time(reader.around(tied_one, &period, &tied_user, 0, RankMode::Unique)).await?.0,
            time(reader.around(tied, &period, &tied_user, 0, RankMode::Unique)).await?.0,
        ];
        if sample > 0 {
            for (measurement, elapsed) in measured.iter_mut().zip(timings) {
                measurement.samples.push(elapsed);
            }
        }
    }
    // Quiescent reads agree: the same page and the same rank from either layout.
    let (page_one, page_twelve) =
        (reader.page(one, &period, 0, 100, RankMode::Unique).await?, reader.page(twelve, &period, 0, 100, RankMode::Unique).await?);
    if page_one.entries.iter().map(|e| (&e.holder.user_id, e.rank)).ne(page_twelve.entries.iter().map(|e| (&e.holder.user_id, e.rank))) {
        return Err("the sharded top-100 differs from the one-slot board's".into());
    }
    for user in ["t0", "t99999", "t199999"] {
        let raw: Option<u64> = redis::cmd("ZREVRANK").arg(&raw_tied).arg(user).query_async(&mut raw_conn).await?;
        let sharded = reader.around(tied, &period, user, 0, RankMode::Unique).await?.rank;
        if sharded != raw.map(|rank| rank + 1) {
            return Err(format!("{user}: rank {sharded:?} over 12 tied shards, ZREVRANK {raw:?} in one slot").into());
        }
    }
    // The run's keys on the cluster go with it.
    let mut conn = store.connection().await?;
    for node in conn.primaries().await? {
        let mut cursor = 0;
        loop {
            let (next, found) = conn.scan_page(&node, cursor, &format!("{}:*", keys.prefix())).await?;
            for key in found {
                let _: () = redis::cmd("DEL").arg(key).query_async(&mut conn).await?;
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }

    let cpu_ratio = twelve_writes.busiest_cpu_per_write.as_secs_f64() / one_writes.busiest_cpu_per_write.as_secs_f64();
    let rate_ratio = twelve_writes.per_second / one_writes.per_second;
    let top_ratio = ratio(measured[1].percentile(99.0), measured[0].percentile(99.0));
    let rank_ratio = ratio(measured[3].percentile(99.0), measured[2].percentile(99.0));
    let around_ratio = ratio(measured[5].percentile(99.0), measured[4].percentile(99.0));
    let tied_ratio = ratio(measured[8].percentile(99.0), measured[7].percentile(99.0));
    let tied_raw_ratio = ratio(measured[8].percentile(99.0), measured[6].percentile(99.0));
    let memory_ratio = twelve_bytes / one_bytes;
    let mut table = Table::new(&[
        "board",
        "submissions/s, 50 clients",
        "busiest primary's Redis CPU / submission",
        "all primaries' Redis CPU / submission",
        "round trips / submission",
        "bytes / member",
    ]);
    for (name, w, bytes) in [("1 shard", &one_writes, one_bytes), ("12 shards", &twelve_writes, twelve_bytes)] {
        table.row(vec![
            name.into(),
            format!("{:.0}", w.per_second),
            format!("{:.1} µs", w.busiest_cpu_per_write.as_secs_f64() * 1e6),
            format!("{:.1} µs", w.total_cpu_per_write.as_secs_f64() * 1e6),
            format!("{:.3}", w.round_trips),
            format!("{bytes:.1}"),
        ]);
    }
    Ok(Report {
        title: "one board over a Redis Cluster: 1 shard vs 12 (scenario 13)".into(),
        setup: format!(
            "The 6-node test cluster (3 primaries with a replica each) on this machine. Writes: {CLIENTS} clients, each a store of its own, \
             submitting best-kept scores of users drawn from {} through `Scores::submit` for {} s per board. Reads: {} members loaded \
             into each board, {} samples of each read, interleaved, one client.",
            grouped(MEMBERS),
            WINDOW.as_secs(),
            grouped(MEMBERS),
            SAMPLES * bench.repetitions
        ),
        tables: vec![table, Table::latencies(&measured.iter().collect::<Vec<_>>())],
        notes: vec![format!(
            "12 shards / 1 shard: busiest primary's Redis CPU per submission **{cpu_ratio:.2}×** (3 primaries: 0.33× ideal), submissions/s \
             **{rate_ratio:.2}×**, top-100 p99 **{top_ratio:.2}×**, a user's rank p99 **{rank_ratio:.2}×**, around-me p99 **{around_ratio:.2}×**, a rank among \
             {} members tied on one composite **{tied_ratio:.2}×** the one-slot board's rank p99 (a `ZREVRANK` in its read; \
             {tied_raw_ratio:.2}× the raw command's), memory per member \
             **{memory_ratio:.2}×**. All 50 clients and the cluster share this machine's 2 cores: the events/s row is bounded by them, \
             not by one primary's thread.",
            grouped(TIED)
        )],
        targets: vec![
            Target::at_most("busiest primary's Redis CPU / submission, 12 shards", "the board with 1 shard", cpu_ratio, 0.45),
            Target::at_least("submissions/s, 50 clients, 12 shards", "the board with 1 shard", rate_ratio, 2.0),
            Target::at_most("top-100 p99, 1M members, 12 shards", "the board with 1 shard", top_ratio, 1.5),
            Target::at_most("a user's rank p99, 1M members, 12 shards", "the board with 1 shard", rank_ratio, 1.5),
            Target::at_most("around-me p99, 1M members, 12 shards", "the board with 1 shard", around_ratio, 2.0),
            Target::at_most("a rank p99, 200,000 tied, 12 shards", "the one-slot board's (its `ZREVRANK`)", tied_ratio, 2.0),
            Target::at_most("memory per member, 12 shards", "the board with 1 shard", memory_ratio, 1.1),
            Target::at_most("round trips per submission, 12 shards", "1 (one script call)", twelve_writes.round_trips, 1.0),
        ],
    })
}
