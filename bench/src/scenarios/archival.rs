//! Archival of a finished season (issue 5): the real archive job against raw `BatchWriteItem`
//! of the same items to the same DynamoDB endpoint (`AWS_ENDPOINT_URL_DYNAMODB`: the
//! moto_server scripts/bench.sh starts), with the job's concurrency, in the same run.
//!
//! - raw: the season's items, built in memory, written 25 per `BatchWriteItem` into a fresh
//!   table — the ceiling the endpoint allows;
//! - archive: the same members on a live Redis board, archived by the real job into another
//!   fresh table — freeze, page reads, checkpoints, verification and release included.
//!
//! The two alternate order every repetition; every repetition uses fresh tables and a fresh
//! board.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::WriteRequest;
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use standings::archive::freeze::Standing;
use standings::archive::job::{Archiver, Settings, Status};
use standings::archive::table::{ArchiveSink, MAX_BATCH_WRITE, SeasonTable, Shard, entry_item, put_request};
use standings::domain::config::Config;
use standings::domain::period::Period;
use standings::domain::tiebreak;

use crate::harness::{Bench, BenchError, Measurement, Report, Table, Target, grouped, ratio, zadd_all};

const BOARD: &str = "points";
const SEASON: &str = "2026-10";
const MEMBERS: u64 = 20_000;
/// Each repetition writes the season twice through moto (about half a minute here).
const MAX_REPETITIONS: usize = 3;

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
        .map_err(|_| "AWS_ENDPOINT_URL_DYNAMODB is not set: run scripts/bench.sh, which starts moto_server")?;
    let config = Arc::new(Config::default_boards());
    let season =
        standings::archive::freeze::season_named(SEASON, config.board(BOARD).ok_or("no points board")?.timezone).ok_or("bad season")?;
    let standings = standings(MEMBERS, season.start.ok_or("season start")?.with_timezone(&Utc));
    let settings = Settings::default();

    let mut raw = Measurement::new(format!(
        "raw `BatchWriteItem` × {} (25 items each, {} in flight)",
        grouped(MEMBERS.div_ceil(25)),
        settings.concurrency
    ));
    let mut job = Measurement::new("archive job (freeze, read, write, checkpoint, verify, release)");
    let repetitions = bench.repetitions.min(MAX_REPETITIONS);
    for repetition in 0..repetitions {
        let tables = format!("{}-{repetition}", bench.keys.prefix());
        if repetition % 2 == 0 {
            raw.samples.push(raw_batch_write(&format!("{tables}-raw"), &standings, settings.concurrency).await?);
            job.samples.push(archive_job(bench, &config, &season, &format!("{tables}-job"), &standings).await?);
        } else {
            job.samples.push(archive_job(bench, &config, &season, &format!("{tables}-job"), &standings).await?);
            raw.samples.push(raw_batch_write(&format!("{tables}-raw"), &standings, settings.concurrency).await?);
        }
        // The next repetition archives the same season again: a fresh board and checkpoints.
        bench.clean().await?;
    }

    let per_second = |duration: Duration| format!("{:.0}", MEMBERS as f64 / duration.as_secs_f64());
    let job_over_raw = ratio(raw.median(), job.median());
    Ok(Report {
        title: format!("archival: a season of {} members to DynamoDB (scenario 6)", grouped(MEMBERS)),
        setup: format!(
            "The `points` board's season {SEASON} with {members} members (distinct points) archived by the real job into a fresh \
             table of moto_server (the scripts' local DynamoDB), against the same {members} items written by raw \
             `BatchWriteItem`s with the job's concurrency into another fresh table; {repetitions} runs each, alternating.",
            members = grouped(MEMBERS)
        ),
        tables: vec![
            Table::timings(&[&job, &raw]).with_column("items/s (median)", vec![per_second(job.median()), per_second(raw.median())]),
        ],
        notes: vec![format!("archive job / raw BatchWriteItem (items/s): **{job_over_raw:.2}**")],
        targets: vec![Target::at_least("archival items/s", "raw BatchWriteItem", job_over_raw, 0.8)],
    })
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

async fn fresh_table(name: &str) -> Result<SeasonTable, BenchError> {
    // moto answers large pages far slower than DynamoDB: give each attempt a minute.
    let table = SeasonTable::connect_with_attempt_timeout(name.to_owned(), Duration::from_secs(60)).await;
    table.create_if_missing().await?;
    Ok(table)
}

async fn drop_table(table: &SeasonTable) -> Result<(), BenchError> {
    table.client().delete_table().table_name(table.name()).send().await?;
    Ok(())
}

async fn raw_batch_write(table: &str, standings: &[Standing], concurrency: usize) -> Result<Duration, BenchError> {
    let table = fresh_table(table).await?;
    let batches = batches(standings);
    let started = Instant::now();
    futures::stream::iter(batches).map(|batch| write_all(&table, batch)).buffer_unordered(concurrency).try_collect::<()>().await?;
    let elapsed = started.elapsed();
    drop_table(&table).await?;
    Ok(elapsed)
}

/// The season's items, `MAX_BATCH_WRITE` per request.
fn batches(standings: &[Standing]) -> Vec<Vec<WriteRequest>> {
    let total = standings.len() as u64;
    standings
        .chunks(MAX_BATCH_WRITE)
        .map(|chunk| chunk.iter().map(|s| put_request(entry_item(BOARD, SEASON, total, s))).collect())
        .collect()
}

/// One batch, its unprocessed items sent again until none are left (as the job does).
async fn write_all(table: &SeasonTable, mut requests: Vec<WriteRequest>) -> Result<(), BenchError> {
    while !requests.is_empty() {
        requests = table.batch_write(requests).await?;
    }
    Ok(())
}

async fn archive_job(
    bench: &Bench,
    config: &Arc<Config>,
    season: &Period,
    table: &str,
    standings: &[Standing],
) -> Result<Duration, BenchError> {
    let mut conn = bench.connection().await?;
    let scored = standings.iter().map(|s| Ok((tiebreak::encode(s.points, s.reached_at)?, s.user_id.clone())));
    let scored: Vec<(f64, String)> = scored.collect::<Result<_, BenchError>>()?;
    zadd_all(&mut conn, &bench.keys.board(BOARD).period(season), scored.into_iter()).await?;

    let table = fresh_table(table).await?;
    let after_season = season.end.ok_or("season end")?.with_timezone(&Utc) + chrono::Duration::hours(1);
    let archiver = Archiver::new(
        config.clone(),
        bench.keys.clone(),
        bench.store.clone(),
        table.clone(),
        table.clone(),
        Arc::new(move || after_season),
        Settings::default(),
    );
    let started = Instant::now();
    let report = archiver.archive_season(BOARD, SEASON, Shard::WHOLE, Utc::now() + chrono::Duration::days(1)).await?;
    let elapsed = started.elapsed();
    if report.status != Status::Complete || report.items_written != standings.len() as u64 {
        return Err(format!("the archive did not complete: {report:?}").into());
    }
    drop_table(&table).await?;
    Ok(elapsed)
}
