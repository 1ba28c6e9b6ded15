//! The functions served by `cargo lambda watch` (started by scripts/test.sh): ingest over real
//! HTTP, with the path API Gateway would map (`/lambda-url/ingest/v1/events`), and every
//! function through `cargo lambda invoke` with the event fixtures kept in the repo.

mod cli;
mod cli_stand_ins;
mod tournament_routes;

use serde_json::{Value, json};
use standings::redis::keys::Keys;
use standings_tests::{season_members, seed_board};

fn watch_url() -> String {
    std::env::var("STANDINGS_WATCH_URL").expect("STANDINGS_WATCH_URL is not set: scripts/test.sh starts cargo lambda watch")
}

#[tokio::test]
async fn the_happy_path_and_an_error_through_cargo_lambda_watch() {
    let client = watch_client();
    let url = format!("{}/lambda-url/ingest/v1/events", watch_url());
    let event_id = standings_tests::unique_prefix();
    let event = json!({"event_id": event_id, "user_id": event_id, "action": "comment", "target": "a1"});
    let response = client.post(&url).json(&event).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let receipt: Value = response.json().await.unwrap();
    assert_eq!(receipt["event_id"], event_id.as_str());
    assert_eq!(receipt["results"][0]["board"], "activity");
    assert_eq!(receipt["results"][0]["applied"], true);
    assert_eq!(receipt["results"][0]["delta"], 3);

    let response = client.post(&url).header("content-type", "application/json").body("{not json").send().await.unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "malformed");
}

/// A function's first request makes `cargo lambda watch` build it: minutes, not forever. A
/// build that cannot finish (a full disk) fails the test instead of wedging the suite.
const WATCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(900);

/// The workspace's `standings` command builds reqwest with rustls and no crypto provider of its
/// own (ring, as redis-rs and the SDK use, not a second TLS stack), and features are unified
/// across the workspace: a client built without a process-wide provider would panic.
fn watch_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().timeout(WATCH_TIMEOUT).build().unwrap()
}

/// `cargo lambda invoke` of `function` with one of the event fixtures kept beside it in the
/// repo (`functions/<function>/fixtures/`).
fn cargo_lambda_invoke(function: &str, fixture: &str) -> std::process::Output {
    let port = watch_url().rsplit(':').next().unwrap().to_owned();
    let path = format!("{}/../functions/{function}/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR"));
    std::process::Command::new("timeout")
        .args([
            &WATCH_TIMEOUT.as_secs().to_string(),
            "cargo",
            "lambda",
            "invoke",
            "--invoke-address",
            "127.0.0.1",
            "--invoke-port",
            &port,
            "--data-file",
            &path,
            function,
        ])
        .output()
        .expect("cargo lambda is installed")
}

