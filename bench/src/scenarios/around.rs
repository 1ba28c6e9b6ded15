//! My rank + 5 around me (scenario 4) on a 10,000-member board and a big one (10,000,000
//! members unless `--around-members` says otherwise): how the cost of `Reader::around` (the `read_board`
//! script in member mode and one pipeline of profiles) grows with the board, beside the same
//! growth of a raw `ZREVRANK` + `ZREVRANGE rank-5 rank+5 WITHSCORES`.

use chrono::{Duration, Utc};
use chrono_tz::Asia::Shanghai;
use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings::redis::store::Connection;
use standings::services::reads::{RankMode, Reader};

use crate::harness::{Bench, BenchError, Measurement, Report, Rng, Table, Target, grouped, load_board, member, ratio, time};

const SMALL: u64 = 10_000;
const AROUND: u64 = 5;
/// Latency samples of each method and size per repetition.
const SAMPLES: usize = 300;

struct Size {
    members: u64,
    period: Period,
    key: String,
    reader: Measurement,
    raw: Measurement,
}

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let big_members = bench.around_members;
    let config = Config::default_boards();
    let board = config.board("activity").ok_or("the default configuration has an activity board")?;
    let mut conn = bench.connection().await?;
    // Two days of one board: the same key layout, two sizes.
    let today = Utc::now().with_timezone(&Shanghai).date_naive();
    let mut sizes = Vec::new();
    for (members, date) in [(SMALL, today - Duration::days(1)), (big_members, today - Duration::days(2))] {
        let period = Period::on_date(PeriodKind::Day, date, Shanghai);
        let key = bench.keys.board(&board.name).period(&period);
        eprintln!("  loading {} members…", grouped(members));
        load_board(&mut conn, &key, members, date).await?;
        sizes.push(Size {
            members,
            period,
            key,
            reader: Measurement::new(format!("`Reader::around`, {} members", grouped(members))),
            raw: Measurement::new(format!("raw `ZREVRANK` + `ZREVRANGE`, {} members", grouped(members))),
        });
    }

    let reader = Reader::new(bench.keys.clone(), bench.store.clone());
    let mut rng = Rng::new(42);
    for sample in 0..=SAMPLES * bench.repetitions {
        for size in &mut sizes {
            let user = member(rng.below(size.members));
            let (elapsed, standing) = time(reader.around(board, &size.period, &user, AROUND, RankMode::Unique)).await?;
            if standing.rank.is_none() || standing.around.len() != (2 * AROUND + 1) as usize {
                return Err(format!("{user} was not found with {AROUND} on each side").into());
            }
            let (raw_elapsed, ()) = time(raw_around(&mut conn, &size.key, &user)).await?;
            // The first round warms connections and scripts.
            if sample > 0 {
                size.reader.samples.push(elapsed);
                size.raw.samples.push(raw_elapsed);
            }
        }
    }

    let (small, big) = (&sizes[0], &sizes[1]);
    let growth = |m: fn(&Size) -> &Measurement, percentile: f64| ratio(m(big).percentile(percentile), m(small).percentile(percentile));
    let (reader_p50, reader_p99) = (growth(|s| &s.reader, 50.0), growth(|s| &s.reader, 99.0));
    let (raw_p50, raw_p99) = (growth(|s| &s.raw, 50.0), growth(|s| &s.raw, 99.0));
    Ok(Report {
        title: format!("around-me: rank + {AROUND} on each side, {} vs {} members (scenario 4)", grouped(SMALL), grouped(big_members)),
        setup: format!(
            "Two day boards loaded like scenario 3's (no profiles: the profile pipeline still runs, for 11 members). Each sample \
             asks for a uniformly random member of each board. {} samples per method and size, interleaved.",
            SAMPLES * bench.repetitions,
        ),
        tables: vec![Table::latencies(&[&small.reader, &big.reader, &small.raw, &big.raw])],
        notes: vec![format!(
            "{} / {} members: Reader::around p50 **{reader_p50:.2}**, p99 **{reader_p99:.2}**; raw p50 **{raw_p50:.2}**, \
             p99 **{raw_p99:.2}**",
            grouped(big_members),
            grouped(SMALL)
        )],
        targets: vec![Target::at_most(format!("around-me p50, {} members", grouped(big_members)), "at 10,000", reader_p50, 2.0)],
    })
}

async fn raw_around(conn: &mut Connection, key: &str, user: &str) -> Result<(), BenchError> {
    let rank: Option<u64> = redis::cmd("ZREVRANK").arg(key).arg(user).query_async(conn).await?;
    let rank = rank.ok_or("the member is on the board")?;
    let start = rank.saturating_sub(AROUND);
    let entries: Vec<(String, f64)> =
        redis::cmd("ZREVRANGE").arg(key).arg(start).arg(start + 2 * AROUND).arg("WITHSCORES").query_async(conn).await?;
    if entries.is_empty() {
        return Err("ZREVRANGE around the member is empty".into());
    }
    Ok(())
}
