//! Benchmark scenario (not a test): the archive job's throughput next to raw BatchWriteItem, to
//! the same DynamoDB endpoint in the same run.
//!
//! - raw: the season's items, built in memory, written 25 per BatchWriteItem with the job's
//!   concurrency into a fresh table — the ceiling the endpoint allows;
//! - archive: the same members on a live Redis board, archived by the real job into another
//!   fresh table — freeze, page reads, checkpoints, verification and release included.
//!
//! Needs `REDIS_URL` and a DynamoDB endpoint (`AWS_ENDPOINT_URL_DYNAMODB` for a local one);
//! `./scripts/bench-archive.sh [members]` starts redis-server and moto_server and runs it.
//! Self-contained so the bench suite can include it as is.

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use archive::{Archiver, Settings, Status};
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use standings::archiving::Standing;
use standings::config::Config;
use standings::keys::Keys;
use standings::season_table::{entry_item, put_request, ArchiveSink, SeasonTable, Shard, MAX_BATCH_WRITE};
use standings::store::{RedisSettings, Store};
use standings::tiebreak;

type BenchError = Box<dyn Error + Send + Sync>;

const BOARD: &str = "points";
const SEASON: &str = "2026-10";

/// One side of the comparison.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Throughput {
    pub items: u64,
    pub seconds: f64,
    pub items_per_second: f64,
}

impl Throughput {
    fn measured(items: u64, elapsed: Duration) -> Self {
        let seconds = elapsed.as_secs_f64();
        Self { items, seconds, items_per_second: items as f64 / seconds }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ArchiveBench {
    pub members: u64,
    pub raw_batch_write: Throughput,
    pub archive_job: Throughput,
    /// archive_job / raw_batch_write items per second.
    pub ratio: f64,
}

/// `members` final standings: distinct points, so the rank order is known.
fn standings(members: u64, season_start: DateTime<Utc>) -> Vec<Standing> {
    (1..=members)
        .map(|rank| Standing {
            rank,
            user_id: format!("bench-user-{rank}"),
            points: (members - rank + 1) as i64,
            reached_at: season_start + chrono::Duration::seconds(rank as i64),
        })
        .collect()
}

async fn fresh_table(name: String) -> Result<SeasonTable, BenchError> {
    let table = SeasonTable::connect_with_attempt_timeout(name, Duration::from_secs(60)).await;
    table.create_if_missing().await?;
    Ok(table)
}

async fn raw_batch_write(table: &SeasonTable, standings: &[Standing], concurrency: usize) -> Result<Throughput, BenchError> {
    let started = Instant::now();
    futures::stream::iter(standings.chunks(MAX_BATCH_WRITE))
        .map(|chunk| async move {
            let mut requests: Vec<_> =
                chunk.iter().map(|s| put_request(entry_item(BOARD, SEASON, standings.len() as u64, s))).collect();
            while !requests.is_empty() {
                requests = table.batch_write(requests).await?;
            }
            Ok::<_, BenchError>(())
        })
        .buffer_unordered(concurrency)
        .try_collect::<()>()
        .await?;
    Ok(Throughput::measured(standings.len() as u64, started.elapsed()))
}

async fn seed(redis_url: &str, key: &str, standings: &[Standing]) -> Result<(), BenchError> {
    let mut conn = redis::Client::open(redis_url)?.get_multiplexed_async_connection().await?;
    for chunk in standings.chunks(1000) {
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(key);
        for standing in chunk {
            zadd.arg(tiebreak::encode(standing.points, standing.reached_at)?).arg(&standing.user_id);
        }
        let _: u64 = zadd.query_async(&mut conn).await?;
    }
    Ok(())
}

pub async fn run(members: u64) -> Result<ArchiveBench, BenchError> {
    let redis_url = std::env::var("REDIS_URL").map_err(|_| "REDIS_URL is not set")?;
    let config = Arc::new(Config::default_boards());
    let timezone = config.board(BOARD).ok_or("no points board")?.timezone;
    let season = standings::archiving::season_named(SEASON, timezone).ok_or("bad season")?;
    let run_id = format!("bench-{}", std::process::id());
    let standings = standings(members, season.start.ok_or("season start")?.with_timezone(&Utc));
    let settings = Settings::default();

    let raw_table = fresh_table(format!("{run_id}-raw")).await?;
    let raw = raw_batch_write(&raw_table, &standings, settings.concurrency).await?;

    let keys = Keys::new(&run_id)?;
    seed(&redis_url, &keys.board(BOARD).period(&season), &standings).await?;
    let table = fresh_table(format!("{run_id}-archive")).await?;
    let store = Store::connect(&RedisSettings::standalone(&redis_url))?;
    let after_season: DateTime<Utc> = season.end.ok_or("season end")?.with_timezone(&Utc) + chrono::Duration::hours(1);
    let archiver = Archiver::new(config, keys.clone(), store, table.clone(), table.clone(), Arc::new(move || after_season), settings);
    let started = Instant::now();
    let report = archiver.archive_season(BOARD, SEASON, Shard::WHOLE, Utc::now() + chrono::Duration::days(1)).await?;
    let job = Throughput::measured(report.items_written, started.elapsed());
    if report.status != Status::Complete || report.items_written != members {
        return Err(format!("the archive did not complete: {report:?}").into());
    }

    for table in [&raw_table, &table] {
        table.client().delete_table().table_name(table.name()).send().await?;
    }
    let mut conn = redis::Client::open(redis_url.as_str())?.get_multiplexed_async_connection().await?;
    let _: u64 = redis::cmd("DEL").arg(keys.board(BOARD).guard()).query_async(&mut conn).await?;

    let ratio = job.items_per_second / raw.items_per_second;
    Ok(ArchiveBench { members, raw_batch_write: raw, archive_job: job, ratio })
}
