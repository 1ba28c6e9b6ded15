//! `GET /v1/tournaments` with 10 and with 10,000 tournaments defined (issue 59: a page costs
//! about the same however many exist), through the `seasons` router in process, the first page
//! of 20 and a filtered page deep in the list; and, at 10,000 tournaments, the catalog load a
//! warm function does when one tournament changed (its change log read, that one parsed), the
//! whole read a job does, and the heap a function's catalog holds.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use standings::domain::config::{Config, Definition, tombstone};
use standings::redis::keys::Keys;
use standings::services::catalog::{Catalog, boards_now};
use standings::services::runtime_boards::RuntimeBoards;
use standings::services::tournaments::TournamentAdmin;

use crate::harness::{Bench, BenchError, Measurement, Report, Table, Target, call, ms, time};

const SAMPLES: usize = 300;
const FEW: usize = 10;
const MANY: usize = 10_000;
/// Definitions per `HSET` while filling the catalog.
const CHUNK: usize = 500;
/// Room in the deployment's limit for the tournaments the reload samples define.
const ROOM: usize = 1_000;

/// Tournament `i`: one-offs open now and recurring daily ones, in two categories, with a prize.
fn body(i: usize, now: DateTime<Utc>) -> Value {
    let category = ["racing", "puzzles"][i % 2];
    let mut body = json!({"title": format!("Cup {i}"), "category": category, "keep": "best",
        "start": now - chrono::Duration::hours(1), "end": now + chrono::Duration::days(30), "join_required": false,
        "prizes": [{"ranks": [1, 3], "reward": {"gems": 100}}]});
    if i.is_multiple_of(3) {
        body["reset"] = json!("day");
        body["duration_secs"] = json!(3600);
    }
    body
}

/// Tournaments defined near the size limit for the heap they cost (`large_heap`).
const LARGE: usize = 1_000;

/// Tournament `i` at a definition's limits: a title of 100 characters and a description of
/// 1,000 (each's most, held for the list), three prizes of 4,000 characters and 2,000 of metadata
/// (near the 16 KiB limit).
fn large_body(i: usize, now: DateTime<Utc>) -> Value {
    let mut body = body(i, now);
    let text = |n: usize| "x".repeat(n);
    body["title"] = json!(text(100));
    body["description"] = json!(text(1_000));
    body["prizes"] = json!([1, 2, 3].map(|rank| json!({"ranks": [rank, rank], "reward": text(4_000)})));
    body["metadata"] = json!({"notes": text(2_000)});
    body
}

/// `count` tournaments in the catalog under `keys`: the first through `TournamentAdmin` (so the
/// catalog is born and versioned as a deployment's), the rest written beside it in chunks.
async fn define(bench: &Bench, declared: &Arc<Config>, keys: &Keys, count: usize, now: DateTime<Utc>) -> Result<(), BenchError> {
    define_as(bench, declared, keys, count, now, body).await
}

async fn define_as(
    bench: &Bench,
    declared: &Arc<Config>,
    keys: &Keys,
    count: usize,
    now: DateTime<Utc>,
    body: fn(usize, DateTime<Utc>) -> Value,
) -> Result<(), BenchError> {
    admin(bench, declared, keys)?.put("cup-00000", &body(0, now), now).await.map_err(|e| e.to_string())?;
    let mut conn = bench.connection().await?;
    let catalog = keys.catalog();
    for chunk in (1..count).collect::<Vec<_>>().chunks(CHUNK) {
        let mut hset = redis::cmd("HSET");
        hset.arg(catalog.definitions());
        for &i in chunk {
            let id = format!("cup-{i:05}");
            hset.arg(&id).arg(Definition::tournament(&id, &body(i, now), now).map_err(|e| e.to_string())?.text);
        }
        let _: () = hset.query_async(&mut conn).await?;
    }
    let _: () = redis::cmd("INCR").arg(catalog.catalog_version()).query_async(&mut conn).await?;
    Ok(())
}

/// `count` deleted tournaments' tombstones beside the catalog under `keys` (deleted years of
/// tournaments ago: no function loads them, a request naming one reads it by name).
async fn bury(bench: &Bench, keys: &Keys, count: usize, now: DateTime<Utc>) -> Result<(), BenchError> {
    let mut conn = bench.connection().await?;
    for chunk in (0..count).collect::<Vec<_>>().chunks(CHUNK) {
        let mut hset = redis::cmd("HSET");
        hset.arg(keys.catalog().ending());
        for &i in chunk {
            let id = format!("gone-{i:05}");
            let text = Definition::tournament(&id, &body(i, now), now).map_err(|e| e.to_string())?.text;
            let definition = tombstone(serde_json::from_str(&text)?);
            hset.arg(&id).arg(json!({"reason": "bench", "at": now, "definition": definition}).to_string());
        }
        let _: () = hset.query_async(&mut conn).await?;
    }
    Ok(())
}