/// The function's JSON answer to a fixture.
fn invoke(function: &str, fixture: &str) -> Value {
    let output = cargo_lambda_invoke(function, fixture);
    assert!(output.status.success(), "cargo lambda invoke failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("the function answers JSON")
}

#[tokio::test]
async fn api_gateway_fixtures_through_cargo_lambda_invoke() {
    let ok = invoke("ingest", "post-event.json");
    assert_eq!(ok["statusCode"], 200, "{ok}");
    let receipt: Value = serde_json::from_str(ok["body"].as_str().unwrap()).unwrap();
    assert_eq!(receipt["event_id"], "fixture-event-1");
    assert_eq!(receipt["results"][0]["board"], "activity");

    let bad = invoke("ingest", "post-event-malformed.json");
    assert_eq!(bad["statusCode"], 400, "{bad}");
    let error: Value = serde_json::from_str(bad["body"].as_str().unwrap()).unwrap();
    assert_eq!(error["error"]["code"], "malformed");
}

/// An event through the `ingest` function of `cargo lambda watch` is journaled (scripts/test.sh
/// gives the watch a journal bucket); the journal function's drain fixture moves it to S3; a
/// void through the `void` function finds it there; a restore of an unknown board is refused
/// with its code.
#[tokio::test]
async fn an_event_through_cargo_lambda_watch_reaches_s3_through_the_journal_drain() {
    let event_id = standings_tests::unique_prefix();
    let event = json!({"event_id": event_id, "user_id": "journaled", "action": "comment", "target": "a1"});
    let response = watch_client().post(format!("{}/lambda-url/ingest/v1/events", watch_url())).json(&event).send().await.unwrap();
    assert_eq!(response.status(), 200);

    let drained = invoke("journal", "drain-event.json");
    assert!(drained["entries"].as_u64().is_some_and(|n| n >= 1), "{drained}");
    let prefix = std::env::var("STANDINGS_WATCH_KEY_PREFIX").expect("scripts/test.sh names the watch's key prefix");
    let bucket = std::env::var("STANDINGS_WATCH_JOURNAL_BUCKET").expect("scripts/test.sh names the watch's journal bucket");
    let client = standings_tests::journal::s3().await;
    let objects = journal::S3Objects::new(client, &bucket);
    let mut found = 0;
    for name in journal::Objects::list(&objects, &journal::board_objects(&prefix, "activity")).await.unwrap() {
        let body = String::from_utf8(journal::Objects::get(&objects, &name).await.unwrap()).unwrap();
        found += body.lines().filter(|line| line.contains(&format!("\"event_id\":\"{event_id}\""))).count();
    }
    assert_eq!(found, 1, "the event is in S3 once");

    // The void function of the watch reads it back from S3 and takes its points.
    let now = chrono::Utc::now();
    let void =
        json!({"void_id": event_id, "from": now - chrono::Duration::hours(1), "to": now + chrono::Duration::minutes(1), "reason": "test"});
    let url = format!("{}/lambda-url/void/v1/admin/boards/activity/users/journaled/void", watch_url());
    let response = watch_client().post(url).json(&void).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let receipt: Value = response.json().await.unwrap();
    assert!(receipt["periods"].as_array().unwrap().iter().all(|period| period["delta"] == -3), "{receipt}");

    let refused = cargo_lambda_invoke("journal", "restore-unknown-board.json");
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && error.contains("unknown_board"), "{error}");
}

/// The archive function's manual fixture through `cargo lambda invoke`, against the key prefix
/// and season table scripts/test.sh gave `cargo lambda watch`; then the seasons function serves
/// the season and its distribution over HTTP.
#[tokio::test]
async fn a_manual_archive_event_through_cargo_lambda_invoke_then_the_season_over_http() {
    let prefix = std::env::var("STANDINGS_WATCH_KEY_PREFIX").expect("scripts/test.sh names the watch's key prefix");
    let season = standings::archive::freeze::season_named("2026-01", chrono_tz::Asia::Shanghai).unwrap();
    let members = season_members(3, &season);
    seed_board(&Keys::new(&prefix).unwrap().board("points").period(&season), &members).await;

    let done = invoke("archive", "manual-event.json");
    let report = &done["results"][0];
    assert_eq!(
        (&report["board"], &report["season"], &report["status"]),
        (&json!("points"), &json!("2026-01"), &json!("complete")),
        "{done}"
    );
    assert_eq!((&report["total"], &report["items_written"]), (&json!(3), &json!(3)));
    let again = invoke("archive", "manual-event.json");
    assert_eq!((&again["results"][0]["status"], &again["results"][0]["items_written"]), (&json!("already_complete"), &json!(0)));
    let failed = cargo_lambda_invoke("archive", "unknown-board-event.json");
    let error = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success() && error.contains("unknown_board") && error.contains("no-such-board"), "{error}");

    let response =
        watch_client().get(format!("{}/lambda-url/seasons/v1/boards/points/seasons/2026-01/top", watch_url())).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["cache-control"], "public, max-age=86400");
    let top: Value = response.json().await.unwrap();
    let users: Vec<_> = top["entries"].as_array().unwrap().iter().map(|e| e["user_id"].as_str().unwrap()).collect();
    let mut expected = members.clone();
    expected.sort_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(&b.2)).then(b.0.cmp(&a.0)));
    assert_eq!(users, expected.iter().map(|m| m.0.as_str()).collect::<Vec<_>>());

    let url = format!("{}/lambda-url/seasons/v1/boards/points/seasons/2026-01/distribution?buckets=3", watch_url());
    let distribution: Value = watch_client().get(url).send().await.unwrap().json().await.unwrap();
    let counts: u64 = distribution["buckets"].as_array().unwrap().iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!((&distribution["total"], counts), (&json!(3), 3), "{distribution}");
}

