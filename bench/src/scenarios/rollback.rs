//! Recovery from a snapshot (issue 57, docs/journal.md#rollbacks): a board's journal of a
//! tenth of LINES lines drained, the store's snapshot taken (`SAVE`), LINES more lines written
//! and drained, then Redis loaded again from that snapshot (`DEBUG RELOAD NOSAVE`: the same
//! process, every key as it was at the `SAVE`, as a cache restored from last night's backup or
//! a redis-server restarted from its RDB). The drain's next run fences the board; one restore
//! brings it back. Measured: the restore's time and lines a second, its CPU and Redis's, and
//! every key of the board against its value before the rollback (`DEBUG DIGEST-VALUE`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use journal::{Drainer, Restorer, S3Objects, Status};
use standings::runtime::metrics::Metrics;

use super::restore::{board, drain_all, write};
use crate::harness::{Bench, BenchError, Report, Table, Target, grouped, scan};

/// Lines after the snapshot: the million (`STANDINGS_BENCH_RESTORE_LINES` for a
/// shorter try); a tenth of it before.
const LINES: u64 = 1_000_000;
/// One invocation of the `journal` function.
const INVOCATION: Duration = Duration::from_secs(15 * 60);

/// Every key of the run but the journals' streams and the notices (rank moves are not
/// journaled), with its value's digest.
async fn digests(bench: &Bench) -> Result<HashSet<(String, String)>, BenchError> {
    let mut conn = bench.connection().await?;
    let keys: Vec<String> = scan(&mut conn, &format!("{}:*", bench.keys.prefix()))
        .await?
        .into_iter()
        .filter(|key| !key.ends_with(":journal") && !key.contains(":notice"))
        .collect();
    let mut all = HashSet::with_capacity(keys.len());
    for chunk in keys.chunks(1_000) {
        let digests: Vec<String> = redis::cmd("DEBUG").arg("DIGEST-VALUE").arg(chunk).query_async(&mut conn).await?;
        all.extend(chunk.iter().cloned().zip(digests));
    }
    Ok(all)
}

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let after = std::env::var("STANDINGS_BENCH_RESTORE_LINES").ok().and_then(|n| n.parse().ok()).unwrap_or(LINES);
    let before = after / 10;
    let config = Arc::new(board());
    let keys = bench.keys.clone().with_journal(true);
    bench.born(&config).await?;
    let client = journal::s3_client().await;
    let bucket = format!("{}-rollback", bench.keys.prefix()).to_lowercase().replace(['_', ':'], "-");
    client.create_bucket().bucket(&bucket).send().await?;
    let objects = S3Objects::new(client, &bucket);
    let drainer =
        Drainer::new(config.clone(), keys.clone(), bench.store.clone(), objects.clone(), Metrics::with_sink("bench", Arc::new(|_| ())));
    let mut conn = bench.connection().await?;

    write(bench, &config, &keys, 0..before).await?;
    drain_all(&drainer).await?;
    let () = redis::cmd("SAVE").query_async(&mut conn).await?;
    let writing = Instant::now();
    write(bench, &config, &keys, before..before + after).await?;
    let wrote = writing.elapsed();
    let draining = Instant::now();
    let drained = drain_all(&drainer).await?;
    let drain_took = draining.elapsed();
    let expected = digests(bench).await?;

    // Last night's snapshot: every key as it was at the `SAVE`.
    let () = redis::cmd("DEBUG").arg("RELOAD").arg("NOSAVE").query_async(&mut conn).await?;
    let stale = digests(bench).await?;
    let stale_keys = stale.iter().filter(|kept| !expected.contains(kept)).count();
    let fencing = Instant::now();
    let fenced = drainer.drain(Utc::now() + chrono::Duration::seconds(50)).await;
    let fence_took = fencing.elapsed();
    if !fenced.boards.iter().any(|b| b.board == "forum" && b.lost) {
        return Err(format!("the drain did not see the rollback: {:?}", fenced.boards).into());
    }

    let restorer = Restorer::new(config.clone(), keys.clone(), bench.store.clone(), objects);
    let restoring = Instant::now();
    let cpu = bench.cpu();
    let report = restorer.restore(Some("forum"), Utc::now() + chrono::Duration::from_std(INVOCATION)?).await?;
    let restore_took = restoring.elapsed();
    let (client_cpu, redis_cpu) = (bench.cpu() - cpu).per(after);
    if report.status != Status::Complete {
        return Err(format!("the restore did not complete within one invocation: {report:?}").into());
    }
    let replayed = report.boards.iter().map(|b| b.replayed).sum::<usize>();
    let restored = digests(bench).await?;
    let differing: Vec<&str> = expected
        .iter()
        .filter(|kept| !restored.contains(kept))
        .map(|(key, _)| key.as_str())
        .chain(restored.iter().filter(|now| !expected.contains(now)).map(|(key, _)| key.as_str()))
        .collect();
    if !differing.is_empty() {
        return Err(
            format!("{} keys differ from before the rollback, e.g. {:?}", differing.len(), &differing[..differing.len().min(5)]).into()
        );
    }

    let rate = after as f64 / restore_took.as_secs_f64();
    let mut table = Table::new(&["step", "lines", "took", "lines/s"]);
    let row = |step: &str, n: u64, took: Duration| {
        vec![step.to_owned(), grouped(n), format!("{:.1} s", took.as_secs_f64()), grouped((n as f64 / took.as_secs_f64()) as u64)]
    };
    table.row(row("written after the snapshot (50 clients, journal on)", after, wrote));
    table.row(row("drained to S3", drained as u64, drain_took));
    table.row(vec!["the drain's run that fences the board".into(), "–".into(), format!("{} ms", fence_took.as_millis()), "–".into()]);
    table.row(row("restored: the lines after the snapshot", after, restore_took));
    table.row(row("restored: every line read", replayed as u64, restore_took));
    let target = Target {
        row: format!("recovery from a snapshot, {} lines after it", grouped(after)),
        goal: format!("within one invocation ({} min)", INVOCATION.as_secs() / 60),
        measured: format!("{:.1} s, {} lines/s", restore_took.as_secs_f64(), grouped(rate as u64)),
        met: restore_took < INVOCATION,
    };
    Ok(Report {
        title: format!("journal rollback: recovery from a snapshot, {} lines after it (scenario 16)", grouped(after)),
        setup: format!(
            "The journal-restore scenario's board: {} events written through `Ingestor::record` (journal on) and drained to \
             moto_server's S3; the store's snapshot (`SAVE`); {} more events from 50 clients, drained; Redis loaded again from \
             the snapshot (`DEBUG RELOAD NOSAVE`: every key as it was at the `SAVE`); the drain's next run; the `Restorer` in \
             one invocation. Every key of the board (journal and notices aside) compared with its value before the rollback.",
            grouped(before),
            grouped(after)
        ),
        tables: vec![table],
        notes: vec![format!(
            "Recovered: **{:.1} s** for {} lines after the snapshot ({} keys stale after the reload, every key equal to \
             before the rollback after the restore), **{} lines/s** counted by the lines after the snapshot; {client_cpu:.0} µs \
             of the restore's own CPU and {redis_cpu:.0} µs of Redis CPU a line after it. The restore of a rolled-back board \
             reads its whole journal ({} lines here), the lines before the snapshot's point judged against the keys.",
            restore_took.as_secs_f64(),
            grouped(after),
            grouped(stale_keys as u64),
            grouped(rate as u64),
            grouped(replayed as u64)
        )],
        targets: vec![target],
    })
}
