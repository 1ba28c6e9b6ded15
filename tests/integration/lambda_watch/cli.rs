//! The built `standings` binary (issue 60) against the functions `cargo lambda watch` serves:
//! a runtime board lost and restored to completion with its progress lines, a tournament from a
//! file, a ban and a void, `--json` read back, and the refusals a command must exit non-zero on.

use std::path::PathBuf;
use std::process::Output;

use serde_json::{Value, json};
use standings::redis::keys::Keys;

use super::{watch_client, watch_url};

/// `target/debug/standings`, built beside this test binary (`target/debug/deps/…`) by the
/// workspace's build.
pub(super) fn binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let path = exe.parent().and_then(|deps| deps.parent()).expect("target/debug").join("standings");
    assert!(path.exists(), "{} is not built: cargo build --workspace builds it", path.display());
    path
}

/// `standings` with the watch as both targets and `args`; stdin closed, stdout and stderr kept
/// (not a terminal: the progress comes as lines).
fn standings(args: &[&str]) -> Output {
    let watch = watch_url();
    std::process::Command::new(binary())
        .args(["--api", &watch, "--lambda-endpoint", &watch])
        .args(args)
        .env_remove("STANDINGS_TOKEN")
        .env_remove("STANDINGS_STACK")
        .output()
        .expect("standings runs")
}

fn json_of(output: &Output) -> Value {
    let (out, err) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "standings failed: {out} {err}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&output.stdout)))
}

