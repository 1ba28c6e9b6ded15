//! Single-event ingest (scenario 1): events per second of the real write path
//! (`Ingestor::record`, the `apply_event` script; and the whole `POST /v1/events` through the
//! `ingest` router, in process) at 1 and 50 concurrent clients, against raw `ZINCRBY` and the
//! port of seed 001's `addActivityScore` at the same concurrency, with the round trips each
//! makes per event, counted by the store (and by the port itself).
//!
//! A client is a closed loop with a connection of its own, as a Lambda container is: it sends
//! one event, waits for the answer, sends the next. Every event is a new comment (+3) by one of
//! 1,000 users on a new target, so every method does its full work each time. Each window runs
//! the clients for a fixed time after one untimed event each (connection and script loaded);
//! the methods take turns, in a rotating order, for every repetition.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use chrono::Utc;
use redis::AsyncCommands;
use standings::domain::config::Config;
use standings::domain::scoring::Event;
use standings::http::AuthMode;
use standings::redis::store::Store;
use standings::runtime::metrics::Metrics;
use standings::services::ingestion::Ingestor;

use super::ingest_boards::{
    LEAGUE, NOTIFY, activity_with, define_activity, journaled, league_keys, noticed, runtime_keys, without_activity,
};
use crate::harness::{Bench, BenchError, CommandStats, Cpu, Report, Table, Target, call, grouped};
use crate::seed001::{Activity, SeedKeys, add_activity_score};

const CLIENTS: [usize; 2] = [1, 50];
const WINDOW: Duration = Duration::from_secs(1);
const USERS: u64 = 1_000;
const POINTS: i64 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Method {
    Script,
    /// The same script with the journal on (docs/journal.md): one `XADD` more per event.
    Journaled,
    /// The same script on the same board with a league on its day (docs/leagues.md).
    League,
    /// The same script on the same board with rank-change notifications of its top 10
    /// (docs/notifications.md); and the league board with them (its cohorts' zones too).
    Notified,
    LeagueNotified,
    Router,
    /// The same route, the board created at runtime (docs/runtime-boards.md): its definition
    /// from the function's catalog cache.
    RuntimeRouter,
    Zincrby,
    Seed,
}

const METHODS: [Method; 9] = [
    Method::Script,
    Method::Journaled,
    Method::League,
    Method::Notified,
    Method::LeagueNotified,
    Method::Router,
    Method::RuntimeRouter,
    Method::Zincrby,
    Method::Seed,
];

impl Method {
    fn label(self) -> &'static str {
        match self {
            Method::Script => "`Ingestor::record` (`apply_event.lua`)",
            Method::Journaled => "`Ingestor::record`, journal on",
            Method::League => "`Ingestor::record`, the board with a league",
            Method::Notified => "`Ingestor::record`, the board notifying its top 10",
            Method::LeagueNotified => "`Ingestor::record`, the league board notifying its top 10 and zones",
            Method::Router => "`POST /v1/events` (ingest router, in process)",
            Method::RuntimeRouter => "`POST /v1/events`, the board created at runtime",
            Method::Zincrby => "raw `ZINCRBY`",
            Method::Seed => "seed 001 `addActivityScore` (port)",
        }
    }
}

/// One simulated client of a method.
#[derive(Clone)]
enum Client {
    Ingestor(Ingestor),
    Router(Router),
    Zincrby(Store),
    Seed(Store),
}

struct Window {
    events: u64,
    elapsed: Duration,
    /// Requests counted by the clients' stores.
    round_trips: u64,
    /// Commands the seed port counted itself (seed method only).
    commands: u64,
    cpu: Cpu,
    /// Redis's own accounting of the window.
    stats: CommandStats,
}

/// One event; returns the commands the seed port sent (0 for the other methods).
async fn send(client: &Client, shared: &Shared, event_id: String, user: String) -> Result<u64, BenchError> {
    match client {
        Client::Ingestor(ingestor) => {
            let event = comment(event_id, user);
            let receipt = ingestor.record(&event, Utc::now()).await?;
            if !receipt.results.iter().all(|r| r.outcome.applied) {
                return Err(format!("event not applied: {receipt:?}").into());
            }
            Ok(0)
        }
        Client::Router(router) => {
            let body = serde_json::to_vec(&comment(event_id, user))?;
            let request = Request::post("/v1/events").header("content-type", "application/json").body(Body::from(body))?;
            call(router, request).await?;
            Ok(0)
        }
        Client::Zincrby(store) => {
            let _: f64 = store.connection().await?.zincr(&shared.zincrby_key, user, POINTS).await?;
            Ok(0)
        }
        Client::Seed(store) => {
            let mut conn = store.connection().await?;
            add_activity_score(&mut conn, &shared.seed_keys, &user, &Activity::Rate(&event_id), Utc::now()).await
        }
    }
}