fn admin(bench: &Bench, declared: &Arc<Config>, keys: &Keys) -> Result<TournamentAdmin, BenchError> {
    Ok(TournamentAdmin::new(declared.clone(), keys.clone(), bench.client()?, u32::try_from(MANY + ROOM)?))
}

/// A warm function's catalog over `keys` reloading after one tournament is defined, `samples`
/// times; and the heap a cold one holds once it has read the catalog whole.
async fn reloads(
    bench: &Bench,
    declared: &Arc<Config>,
    keys: &Keys,
    samples: usize,
    now: DateTime<Utc>,
) -> Result<(Measurement, Measurement, usize), BenchError> {
    let cold = stats_alloc::Region::new(crate::HEAP);
    let warm = Catalog::new(declared.clone(), keys.clone(), bench.client()?, |_| ()).with_refresh(Duration::ZERO);
    warm.config().await?;
    let change = cold.change();
    let held = change.bytes_allocated.saturating_sub(change.bytes_deallocated);
    let admin = admin(bench, declared, keys)?;
    // Its periodic whole read always due: made beside each timed load, awaited after it.
    let due =
        Catalog::new(declared.clone(), keys.clone(), bench.client()?, |_| ()).with_refresh(Duration::ZERO).with_whole_read(Duration::ZERO);
    due.config().await?;
    let mut measured = Measurement::new("warm catalog load after one tournament defined, 10,000 tournaments");
    let mut whole_due = Measurement::new("the same, its whole read due (made beside the request)");
    for sample in 0..samples {
        let id = format!("new-{sample:04}");
        admin.put(&id, &body(sample, now), now).await.map_err(|e| e.to_string())?;
        for (catalog, measurement) in [(&warm, &mut measured), (&due, &mut whole_due)] {
            let (elapsed, config) = time(catalog.config()).await?;
            if config.board(&id).is_none() {
                return Err(format!("{id}: not served after its reload").into());
            }
            measurement.samples.push(elapsed);
            catalog.whole_read_settled().await;
        }
    }
    Ok((measured, whole_due, held))
}

/// The heap a cold `Catalog` keeps once it has read `LARGE` tournaments defined near the size
/// limit, and their definitions' bytes.
async fn large_heap(bench: &Bench, declared: &Arc<Config>, now: DateTime<Utc>) -> Result<(usize, usize), BenchError> {
    let keys = Keys::new(&format!("{}:list-large", bench.keys.prefix()))?;
    define_as(bench, declared, &keys, LARGE, now, large_body).await?;
    let text = Definition::tournament("cup-00001", &large_body(1, now), now).map_err(|e| e.to_string())?.text.len();
    let cold = stats_alloc::Region::new(crate::HEAP);
    let catalog = Catalog::new(declared.clone(), keys, bench.client()?, |_| ());
    catalog.config().await?;
    let change = cold.change();
    Ok((change.bytes_allocated.saturating_sub(change.bytes_deallocated), text))
}

/// Plain runtime boards (not tournaments) whose heap a function's catalog is measured for: as
/// many as the deployment's limit with a few rules, and a tenth of it at the rules' limit.
const BOARDS: usize = 10_000;
const BOARDS_AT_LIMIT: usize = 1_000;

/// A plain runtime board's body: a cumulative board of the day and all time with `rules` rules.
fn board_body(rules: usize) -> Value {
    let rules: Vec<Value> = (0..rules).map(|r| json!({"action": format!("action_{r:03}"), "points": 1 + r % 7, "scope": "none"})).collect();
    json!({"kind": "cumulative", "timezone": "UTC", "periods": ["day", "all"], "top": 100, "rules": rules})
}

/// Runtime board `i`'s stored text.
fn board_text(i: usize, rules: usize) -> Result<String, BenchError> {
    Ok(Definition::parse(&format!("board-{i:05}"), &board_body(rules)).map_err(|e| e.to_string())?.text)
}

