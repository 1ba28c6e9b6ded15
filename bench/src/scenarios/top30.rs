//! Top 30 with profiles on a 1,000,000-member board (scenario 3): p50/p99 latency of
//! `Reader::page` (the `read_board` script and one pipeline of profiles) and of
//! `GET /v1/boards/{board}/top` through the `query` router in process, against a bare
//! `ZREVRANGE key 0 29 WITHSCORES` — and, for a like-for-like view, that ZREVRANGE followed by
//! a pipeline of the 30 profile hashes (what a hand-written read of the seed's design does).

use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use chrono::{Duration, Utc};
use chrono_tz::Asia::Shanghai;
use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings::redis::store::Connection;
use standings::services::profiles::{self, Profile};
use standings::services::reads::{RankMode, Reader};

use crate::harness::{Bench, BenchError, CommandStats, Measurement, Report, Table, Target, call, grouped, load_board, ratio, time};

const MEMBERS: u64 = 1_000_000;
const TOP: u64 = 30;
/// Members with a profile, from the top.
const PROFILES: isize = 1_000;
/// Latency samples of each method per repetition.
const SAMPLES: usize = 300;
/// Reads of each method alone for Redis's accounting of its time.
const ACCOUNTED: usize = 500;

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let config = Arc::new(Config::default_boards());
    let board = config.board("activity").ok_or("the default configuration has an activity board")?;
    // Yesterday's board: a full day of scores, none of them in the future.
    let date = Utc::now().with_timezone(&Shanghai).date_naive() - Duration::days(1);
    let period = Period::on_date(PeriodKind::Day, date, Shanghai);
    let key = bench.keys.board(&board.name).period(&period);
    let mut conn = bench.connection().await?;
    load_board(&mut conn, &key, MEMBERS, date).await?;
    let top: Vec<String> = redis::cmd("ZREVRANGE").arg(&key).arg(0).arg(PROFILES - 1).query_async(&mut conn).await?;
    for (rank, user) in top.iter().enumerate() {
        let profile = Profile {
            nickname: Some(format!("Player {}", rank + 1)),
            avatar_url: Some(format!("https://cdn.example.com/avatars/{user}.png")),
            title: Some("Regular".into()),
        };
        profiles::put_profile(&bench.store, &bench.keys, user, &profile, chrono::Utc::now()).await?;
    }

    let reader = Reader::new(bench.keys.clone(), bench.store.clone());
    let query =
        query::router(Arc::new(query::App::new(config.clone(), bench.keys.clone(), bench.store.clone(), standings::system_clock())));
    let path = format!("/v1/boards/{}/top?period=day&at={date}&limit={TOP}", board.name);
    let mut page = Measurement::new("`Reader::page` (`read_board.lua` + profiles pipeline)");
    let mut routed = Measurement::new("`GET /v1/boards/{board}/top` (query router, in process)");
    let mut raw = Measurement::new("raw `ZREVRANGE key 0 29 WITHSCORES`");
    let mut raw_profiles = Measurement::new("raw `ZREVRANGE` + pipelined `HGETALL` ×30");
    for sample in 0..=SAMPLES * bench.repetitions {
        let (elapsed, result) = time(reader.page(board, &period, 0, TOP, RankMode::Unique)).await?;
        if result.entries.len() != TOP as usize || result.entries.iter().any(|e| e.holder.profile.is_none()) {
            return Err("the page is not 30 entries with profiles".into());
        }
        let (routed_elapsed, _) = time(call(&query, Request::get(path.as_str()).body(Body::empty())?)).await?;
        let (raw_elapsed, _) = time(zrevrange(&mut conn, &key)).await?;
        let (raw_profiles_elapsed, _) = time(zrevrange_with_profiles(&mut conn, bench, &key)).await?;
        // The first round warms connections and scripts.
        if sample > 0 {
            page.samples.push(elapsed);
            routed.samples.push(routed_elapsed);
            raw.samples.push(raw_elapsed);
            raw_profiles.samples.push(raw_profiles_elapsed);
        }
    }

    // Where Redis's time goes, each method alone: its own accounting.
    CommandStats::reset(bench).await?;
    for _ in 0..ACCOUNTED {
        reader.page(board, &period, 0, TOP, RankMode::Unique).await?;
    }
    let page_stats = CommandStats::read(bench).await?;
    CommandStats::reset(bench).await?;
    for _ in 0..ACCOUNTED {
        zrevrange(&mut conn, &key).await?;
    }
    let raw_stats = CommandStats::read(bench).await?;
    let per_read = |(_, micros): (u64, u64)| micros as f64 / ACCOUNTED as f64;
    let (script_calls, _) = page_stats.all_but(&["evalsha", "hgetall"]);

    let p99 = ratio(page.percentile(99.0), raw.percentile(99.0));
    Ok(Report {
        title: "top-30 with profiles, 1,000,000 members (scenario 3)".into(),
        setup: format!(
            "A day board of {} members (composite scores from `tiebreak::encode`, points skewed: few high scorers, so the \
             top 30 have distinct points), profiles for the top {}. {} samples of each method, interleaved, one client.",
            grouped(MEMBERS),
            grouped(PROFILES as u64),
            SAMPLES * bench.repetitions
        ),
        tables: vec![Table::latencies(&[&page, &routed, &raw, &raw_profiles])],
        notes: vec![
            format!(
                "Reader::page / raw ZREVRANGE: p50 **{:.2}**, p99 **{p99:.2}**; Reader::page / raw ZREVRANGE + profiles: p50 **{:.2}**, \
             p99 **{:.2}**; router / Reader::page: p50 **{:.2}**",
                ratio(page.median(), raw.median()),
                ratio(page.median(), raw_profiles.median()),
                ratio(page.percentile(99.0), raw_profiles.percentile(99.0)),
                ratio(routed.median(), page.median()),
            ),
            format!(
                "Inside Redis per read (`INFO commandstats`, {ACCOUNTED} reads of each alone): `read_board.lua` **{:.1} µs** ({:.0} commands \
             in it, {:.1} µs), the 30 profile `HGETALL`s {:.1} µs; a bare `ZREVRANGE` **{:.1} µs**. The page is two round trips by \
             design: the board's script, then the profiles (other slots on a cluster).",
                per_read(page_stats.of("evalsha")),
                script_calls as f64 / ACCOUNTED as f64,
                per_read(page_stats.all_but(&["evalsha", "hgetall"])),
                per_read(page_stats.of("hgetall")),
                per_read(raw_stats.of("zrevrange")),
            ),
        ],
        targets: vec![Target::at_most("top-30 p99, 1M members", "raw ZREVRANGE", p99, 2.0)],
    })
}

async fn zrevrange(conn: &mut Connection, key: &str) -> Result<Vec<(String, f64)>, BenchError> {
    let entries: Vec<(String, f64)> = redis::cmd("ZREVRANGE").arg(key).arg(0).arg(TOP - 1).arg("WITHSCORES").query_async(conn).await?;
    if entries.len() != TOP as usize {
        return Err("ZREVRANGE did not return 30 entries".into());
    }
    Ok(entries)
}

async fn zrevrange_with_profiles(conn: &mut Connection, bench: &Bench, key: &str) -> Result<(), BenchError> {
    let entries = zrevrange(conn, key).await?;
    let members: Vec<&str> = entries.iter().map(|(member, _)| member.as_str()).collect();
    let found = profiles::get_many(&bench.store, &bench.keys, &members).await?;
    if found.iter().any(Option::is_none) {
        return Err("a top member has no profile".into());
    }
    Ok(())
}
