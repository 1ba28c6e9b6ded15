//! Synthesis of a 24-hour window board (issue 4): `synthesize_hot.lua` — guard, weighted union
//! into the scratch key, RENAME, TTL, meta — against a bare `ZUNIONSTORE` of the same buckets
//! with the same weights, on the same data in the same run.
//!
//! Every bucket holds the same 100,000 items (the union has 100,000 members) with heat
//! 1..=1000. Both methods write the board key, so each replaces a 100,000-item board, as the
//! minute's run does in production. They alternate order every repetition; one untimed run of
//! each first loads the script and warms the caches.

use chrono::{DateTime, Duration, Utc};
use standings::domain::decay::{Curve, minute_of, window_buckets};
use standings::redis::keys::BoardKeys;
use standings::redis::scripts::hot::{Synthesis, synthesize};
use standings::redis::store::Connection;

use crate::harness::{Bench, BenchError, Measurement, Report, Rng, Table, Target, grouped, ratio, time, zadd_all};

const BUCKETS: u32 = 24;
const ITEMS: u64 = 100_000;

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let keys = bench.keys.board("hot-videos");
    let mut conn = bench.connection().await?;
    let first_minute = minute_of(Utc::now());
    let buckets: Vec<(String, f64)> = window_buckets(first_minute, chrono_tz::Asia::Shanghai, BUCKETS)
        .into_iter()
        .zip(Curve::Linear { step: 0.04 }.weights(BUCKETS))
        .map(|(start, weight)| (keys.hot_bucket(start), weight))
        .collect();
    load(&mut conn, &buckets).await?;

    let mut script = Measurement::new("`synthesize_hot.lua` (EVALSHA)");
    let mut raw = Measurement::new("raw `ZUNIONSTORE … WEIGHTS …`");
    synthesize_once(&mut conn, &keys, &buckets, first_minute).await?;
    zunionstore_once(&mut conn, &keys, &buckets).await?;
    for repetition in 0..bench.repetitions {
        let minute = first_minute + Duration::minutes(repetition as i64 + 1);
        if repetition % 2 == 0 {
            script.samples.push(synthesize_once(&mut conn, &keys, &buckets, minute).await?);
            raw.samples.push(zunionstore_once(&mut conn, &keys, &buckets).await?);
        } else {
            raw.samples.push(zunionstore_once(&mut conn, &keys, &buckets).await?);
            script.samples.push(synthesize_once(&mut conn, &keys, &buckets, minute).await?);
        }
    }

    let script_over_raw = ratio(script.median(), raw.median());
    Ok(Report {
        title: "hot-synthesis (scenario 5)".into(),
        setup: format!(
            "A 24-hour window board: {BUCKETS} hourly buckets × {items} items (the union has {items} members), linear weights; \
             the script and a bare `ZUNIONSTORE` of the same buckets alternate, {} runs each after one untimed run.",
            bench.repetitions,
            items = grouped(ITEMS)
        ),
        tables: vec![Table::timings(&[&script, &raw])],
        notes: vec![format!("script / raw ZUNIONSTORE (medians): **{script_over_raw:.3}**")],
        targets: vec![Target::at_most("synthesis, 24 × 100,000", "raw ZUNIONSTORE", script_over_raw, 1.1)],
    })
}

/// Every bucket gets every item, with deterministic heat 1..=1000.
async fn load(conn: &mut Connection, buckets: &[(String, f64)]) -> Result<(), BenchError> {
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    for (key, _) in buckets {
        zadd_all(conn, key, (0..ITEMS).map(|item| ((rng.below(1000) + 1) as f64, format!("item-{item:06}")))).await?;
    }
    Ok(())
}

async fn synthesize_once(
    conn: &mut Connection,
    keys: &BoardKeys,
    buckets: &[(String, f64)],
    minute: DateTime<Utc>,
) -> Result<std::time::Duration, BenchError> {
    let synthesis = Synthesis { minute, buckets: buckets.to_vec(), board_ttl_secs: 300, meta_ttl_secs: (u64::from(BUCKETS) + 1) * 3600 };
    let (elapsed, reply) = time(synthesize(conn, keys, &synthesis)).await?;
    if !reply.ran || reply.members != ITEMS {
        return Err(format!("synthesis did not build the board: {reply:?}").into());
    }
    Ok(elapsed)
}

async fn zunionstore_once(conn: &mut Connection, keys: &BoardKeys, buckets: &[(String, f64)]) -> Result<std::time::Duration, BenchError> {
    let mut union = redis::cmd("ZUNIONSTORE");
    union.arg(keys.hot_board()).arg(buckets.len());
    for (key, _) in buckets {
        union.arg(key);
    }
    union.arg("WEIGHTS");
    for (_, weight) in buckets {
        union.arg(weight);
    }
    let (elapsed, members): (_, u64) = time(union.query_async(conn)).await?;
    if members != ITEMS {
        return Err(format!("ZUNIONSTORE stored {members} members").into());
    }
    Ok(elapsed)
}