#[tokio::test]
async fn top_my_rank_and_an_error_through_cargo_lambda_watch() {
    let client = watch_client();
    let base = format!("{}/lambda-url", watch_url());
    let user = standings_tests::unique_prefix();
    for (i, target) in ["x", "y"].iter().enumerate() {
        let event = json!({"event_id": format!("{user}-{i}"), "user_id": user, "action": "invite", "target": format!("{user}-{target}")});
        let response = client.post(format!("{base}/ingest/v1/events")).json(&event).send().await.unwrap();
        assert_eq!(response.status(), 200);
    }
    let response = client.get(format!("{base}/query/v1/boards/invites/top?limit=1000")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["cache-control"], "public, max-age=5");
    let top: Value = response.json().await.unwrap();
    let mine = top["entries"].as_array().unwrap().iter().find(|e| e["user_id"] == user.as_str()).expect("listed");
    assert_eq!((mine["score"].as_i64(), mine["invite_count"].as_i64()), (Some(200), Some(2)));

    let me: Value = client.get(format!("{base}/query/v1/boards/invites/users/{user}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(me["rank"], mine["rank"]);
    assert_eq!(me["score"], 200);

    let response = client.get(format!("{base}/query/v1/boards/nope/top")).send().await.unwrap();
    assert_eq!(response.status(), 404);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "unknown_board");
}

/// The EventBridge schedule's event, as `cargo lambda invoke hotness --data-file` sends it.
#[tokio::test]
async fn the_scheduled_event_fixture_runs_hotness_once_per_minute() {
    let first = invoke("hotness", "scheduled-event.json");
    assert_eq!(first["minute"], "2026-11-22T02:00:00Z", "{first}");
    let boards = first["boards"].as_array().unwrap();
    assert_eq!(boards.len(), 1, "{first}");
    assert_eq!((&boards[0]["board"], &boards[0]["skipped"]), (&json!("hot-videos"), &json!(false)));
    assert!(boards[0]["members"].is_u64() && boards[0]["elapsed_ms"].is_u64(), "{first}");

    let again = invoke("hotness", "scheduled-event.json");
    assert_eq!(again["boards"][0]["skipped"], true, "a second delivery of the same minute does nothing: {again}");
}

#[tokio::test]
async fn a_score_and_a_statement_through_the_router_of_cargo_lambda_watch() {
    // At the paths API Gateway routes (Cargo.toml's router table): ingest and query behind one host.
    let client = watch_client();
    let base = watch_url();
    let user = standings_tests::unique_prefix();
    for (i, lap) in [61_000, 59_500, 60_200].into_iter().enumerate() {
        let submission = json!({"event_id": format!("{user}-{i}"), "user_id": user, "score": lap});
        let response = client.post(format!("{base}/v1/boards/lap-times/scores")).json(&submission).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let receipt: Value = response.json().await.unwrap();
        assert_eq!(receipt["applied"], i != 2, "{receipt}");
    }
    let me: Value = client.get(format!("{base}/v1/boards/lap-times/users/{user}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(me["score"], 59_500);
    let statement: Value =
        client.get(format!("{base}/v1/boards/lap-times/users/{user}/statement")).send().await.unwrap().json().await.unwrap();
    assert_eq!((&statement["lines"], &statement["unexplained"]), (&json!([{"kind": "kept_score", "points": 59_500}]), &Value::Null));
}

#[tokio::test]
async fn a_league_week_closed_through_cargo_lambda_invoke_then_its_cohort_over_http() {
    use standings::domain::config::Config;
    use standings::domain::league::Outcome;
    use standings::redis::store::Store;
    use standings::services::ingestion::Ingestor;

    let prefix = std::env::var("STANDINGS_WATCH_KEY_PREFIX").expect("scripts/test.sh names the watch's key prefix");
    let keys = Keys::new(&prefix).unwrap();
    let store = Store::connect(&standings_tests::redis_settings()).unwrap();
    let ingestor = Ingestor::new(std::sync::Arc::new(Config::default_boards()), keys.clone(), store.clone());
    // Lessons on Wednesday of ISO week 2026-W40 in Shanghai (the fixture's week): two players.
    let wednesday = standings_tests::at("2026-09-30T10:00:00+08:00");
    for (i, (user, lessons)) in [("league-a", 3), ("league-b", 1)].into_iter().enumerate() {
        for n in 0..lessons {
            let event: standings::domain::scoring::Event =
                serde_json::from_value(json!({"event_id": format!("{user}-{n}"), "user_id": user, "action": "lesson"})).unwrap();
            let receipt = ingestor.record(&event, wednesday + chrono::Duration::seconds(i as i64 * 10 + n)).await.unwrap();
            assert!(receipt.results[0].outcome.applied);
        }
    }

    let done = invoke("archive", "league-close-event.json");
    assert_eq!(
        done["leagues"],
        json!([{"board": "xp", "period_id": "2026-W40", "status": "complete", "cohorts_closed": 1, "players_placed_after": 0}]),
        "{done}"
    );
    let again = invoke("archive", "league-close-event.json");
    assert_eq!(again["leagues"][0]["cohorts_closed"], 0, "closed once: {again}");
    let mut conn = store.connection().await.unwrap();
    let result: String =
        redis::cmd("HGET").arg(keys.board("xp").league_results("2026-W40")).arg("league-a").query_async(&mut conn).await.unwrap();
    let outcome = Outcome::decode(&result).unwrap();
    assert_eq!((outcome.rank, outcome.points, outcome.next_tier), (1, Some(30), 0), "a cohort of two moves nobody");

    let url = format!("{}/lambda-url/query/v1/boards/xp/users/league-b/league?at=2026-09-30", watch_url());
    let league: Value = watch_client().get(url).send().await.unwrap().json().await.unwrap();
    let users: Vec<_> =
        league["entries"].as_array().unwrap().iter().map(|e| (e["user_id"].as_str().unwrap(), e["zone"].as_str().unwrap())).collect();
    assert_eq!(users, [("league-a", "stay"), ("league-b", "stay")], "{league}");
    assert_eq!((&league["period_id"], &league["tier"]), (&json!("2026-W40"), &json!("bronze")));
}

/// A tournament through the functions of `cargo lambda watch`: created, joined by its scores and
/// ended early over HTTP (`ingest`), its end run by the archive function's every-minute event
/// through `cargo lambda invoke`, its results read over HTTP (`seasons`): a one-off, and a
/// `cron` one (an instance a year, opened in the minute its window starts) read by default.
#[tokio::test]
async fn a_tournament_created_played_ended_and_its_results_read_through_cargo_lambda() {
    played_ended_and_read(false).await;
    played_ended_and_read(true).await;
}

async fn played_ended_and_read(cron: bool) {
    let client = watch_client();
    let ingest = format!("{}/lambda-url/ingest/v1", watch_url());
    let id = format!("{}-{}", if cron { "cron" } else { "cup" }, std::process::id());
    let now = chrono::Utc::now();
    let start = now - chrono::Duration::hours(1);
    let start = start - chrono::Duration::seconds(start.timestamp().rem_euclid(60));
    // A prize larger than a function's catalog holds (`DETAILS_HELD_BYTES`): the results read it
    // with the definition.
    let gold = json!({"medal": "gold", "note": "g".repeat(1_100)});
    let mut definition = json!({"title": "Watch cup", "keep": "best", "start": start,
        "end": now + chrono::Duration::hours(1), "join_required": false, "prizes": [{"ranks": [1, 1], "reward": gold.clone()}]});
    if cron {
        definition["cron"] = json!(start.format("%M %H %d %m *").to_string());
        definition["duration_secs"] = json!(86_400);
        // Between instances once this one is ended early: the next opens in a year.
        definition["end"] = json!(now + chrono::Duration::days(400));
    }
    let created = client.put(format!("{ingest}/admin/tournaments/{id}")).json(&definition).send().await.unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    for (i, (user, score)) in [("ann", 30), ("bo", 70)].into_iter().enumerate() {
        let play = json!({"event_id": format!("{id}-{i}"), "user_id": format!("{id}-{user}"), "score": score});
        let answer = client.post(format!("{ingest}/tournaments/{id}/scores")).json(&play).send().await.unwrap();
        assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
    }
    let ended = client.post(format!("{ingest}/admin/tournaments/{id}/end")).json(&json!({"reason": "watch"})).send().await.unwrap();
    assert_eq!(ended.status(), 202, "{}", ended.text().await.unwrap());

    // Another test's run of the shared archive function may have ended the instance first:
    // then this run has nothing to do for it, and the results read below show it stored.
    let run = invoke("archive", "runtime-event.json");
    let mine: Vec<&Value> = run["tournaments"].as_array().into_iter().flatten().filter(|r| r["tournament_id"] == id.as_str()).collect();
    assert!(mine.len() <= 1, "{run}");
    // The watch has no event bus (`STANDINGS_EVENT_BUS`): stored, not announced.
    for entry in mine {
        assert_eq!((&entry["status"], &entry["total"]), (&json!("stored"), &json!(2)), "{run}");
    }
    // Read without `instance` (item 9), on the path API Gateway routes: the one-off's only
    // instance, the cron one's latest ended (the next opens in a year). The seasons function's
    // catalog is at most 5 s old: polled until it knows the tournament.
    let url = format!("{}/v1/tournaments/{id}/results", watch_url());
    let started = std::time::Instant::now();
    let results: Value = loop {
        let response = client.get(&url).send().await.unwrap();
        if response.status() == 200 {
            break response.json().await.unwrap();
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "{}", response.text().await.unwrap());
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    let rows: Vec<(&str, i64, &Value)> = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["user_id"].as_str().unwrap(), r["score"].as_i64().unwrap(), &r["prize"]))
        .collect();
    let (bo, ann) = (format!("{id}-bo"), format!("{id}-ann"));
    assert_eq!(rows, [(bo.as_str(), 70, &gold), (ann.as_str(), 30, &Value::Null)], "{results}");
    let instance = if cron { start.format("%Y-%m-%dT%H%M").to_string() } else { "all".to_owned() };
    assert_eq!(results["instance"], json!(instance), "{results}");
    if cron {
        let view: Value = client.get(format!("{}/v1/tournaments/{id}", watch_url())).send().await.unwrap().json().await.unwrap();
        assert_eq!(view["state"], "upcoming", "between instances: {view}");
    }
    let top: Value = client.get(format!("{}/v1/tournaments/{id}/top", watch_url())).send().await.unwrap().json().await.unwrap();
    let (users, kept): (Vec<&str>, Vec<&Value>) =
        top["entries"].as_array().unwrap().iter().map(|e| (e["user_id"].as_str().unwrap(), &e["score"])).unzip();
    assert_eq!((users, kept, &top["instance"]), (vec![bo.as_str(), ann.as_str()], vec![&json!(70), &json!(30)], &json!(instance)), "{top}");
    if cron {
        return;
    }

    // Deleted: listed under `state=ended` with when, its results kept (the seasons function's
    // catalog is at most 5 s old: polled until it knows of the deletion).
    let deleted = client.delete(format!("{ingest}/admin/tournaments/{id}?reason=watch")).send().await.unwrap();
    assert_eq!(deleted.status(), 202, "{}", deleted.text().await.unwrap());
    let started = std::time::Instant::now();
    loop {
        let (mut cursor, mut found) = (String::new(), None);
        loop {
            let url = format!("{}/lambda-url/seasons/v1/tournaments?state=ended&limit=100{cursor}", watch_url());
            let page: Value = client.get(&url).send().await.unwrap().json().await.unwrap();
            found = found.or_else(|| page["tournaments"].as_array()?.iter().find(|t| t["tournament_id"] == id.as_str()).cloned());
            match page["next_cursor"].as_str() {
                Some(next) => cursor = format!("&cursor={next}"),
                None => break,
            }
        }
        if let Some(entry) = found.filter(|entry| !entry["deleted_at"].is_null()) {
            assert_eq!((&entry["state"], &entry["size"]), (&json!("ended"), &json!(2)), "{entry}");
            break;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "{id} not listed as deleted under state=ended");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