/// `standings args` until it succeeds with an answer `seen` (within 30 s): a read served by a
/// function whose catalog has not seen the writes yet answers as before them (404 for a
/// tournament it does not know) until it refreshes (every 5 s).
async fn eventually(args: &[&str], seen: impl Fn(&Value) -> bool) -> Value {
    let started = std::time::Instant::now();
    loop {
        let output = standings(args);
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        if (output.status.success() && seen(&answer)) || started.elapsed() > std::time::Duration::from_secs(30) {
            return json_of(&output);
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

fn file(name: &str, body: &Value) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("standings-cli-{}", standings_tests::unique_prefix()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, body.to_string()).unwrap();
    path
}

async fn submit(board: &str, user: &str, id: &str, score: u32) {
    let url = format!("{}/v1/boards/{board}/scores", watch_url());
    let response = watch_client().post(url).json(&json!({"event_id": id, "user_id": user, "score": score})).send().await.unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
}

/// The board's keys deleted, its guard too (a loss of the board, not of the deployment: the
/// watch serves the other tests meanwhile).
async fn lose(board: &str) {
    let prefix = std::env::var("STANDINGS_WATCH_KEY_PREFIX").expect("scripts/test.sh names the watch's key prefix");
    let keys = Keys::new(&prefix).unwrap().board(board);
    let client = redis::Client::open(standings_tests::redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let found: Vec<String> = redis::cmd("KEYS").arg(keys.pattern_all()).query_async(&mut conn).await.unwrap();
    assert!(!found.is_empty(), "the board has keys to lose");
    let _: () = redis::cmd("DEL").arg(&found).query_async(&mut conn).await.unwrap();
}

#[tokio::test]
async fn a_board_lost_is_restored_to_completion_with_its_progress_lines() {
    let board = format!("cli-{}", standings_tests::unique_prefix()).chars().take(40).collect::<String>().to_lowercase();
    let definition =
        file("board.json", &json!({"kind": "scores", "keep": "best", "order": "desc", "timezone": "UTC", "periods": ["all"], "top": 100}));
    json_of(&standings(&["--json", "boards", "put", &board, definition.to_str().unwrap()]));
    for (i, (user, score)) in [("ann", 30), ("bob", 50), ("cy", 40)].into_iter().enumerate() {
        submit(&board, user, &format!("{board}-{i}"), score).await;
    }
    // The reads and the jobs are other functions than the writes: their catalogs are at most
    // 5 s old.
    let before = eventually(&["--json", "top", &board], |top| top["entries"].as_array().is_some_and(|e| e.len() == 3)).await;
    eventually(&["--json", "verify", "--board", &board], |_| true).await;
    let drained = json_of(&standings(&["--json", "drain"]));
    assert!(drained["boards"].is_array(), "{drained}");
    lose(&board).await;

    let restore = standings(&["--json", "restore", "--board", &board]);
    let report = json_of(&restore);
    assert_eq!(report["status"], "complete", "{report}");
    let progress = String::from_utf8_lossy(&restore.stderr);
    assert!(progress.lines().any(|line| line.starts_with("restore: invocation 1, boards 1/1")), "{progress}");
    assert!(progress.contains("journal ") && progress.contains("(100%)"), "the journal read of its size: {progress}");
    let after = json_of(&standings(&["--json", "top", &board]));
    assert_eq!(after["entries"], before["entries"]);
}

#[tokio::test]
async fn a_tournament_from_a_file_patched_ended_and_its_results_listed() {
    let id = format!("cup-{}", standings_tests::unique_prefix()).chars().take(40).collect::<String>().to_lowercase();
    let start = chrono::Utc::now() - chrono::Duration::minutes(1);
    let cup = json!({"title": "CLI cup", "keep": "best", "start": start.to_rfc3339(), "end": (start + chrono::Duration::days(1)).to_rfc3339(),
        "max_size": 10, "max_entries": 3, "join_required": false});
    let put = json_of(&standings(&["--json", "tournaments", "put", &id, file("cup.json", &cup).to_str().unwrap()]));
    assert_eq!(put["tournament_id"], id.as_str(), "{put}");
    let patched = json_of(&standings(&[
        "--json",
        "tournaments",
        "patch",
        &id,
        file("patch.json", &json!({"title": "CLI cup, longer"})).to_str().unwrap(),
    ]));
    assert_eq!(patched["definition"]["title"], "CLI cup, longer", "{patched}");
    let url = format!("{}/v1/tournaments/{id}/scores", watch_url());
    let scored = watch_client().post(url).json(&json!({"event_id": format!("{id}-1"), "user_id": "ann", "score": 7})).send().await.unwrap();
    assert_eq!(scored.status(), 200, "{}", scored.text().await.unwrap());
    // Two more attempts for ann, exactly once however often the command runs.
    let grant = ["--json", "tournaments", "grant", &id, "ann", "--add", "2", "--reason", "cli test"];
    let granted = eventually(&grant, |granted| granted["added"] == 2).await;
    assert_eq!(granted["duplicate"], false, "{granted}");
    let again = json_of(&standings(&grant));
    assert_eq!((&again["added"], &again["duplicate"]), (&json!(2), &json!(true)), "the same grant: {again}");
    let ended = json_of(&standings(&["--json", "tournaments", "end", &id, "--reason", "cli test"]));
    assert_eq!(ended["tournament_id"], id.as_str(), "{ended}");
    // Read by another function than the writes: its catalog is at most 5 s old.
    let shown = eventually(&["--json", "tournaments", "show", &id], |shown| shown["state"] == "ended").await;
    assert_eq!((&shown["title"], &shown["state"], &shown["size"]), (&json!("CLI cup, longer"), &json!("ended"), &json!(1)), "{shown}");

    // The archive's run stores the ended instance's results (the every-minute schedule's).
    super::invoke("archive", "runtime-event.json");
    let results = eventually(&["--json", "tournaments", "results", &id], |_| true).await;
    let rows = results["results"].as_array().unwrap_or_else(|| panic!("{results}"));
    assert_eq!(rows.len(), 1, "{results}");
    assert_eq!((&rows[0]["rank"], &rows[0]["user_id"], &rows[0]["score"]), (&json!(1), &json!("ann"), &json!(7)), "{results}");
}

#[tokio::test]
async fn a_void_takes_back_a_users_points_and_a_ban_refuses_their_next_event() {
    let user = standings_tests::unique_prefix();
    let event = |n: u32| json!({"event_id": format!("{user}-{n}"), "user_id": user, "action": "qa"});
    let url = format!("{}/v1/events", watch_url());
    for n in 0..2 {
        let response = watch_client().post(&url).json(&event(n)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    }
    let before = json_of(&standings(&["--json", "rank", "points", &user]));
    assert!(before["score"].as_i64().unwrap() > 0, "{before}");
    let from = (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339();
    let to = (chrono::Utc::now() + chrono::Duration::minutes(1)).to_rfc3339();
    json_of(&standings(&["--json", "void", "points", &user, "--from", &from, "--to", &to, "--reason", "cli test"]));
    let output = standings(&["--json", "rank", "points", &user]);
    let after: Value = serde_json::from_slice(&output.stdout).unwrap();
    let taken_back = match output.status.success() {
        true => after["score"] == json!(0),
        false => after["error"]["code"] == "not_ranked",
    };
    assert!(taken_back, "the void took the points back: {after}");
    let audit = json_of(&standings(&["--json", "audit", "--board", "points", "--limit", "1000"]));
    let entries = audit["entries"].as_array().unwrap_or_else(|| panic!("{audit}"));
    assert!(entries.iter().any(|e| e["kind"] == "void" && e["user_id"] == user.as_str() && e["reason"] == "cli test"), "{audit}");

    json_of(&standings(&["--json", "ban", &user]));
    let refused: Value = watch_client().post(&url).json(&event(9)).send().await.unwrap().json().await.unwrap();
    assert_eq!(refused["error"]["code"], "user_banned", "a banned user's event is refused: {refused}");
}

#[tokio::test]
async fn wrong_targets_a_bad_file_and_an_unknown_board_exit_non_zero_with_a_clear_error() {
    let unknown = standings(&["--json", "top", "no-such-board"]);
    assert_eq!(unknown.status.code(), Some(1));
    let error: Value = serde_json::from_slice(&unknown.stdout).unwrap();
    assert_eq!((&error["error"]["code"], &error["error"]["status"]), (&json!("unknown_board"), &json!(404)), "{error}");

    let bad_file = standings(&["boards", "put", "x", "/no/such/file.json"]);
    assert_eq!(bad_file.status.code(), Some(2), "{}", String::from_utf8_lossy(&bad_file.stderr));
    let not_json = std::env::temp_dir().join(format!("standings-cli-{}.json", std::process::id()));
    std::fs::write(&not_json, "{\"kind\": ").unwrap();
    let malformed = standings(&["--json", "tournaments", "put", "x-cup", not_json.to_str().unwrap()]);
    std::fs::remove_file(&not_json).ok();
    assert_eq!(malformed.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&malformed.stdout).unwrap();
    assert_eq!(error["error"]["code"], "usage", "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("not JSON"), "{error}");

    // A job whose Lambda endpoint answers nothing: unreachable, nothing invoked, exit 1.
    let no_lambda =
        std::process::Command::new(binary()).args(["restore", "--json", "--lambda-endpoint", "http://127.0.0.1:9"]).output().unwrap();
    assert_eq!(no_lambda.status.code(), Some(1), "{}", String::from_utf8_lossy(&no_lambda.stderr));
    let error: Value = serde_json::from_slice(&no_lambda.stdout).unwrap();
    assert_eq!(error["error"]["code"], "unreachable", "target flags after the subcommand too: {error}");

    let nowhere = std::process::Command::new(binary()).args(["--api", "http://127.0.0.1:9", "top", "points"]).output().unwrap();
    assert_eq!(nowhere.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&nowhere.stderr).contains("127.0.0.1:9"), "{}", String::from_utf8_lossy(&nowhere.stderr));
    let no_api = std::process::Command::new(binary()).args(["--lambda-endpoint", "http://127.0.0.1:9", "top", "points"]).output().unwrap();
    assert_eq!(no_api.status.code(), Some(2), "the routes' commands ask for --api: {}", String::from_utf8_lossy(&no_api.stderr));
}

/// A route that wants a token, asked without one: the command says where a token comes from.
/// (The watch runs with auth off: a one-answer server stands in for API Gateway's 401.)
#[tokio::test]
async fn a_missing_token_says_where_a_token_comes_from() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = [0u8; 4096];
        let _ = socket.read(&mut request).await.unwrap();
        let body = r#"{"message":"Unauthorized"}"#;
        let answer = format!(
            "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(answer.as_bytes()).await.unwrap();
    });
    let output = tokio::process::Command::new(binary())
        .args(["--api", &api, "ban", "someone"])
        .env_remove("STANDINGS_TOKEN")
        .output()
        .await
        .unwrap();
    server.await.unwrap();
    assert_eq!(output.status.code(), Some(1));
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("401") && error.contains("STANDINGS_TOKEN"), "{error}");
}

#[tokio::test]
async fn a_league_period_is_closed_to_completion_and_one_not_ended_is_refused() {
    use standings::domain::period::{Period, PeriodKind};
    // The shipped `xp` board: a weekly league from Monday, in Asia/Shanghai.
    let week = |at| Period::containing(PeriodKind::Week(chrono::Weekday::Mon), at, chrono_tz::Asia::Shanghai).id;
    let ended = week(chrono::Utc::now() - chrono::Duration::weeks(2));
    let closed = json_of(&standings(&["--json", "league", "close", "--board", "xp", "--period-id", &ended]));
    let reports = closed["leagues"].as_array().unwrap_or_else(|| panic!("{closed}"));
    assert_eq!((reports.len(), &reports[0]["status"], &reports[0]["period_id"]), (1, &json!("complete"), &json!(ended)), "{closed}");

    let open = week(chrono::Utc::now());
    let refused = standings(&["--json", "league", "close", "--board", "xp", "--period-id", &open]);
    assert_eq!(refused.status.code(), Some(1));
    let error: Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains("has not ended")), "{error}");
}