fn comment(event_id: String, user: String) -> Event {
    Event {
        target: Some(event_id.clone()),
        event_id,
        user_id: user,
        action: "comment".into(),
        active: true,
        occurred_at: None,
        points: None,
    }
}

/// What every client of a run shares.
struct Shared {
    config: Arc<Config>,
    /// The same boards, `activity` with a league on its day.
    league: Arc<Config>,
    /// The same boards, `activity` notifying its top 10; and the league's, too.
    notified: Arc<Config>,
    league_notified: Arc<Config>,
    /// Every shipped board but `activity`, which the runtime router's keys hold at runtime.
    without_activity: Arc<Config>,
    zincrby_key: String,
    seed_keys: SeedKeys,
}

fn client(bench: &Bench, shared: &Shared, method: Method) -> Result<(Client, Store), BenchError> {
    let store = bench.client()?;
    let client = match method {
        Method::Script => Client::Ingestor(Ingestor::new(shared.config.clone(), bench.keys.clone(), store.clone())),
        Method::Journaled => Client::Ingestor(Ingestor::new(shared.config.clone(), journaled(bench), store.clone())),
        Method::League => Client::Ingestor(Ingestor::new(shared.league.clone(), league_keys(bench)?, store.clone())),
        Method::Notified => Client::Ingestor(Ingestor::new(shared.notified.clone(), noticed(bench, "notify")?, store.clone())),
        Method::LeagueNotified => {
            Client::Ingestor(Ingestor::new(shared.league_notified.clone(), noticed(bench, "league-notify")?, store.clone()))
        }
        Method::Router | Method::RuntimeRouter => {
            let metrics = Metrics::with_sink("ingest", Arc::new(|_| ()));
            let (config, keys) = match method {
                Method::Router => (shared.config.clone(), bench.keys.clone()),
                _ => (shared.without_activity.clone(), runtime_keys(bench)?),
            };
            let app = ingest::App::new(config, keys, store.clone(), standings::system_clock(), AuthMode::Off, metrics);
            Client::Router(ingest::router(Arc::new(app)))
        }
        Method::Zincrby => Client::Zincrby(store.clone()),
        Method::Seed => Client::Seed(store.clone()),
    };
    Ok((client, store))
}

async fn window(bench: &Bench, shared: &Arc<Shared>, method: Method, clients: usize, tag: &str) -> Result<Window, BenchError> {
    let mut built = Vec::with_capacity(clients);
    if matches!(method, Method::Journaled) {
        bench.born(&shared.config).await?;
    }
    if matches!(method, Method::RuntimeRouter) {
        define_activity(bench, &shared.without_activity).await?;
    }
    for index in 0..clients {
        let (client, store) = client(bench, shared, method)?;
        send(&client, shared, format!("{tag}-warm-{index}"), format!("u{}", index as u64 % USERS)).await?;
        built.push((client, store));
    }
    let round_trips_before: u64 = built.iter().map(|(_, store)| store.round_trips()).sum();
    CommandStats::reset(bench).await?;
    let cpu_before = bench.cpu();
    let started = Instant::now();
    let deadline = started + WINDOW;
    let tasks: Vec<_> = built
        .iter()
        .enumerate()
        .map(|(index, (client, _))| {
            let (client, shared, tag) = (client.clone(), shared.clone(), tag.to_owned());
            tokio::spawn(async move {
                let (mut events, mut commands) = (0u64, 0u64);
                while Instant::now() < deadline {
                    let user = format!("u{}", (index as u64 * 7_919 + events) % USERS);
                    commands += send(&client, &shared, format!("{tag}-{index}-{events}"), user).await?;
                    events += 1;
                }
                Ok::<_, BenchError>((events, commands))
            })
        })
        .collect();
    let (mut events, mut commands) = (0, 0);
    for task in tasks {
        let (e, c) = task.await??;
        events += e;
        commands += c;
    }
    let elapsed = started.elapsed();
    let cpu = bench.cpu() - cpu_before;
    let stats = CommandStats::read(bench).await?;
    let round_trips = built.iter().map(|(_, store)| store.round_trips()).sum::<u64>() - round_trips_before;
    Ok(Window { events, elapsed, round_trips, commands, cpu, stats })
}

