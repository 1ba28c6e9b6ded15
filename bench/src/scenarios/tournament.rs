//! A tournament's score submission beside a static score board's (scenario 14,
//! docs/tournaments.md): the same best-kept scores from 20 clients, through `Scores::submit` on
//! a declared all-time score board and through `Tournaments::submit` on a tournament created at
//! runtime (seat and attempts checked in the same script call). Inside Redis (`INFO
//! commandstats`): the script's µs per call; redis-server's CPU per submission; round trips.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::json;
use standings::domain::config::Config;
use standings::domain::scores::Submission;
use standings::redis::keys::Keys;
use standings::services::catalog::boards_now;
use standings::services::scores::Scores;
use standings::services::tournaments::{Play, TournamentAdmin, Tournaments};

use crate::harness::{Bench, BenchError, CommandStats, Cpu, Report, Table, Target};

const CLIENTS: usize = 20;
const WINDOW: Duration = Duration::from_secs(5);
const USERS: u64 = 50_000;

#[derive(Clone, Copy, PartialEq)]
enum Board {
    Static,
    Tournament,
}

struct Totals {
    submissions: u64,
    round_trips: u64,
    cpu: Cpu,
    stats: CommandStats,
}

async fn window(
    bench: &Bench,
    config: &Arc<Config>,
    keys: &Keys,
    board: Board,
    round: usize,
    totals: &mut Totals,
) -> Result<(), BenchError> {
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let store = bench.client()?;
        let tournaments = Arc::new(Tournaments::new(config.clone(), keys.clone(), store.clone()));
        clients.push((Scores::new(config.clone(), keys.clone(), store.clone()), tournaments, store));
    }
    // Each client's first call opens its connection and reads the board's layout once.
    for (index, (scores, tournaments, _)) in clients.iter().enumerate() {
        let (event_id, user_id) = (format!("r{round}-warm-{index}"), format!("w{index}"));
        match board {
            Board::Static => {
                drop(scores.submit("static-cup", &Submission { event_id, user_id, score: 1, occurred_at: None }, Utc::now()).await?)
            }
            Board::Tournament => {
                drop(tournaments.submit("cup", &Play { event_id, user_id, score: 1 }, Utc::now()).await.map_err(|e| e.to_string())?)
            }
        }
    }
    let before: u64 = clients.iter().map(|(.., store)| store.round_trips()).sum();
    CommandStats::reset(bench).await?;
    let cpu_before = bench.cpu();
    let deadline = Instant::now() + WINDOW;
    let tasks: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(index, (scores, tournaments, _))| {
            let (scores, tournaments) = (scores.clone(), tournaments.clone());
            tokio::spawn(async move {
                let mut sent = 0u64;
                while Instant::now() < deadline {
                    let event_id = format!("r{round}-{index}-{sent}");
                    let user_id = format!("u{}", (index as u64 * 7_919 + sent * 31) % USERS);
                    let score = ((sent * 2_654_435_761) % 1_000_000) as i64;
                    match board {
                        Board::Static => {
                            scores.submit("static-cup", &Submission { event_id, user_id, score, occurred_at: None }, Utc::now()).await?;
                        }
                        Board::Tournament => {
                            tournaments.submit("cup", &Play { event_id, user_id, score }, Utc::now()).await.map_err(|e| e.to_string())?;
                        }
                    }
                    sent += 1;
                }
                Ok::<_, BenchError>(sent)
            })
        })
        .collect();
    for task in tasks {
        totals.submissions += task.await??;
    }
    let cpu = bench.cpu() - cpu_before;
    totals.cpu += cpu;
    totals.stats += &CommandStats::read(bench).await?;
    totals.round_trips += clients.iter().map(|(.., store)| store.round_trips()).sum::<u64>() - before;
    Ok(())
}

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let keys = Keys::new(&format!("{}:tournament", bench.keys.prefix()))?;
    let declared = Arc::new(Config::parse(
        "[[boards]]\nname = \"static-cup\"\nkind = \"scores\"\nkeep = \"best\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 100\n",
    )?);
    let now = Utc::now();
    let definition = json!({"title": "Bench cup", "keep": "best", "start": now - chrono::Duration::hours(1),
        "end": now + chrono::Duration::days(7), "join_required": false, "max_entries": 1_000_000});
    TournamentAdmin::new(declared.clone(), keys.clone(), bench.client()?, 10)
        .put("cup", &definition, now)
        .await
        .map_err(|e| e.to_string())?;
    let config = Arc::new(boards_now(&declared, &keys, &bench.store).await?);
    let totals = || Totals { submissions: 0, round_trips: 0, cpu: Cpu::ZERO, stats: CommandStats::default() };
    let (mut flat, mut cup) = (totals(), totals());
    for round in 0..bench.repetitions.max(1) {
        window(bench, &config, &keys, Board::Static, round, &mut flat).await?;
        window(bench, &config, &keys, Board::Tournament, round, &mut cup).await?;
    }
    let script = |t: &Totals| {
        let (calls, micros) = t.stats.of("evalsha");
        micros as f64 / calls.max(1) as f64
    };
    let cpu = |t: &Totals| t.cpu.per(t.submissions).1;
    let trips = |t: &Totals| t.round_trips as f64 / t.submissions.max(1) as f64;
    let mut table = Table::new(&[
        "board",
        "submissions",
        "script µs / call (commandstats)",
        "redis-server CPU / submission",
        "round trips / submission",
    ]);
    for (name, t) in [("static score board", &flat), ("tournament (seat + attempts)", &cup)] {
        table.row(vec![
            name.into(),
            t.submissions.to_string(),
            format!("{:.1} µs", script(t)),
            format!("{:.1} µs", cpu(t)),
            format!("{:.3}", trips(t)),
        ]);
    }
    let script_ratio = script(&cup) / script(&flat);
    let cpu_ratio = cpu(&cup) / cpu(&flat);
    Ok(Report {
        title: "a tournament's score submission vs a static score board's (scenario 14)".into(),
        setup: format!(
            "{CLIENTS} clients, each a store of its own, submitting best-kept scores of users drawn from {USERS} for {} s per board, \
             the two boards alternating, {} round(s). The tournament is created at runtime with `max_entries` (so every submission \
             reads and writes its attempts and seat); its definition comes from the catalog cache.",
            WINDOW.as_secs(),
            bench.repetitions.max(1)
        ),
        tables: vec![table],
        notes: vec![format!(
            "Tournament / static: script time inside Redis **{script_ratio:.2}×**, redis-server CPU per submission **{cpu_ratio:.2}×**."
        )],
        targets: vec![
            Target::at_most("Redis CPU per tournament submission (script time)", "a static score board's", script_ratio, 1.2),
            Target::at_most("round trips per tournament submission", "1 (one script call)", trips(&cup), 1.0),
        ],
    })
}