/// The heap a cold `Catalog` keeps once it has read `count` plain runtime boards of `rules`
/// rules each (beside one tournament, through which the catalog was born), and one's bytes;
/// then that catalog, warm, reloading after one more board is defined, `samples` times.
async fn boards_heap(
    bench: &Bench,
    declared: &Arc<Config>,
    now: DateTime<Utc>,
    (count, rules): (usize, usize),
    samples: usize,
) -> Result<(usize, usize, Measurement), BenchError> {
    let keys = Keys::new(&format!("{}:list-boards-{rules}", bench.keys.prefix()))?;
    define(bench, declared, &keys, 1, now).await?;
    let mut conn = bench.connection().await?;
    for chunk in (0..count).collect::<Vec<_>>().chunks(CHUNK) {
        let mut hset = redis::cmd("HSET");
        hset.arg(keys.catalog().definitions());
        for &i in chunk {
            hset.arg(format!("board-{i:05}")).arg(board_text(i, rules)?);
        }
        let _: () = hset.query_async(&mut conn).await?;
    }
    let _: () = redis::cmd("INCR").arg(keys.catalog().catalog_version()).query_async(&mut conn).await?;
    let cold = stats_alloc::Region::new(crate::HEAP);
    let catalog = Catalog::new(declared.clone(), keys.clone(), bench.client()?, |_| ()).with_refresh(Duration::ZERO);
    let config = catalog.config().await?;
    let change = cold.change();
    if config.board(&format!("board-{:05}", count - 1)).is_none_or(|board| board.rules.len() != rules) {
        return Err("the catalog does not serve the boards defined".into());
    }
    let admin = RuntimeBoards::new(declared.clone(), keys, bench.client()?, u32::try_from(count + ROOM)?);
    let mut reloads = Measurement::new(format!("warm catalog load after one board defined, {count} plain boards of {rules} rules"));
    for sample in 0..samples {
        let name = format!("new-{sample:04}");
        admin.put(&name, &board_body(rules), now).await.map_err(|e| e.to_string())?;
        let (elapsed, config) = time(catalog.config()).await?;
        if config.board(&name).is_none() {
            return Err(format!("{name}: not served after its reload").into());
        }
        reloads.samples.push(elapsed);
    }
    Ok((change.bytes_allocated.saturating_sub(change.bytes_deallocated), board_text(0, rules)?.len(), reloads))
}