/// The journal stream's bytes per entry (`MEMORY USAGE` over `XLEN`, after the journaled
/// windows, nothing drained), and what one drain interval (60 s) at `rate` events/s holds.
async fn journal_memory(bench: &Bench, rate: f64) -> Result<String, BenchError> {
    let key = journaled(bench).board("activity").journal();
    let mut conn = bench.client()?.connection().await?;
    let entries: u64 = conn.xlen(&key).await?;
    let bytes: u64 = redis::cmd("MEMORY").arg("USAGE").arg(&key).arg("SAMPLES").arg(0).query_async(&mut conn).await?;
    let per_entry = bytes as f64 / entries.max(1) as f64;
    Ok(format!(
        "Journal memory: the `activity` board's stream holds {} entries in {:.1} MB, **{per_entry:.0} bytes an entry**; one \
         drain interval (60 s) at this run's journaled rate ({rate:.0} events/s) holds {:.1} MB until the drain trims it.",
        grouped(entries),
        bytes as f64 / 1e6,
        per_entry * rate * 60.0 / 1e6,
    ))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let shared = Arc::new(Shared {
        config: Arc::new(Config::default_boards()),
        league: Arc::new(activity_with(&[LEAGUE])?),
        notified: Arc::new(activity_with(&[NOTIFY])?),
        league_notified: Arc::new(activity_with(&[LEAGUE, NOTIFY])?),
        without_activity: Arc::new(without_activity()?),
        zincrby_key: format!("{}:raw:zincrby", bench.keys.prefix()),
        seed_keys: SeedKeys::new(bench.keys.prefix()),
    });
    let mut results: HashMap<(Method, usize), Vec<Window>> = HashMap::new();
    for repetition in 0..bench.repetitions {
        for &clients in &CLIENTS {
            // A rotating order: no method always runs first (or right after another one).
            let mut order = METHODS;
            order.rotate_left(repetition % METHODS.len());
            for method in order {
                let tag = format!("r{repetition}-c{clients}-{method:?}");
                let measured = window(bench, &shared, method, clients, &tag).await?;
                if method == Method::Seed && measured.commands != measured.round_trips {
                    return Err(format!("the seed port counted {} commands, the store {}", measured.commands, measured.round_trips).into());
                }
                results.entry((method, clients)).or_default().push(measured);
            }
        }
    }

    let rates = |method: Method, clients: usize| -> Vec<f64> {
        results[&(method, clients)].iter().map(|w| w.events as f64 / w.elapsed.as_secs_f64()).collect()
    };
    let rate = |method: Method, clients: usize| median(&mut rates(method, clients));
    let per_event = |method: Method, clients: usize| -> f64 {
        let windows = &results[&(method, clients)];
        windows.iter().map(|w| w.round_trips).sum::<u64>() as f64 / windows.iter().map(|w| w.events).sum::<u64>() as f64
    };
    let cpu_per_event = |method: Method, clients: usize| -> (f64, f64) {
        let windows = &results[&(method, clients)];
        let mut cpu = Cpu::ZERO;
        windows.iter().for_each(|w| cpu += w.cpu);
        cpu.per(windows.iter().map(|w| w.events).sum())
    };
    let mut table = Table::new(&[
        "method",
        "clients",
        "events/s (median)",
        "min",
        "max",
        "round trips / event",
        "client CPU / event",
        "Redis CPU / event",
    ]);
    for clients in CLIENTS {
        for method in METHODS {
            let window_rates = rates(method, clients);
            table.row(vec![
                method.label().into(),
                clients.to_string(),
                format!("{:.0}", rate(method, clients)),
                format!("{:.0}", window_rates.iter().copied().fold(f64::INFINITY, f64::min)),
                format!("{:.0}", window_rates.iter().copied().fold(0.0, f64::max)),
                format!("{:.3}", per_event(method, clients)),
                format!("{:.0} µs", cpu_per_event(method, clients).0),
                format!("{:.0} µs", cpu_per_event(method, clients).1),
            ]);
        }
    }
    let mut notes = Vec::new();
    for &clients in &CLIENTS {
        let script = rate(Method::Script, clients);
        notes.push(format!(
            "{clients} client(s): script / raw ZINCRBY **{:.2}**, script / seed 001 **{:.2}**, router / raw ZINCRBY **{:.2}**, \
             router / seed 001 **{:.2}**",
            script / rate(Method::Zincrby, clients),
            script / rate(Method::Seed, clients),
            rate(Method::Router, clients) / rate(Method::Zincrby, clients),
            rate(Method::Router, clients) / rate(Method::Seed, clients),
        ));
    }
    // During a script window every command but EVALSHA is one the script ran.
    let mut stats = CommandStats::default();
    results.iter().filter(|((method, _), _)| *method == Method::Script).flat_map(|(_, windows)| windows).for_each(|w| stats += &w.stats);
    let ((scripts, script_micros), (inner_calls, inner_micros)) = (stats.of("evalsha"), stats.all_but(&["evalsha"]));
    let per_script = |n: u64| n as f64 / scripts.max(1) as f64;
    notes.push(format!(
        "Inside Redis (`INFO commandstats`), one `apply_event.lua` call: **{:.1} µs**, of which its {:.1} commands take {:.1} µs; \
         the rest is the Lua interpreter and the cost of each `redis.call` (argument and reply conversion).",
        per_script(script_micros),
        per_script(inner_calls),
        per_script(inner_micros),
    ));
    notes.push(journal_memory(bench, rate(Method::Journaled, CLIENTS[CLIENTS.len() - 1])).await?);
    let busiest = CLIENTS[CLIENTS.len() - 1];
    let script_trips = per_event(Method::Script, busiest);
    let targets = vec![
        Target::at_least(
            format!("ingest, {busiest} clients"),
            "raw ZINCRBY",
            rate(Method::Script, busiest) / rate(Method::Zincrby, busiest),
            0.5,
        ),
        Target::at_least(
            format!("ingest, {busiest} clients"),
            "seed 001 sequence",
            rate(Method::Script, busiest) / rate(Method::Seed, busiest),
            2.0,
        ),
        Target::at_least(
            format!("ingest events/s, {busiest} clients"),
            "seed 001 sequence",
            rate(Method::Script, busiest) / rate(Method::Seed, busiest),
            1.0,
        ),
        // What decides how far one board scales: all its writes land on one Redis node.
        Target::at_most(
            format!("Redis CPU per event, {busiest} clients"),
            "seed 001 sequence",
            cpu_per_event(Method::Script, busiest).1 / cpu_per_event(Method::Seed, busiest).1,
            1.0,
        ),
        // A league's price: after a user's first write of the day, one HEXISTS per event.
        Target::at_most(
            format!("Redis CPU per event, league board, {busiest} clients"),
            "the same board without a league",
            cpu_per_event(Method::League, busiest).1 / cpu_per_event(Method::Script, busiest).1,
            1.10,
        ),
        // Notifications' price: a rank read before each write of a member on the board, and
        // the moves recorded when one crosses the top (or moves in its cohort).
        Target::at_most(
            format!("Redis CPU per event, notifications on, {busiest} clients"),
            "the same board without",
            cpu_per_event(Method::Notified, busiest).1 / cpu_per_event(Method::Script, busiest).1,
            1.10,
        ),
        Target::at_most(
            format!("Redis CPU per event, league board with notifications, {busiest} clients"),
            "the same league board without",
            cpu_per_event(Method::LeagueNotified, busiest).1 / cpu_per_event(Method::League, busiest).1,
            1.50,
        ),
        // A runtime board's price on the write path: its definition from the catalog cache.
        Target::at_most(
            format!("Redis CPU per event, runtime board, {busiest} clients"),
            "the same board declared",
            cpu_per_event(Method::RuntimeRouter, busiest).1 / cpu_per_event(Method::Router, busiest).1,
            1.10,
        ),
        Target {
            row: "runtime board round trips".into(),
            goal: "exactly 1 per board, the definition cached".into(),
            measured: format!("{:.3} per event", per_event(Method::RuntimeRouter, busiest)),
            met: per_event(Method::RuntimeRouter, busiest) == 1.0,
        },
        // The journal's price: one XADD per applied event, in the same call.
        Target::at_most(
            format!("Redis CPU per event, journal on, {busiest} clients"),
            "the same script, journal off",
            cpu_per_event(Method::Journaled, busiest).1 / cpu_per_event(Method::Script, busiest).1,
            1.10,
        ),
        Target {
            row: "ingest round trips".into(),
            goal: "exactly 1 per board (a comment feeds 1 board)".into(),
            measured: format!("{script_trips:.3} per event"),
            met: script_trips == 1.0,
        },
    ];
    Ok(Report {
        title: "ingest: single events (scenario 1)".into(),
        setup: format!(
            "Closed-loop clients, each with its own connection; every event a new comment (+3, the `activity` board's day and \
             month) by one of {} users. {} windows of {} s per method and concurrency, methods in rotating order; \
             events/s is the median window. Round trips are counted by the store (`Store::round_trips()`) and, for the seed \
             port, by the port itself (the two agree). CPU per event is the benchmark process's and redis-server's own CPU time \
             (`/proc`) over the windows, divided by the events. The router row includes JSON in and out and the request middleware \
             (auth off).",
            grouped(USERS),
            bench.repetitions,
            WINDOW.as_secs_f64()
        ),
        tables: vec![table],
        notes,
        targets,
    })
}