/// p99 of `path` on a warm `seasons` router over `keys`' catalog.
async fn measure(bench: &Bench, declared: &Arc<Config>, keys: &Keys, label: &str, path: &str) -> Result<Measurement, BenchError> {
    let app = seasons::App::new(declared.clone(), keys.clone(), bench.client()?, None, standings::system_clock());
    let router = seasons::router(Arc::new(app));
    let mut measured = Measurement::new(label);
    for sample in 0..=SAMPLES * bench.repetitions.max(1) {
        let (elapsed, body) = time(call(&router, Request::get(path).body(Body::empty())?)).await?;
        let page: Value = serde_json::from_slice(&body)?;
        if page["tournaments"].as_array().is_none_or(Vec::is_empty) {
            return Err(format!("{path}: no tournaments listed: {page}").into());
        }
        // The first request loads the catalog: a warm function's reads follow.
        if sample > 0 {
            measured.samples.push(elapsed);
        }
    }
    Ok(measured)
}

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let declared = Arc::new(Config::parse(
        "[[boards]]\nname = \"points\"\nkind = \"scores\"\nkeep = \"best\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\n",
    )?);
    let now = Utc::now();
    let (few, many) = (Keys::new(&format!("{}:list-few", bench.keys.prefix()))?, Keys::new(&format!("{}:list-many", bench.keys.prefix()))?);
    define(bench, &declared, &few, FEW, now).await?;
    define(bench, &declared, &many, MANY, now).await?;
    bury(bench, &many, MANY, now).await?;
    let first = "/v1/tournaments";
    let deep = "/v1/tournaments?state=open&category=puzzles&cursor=cup-00005";
    let few_first = measure(bench, &declared, &few, "first page, 10 defined", first).await?;
    let many_first = measure(bench, &declared, &many, "first page, 10,000 defined", first).await?;
    let few_deep = measure(bench, &declared, &few, "open puzzles after cup-00005, 10 defined", deep).await?;
    let many_deep = measure(bench, &declared, &many, "open puzzles after cup-00005, 10,000 defined", deep).await?;
    let mut loads = Measurement::new("whole catalog read (`boards_now`, the jobs'), 10,000 tournaments");
    for _ in 0..5 * bench.repetitions.max(1) {
        loads.samples.push(time(boards_now(&declared, &many, &bench.store)).await?.0);
    }
    let (reloaded, whole_due, held) = reloads(bench, &declared, &many, 20 * bench.repetitions.max(1), now).await?;
    let (large, large_text) = large_heap(bench, &declared, now).await?;
    let reload_samples = 20 * bench.repetitions.max(1);
    let (boards, board_bytes, board_reloads) = boards_heap(bench, &declared, now, (BOARDS, 3), reload_samples).await?;
    let (ruled, ruled_bytes, _) = boards_heap(bench, &declared, now, (BOARDS_AT_LIMIT, standings::domain::config::MAX_RULES), 0).await?;
    let boards_mb = boards as f64 / (1024.0 * 1024.0);
    let ruled_per = ruled as f64 / BOARDS_AT_LIMIT as f64 / 1024.0;
    let per_large = large as f64 / LARGE as f64 / 1024.0;
    let large_mb = per_large * 10_000.0 / 1024.0;
    let ratio = |a: &Measurement, b: &Measurement| a.percentile(99.0).as_secs_f64() / b.percentile(99.0).as_secs_f64().max(1e-9);
    let (first_ratio, deep_ratio) = (ratio(&many_first, &few_first), ratio(&many_deep, &few_deep));
    let (load, whole) = (reloaded.median().max(whole_due.median()), loads.median());
    let held_mb = held as f64 / (1024.0 * 1024.0);
    Ok(Report {
        title: "`GET /v1/tournaments` at 10 and at 10,000 tournaments (issue 59)".into(),
        setup: format!(
            "The `seasons` router in process on a warm catalog; {SAMPLES} requests a path per round, {} round(s), one at a time. \
             Tournaments: one-offs and daily ones in two categories, each with a prize; the first defined through \
             `TournamentAdmin`, the rest written beside it in the catalog; beside the 10,000, as many deleted \
             tournaments' tombstones. Each page counts its instances' players in one \
             pipeline per slot. The warm reload: a `Catalog` (refresh 0) that has read the catalog, then one tournament \
             defined through `TournamentAdmin` before each timed `config()`, and the same on a `Catalog` whose periodic \
             whole read is always due (made beside the request, awaited after it, not timed); the heap is the bytes a cold `Catalog` keeps \
             allocated once it has read the catalog (counted by the bench's global allocator).",
            bench.repetitions.max(1)
        ),
        tables: vec![
            Table::latencies(&[&few_first, &many_first, &few_deep, &many_deep]),
            Table::timings(&[&reloaded, &whole_due, &loads, &board_reloads]),
        ],
        notes: vec![format!(
            "p99 at 10,000 / at 10: first page **{first_ratio:.2}×**, a filtered page deep in the list **{deep_ratio:.2}×**; \
             at 10,000 tournaments (and 10,000 tombstones, not loaded) a warm function's reload after one change takes {} (median, the worse of the two warm rows: a due whole read is not waited for), a whole read {}, and a \
             function's catalog holds {held_mb:.1} MB of heap. Defined at the limits ({large_text} bytes each: the \
             longest title and description, which the list shows and a function holds, and prizes and metadata near the \
             16 KiB limit, which it leaves out; {LARGE} of them), a tournament holds {per_large:.1} KiB of a function's \
             heap: 10,000 such would hold {large_mb:.0} MB. Plain runtime boards (cumulative, day and all time): \
             {BOARDS} of 3 rules ({board_bytes} bytes each) hold {boards_mb:.1} MB and reload after one board defined in {} \
             (median); at the rules' limit (100 rules, \
             {ruled_bytes} bytes each; {BOARDS_AT_LIMIT} of them) a board holds {ruled_per:.1} KiB, {:.0} MB at 10,000 \
             (a function holds every rule parsed: it scores by them).",
            ms(load),
            ms(whole),
            ms(board_reloads.median()),
            ruled_per * 10_000.0 / 1024.0,
        )],
        targets: vec![
            Target::at_most("`GET /v1/tournaments` p99, 10,000 tournaments", "10 tournaments'", first_ratio, 2.0),
            Target::at_most(
                "warm catalog load at 10,000 tournaments",
                "20 ms",
                load.as_secs_f64() / Duration::from_millis(20).as_secs_f64(),
                1.0,
            ),
            Target::at_most(
                "warm catalog load at 10,000 runtime boards of 3 rules",
                "20 ms",
                board_reloads.median().as_secs_f64() / Duration::from_millis(20).as_secs_f64(),
                1.0,
            ),
            Target::at_most("catalog heap at 10,000 tournaments", "16 MB", held_mb / 16.0, 1.0),
            Target::at_most("catalog heap at 10,000 runtime boards of 3 rules", "16 MB", boards_mb / 16.0, 1.0),
            // Title and description at their most are ~1.1 KB a tournament the list shows.
            Target::at_most("catalog heap at 10,000 tournaments defined at the limits", "32 MB", large_mb / 32.0, 1.0),
        ],
    })
}
