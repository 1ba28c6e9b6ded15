//! The built `standings` binary where the local run cannot answer as a deployment does: an
//! OAuth token endpoint and API Gateway's bearer check (the watch runs with auth off), listings
//! of more than one page, and a job that does not complete (Ctrl-C between its invocations, or
//! its invocations' limit). A small server stands in for each, and checks what the command sent.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Notify;

use super::cli::binary;

/// Serves `app` on a free loopback port; its base URL.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

fn command(args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(binary());
    command.args(args).env_remove("STANDINGS_TOKEN").env_remove("STANDINGS_STACK").kill_on_drop(true);
    command
}

#[tokio::test]
async fn client_credentials_fetch_a_token_that_admin_calls_carry() {
    // The token endpoint takes the client's id and secret as HTTP Basic (RFC 6749 2.3.1) and
    // the grant in the form; the route takes only the token it issued.
    async fn token(headers: HeaderMap, body: String) -> (StatusCode, Json<Value>) {
        use base64::Engine;
        let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("ops-client:s3cret"));
        let form = url_form(&body);
        let grant = form.iter().any(|(k, v)| k == "grant_type" && v == "client_credentials");
        let scope = form.iter().any(|(k, v)| k == "scope" && v == "standings/admin");
        if headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(basic.as_str()) && grant && scope {
            (StatusCode::OK, Json(json!({"access_token": "issued-token-1", "token_type": "Bearer", "expires_in": 3600})))
        } else {
            (StatusCode::UNAUTHORIZED, Json(json!({"error": "invalid_client"})))
        }
    }
    async fn ban(Path(user): Path<String>, headers: HeaderMap) -> (StatusCode, Json<Value>) {
        match headers.get("authorization").and_then(|v| v.to_str().ok()) {
            Some("Bearer issued-token-1") => (StatusCode::OK, Json(json!({"user_id": user, "banned": true}))),
            _ => (StatusCode::UNAUTHORIZED, Json(json!({"message": "Unauthorized"}))),
        }
    }
    let url = serve(Router::new().route("/oauth2/token", post(token)).route("/v1/admin/users/{user}/ban", post(ban))).await;
    let token_url = format!("{url}/oauth2/token");

    let output = command(&["--json", "--api", &url, "--client-id", "ops-client", "--client-secret", "s3cret", "--token-url", &token_url])
        .args(["ban", "mallory"])
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer, json!({"user_id": "mallory", "banned": true}));

    // A wrong secret: the token endpoint's refusal, not a call without a token.
    let refused = command(&["--json", "--api", &url, "--client-id", "ops-client", "--client-secret", "wrong", "--token-url", &token_url])
        .args(["ban", "mallory"])
        .output()
        .await
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let error: Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!((&error["error"]["code"], &error["error"]["status"]), (&json!("invalid_client"), &json!(401)), "{error}");

    // A token the gateway refuses (expired, of another scope): its own `{"message"}`, named by status.
    let expired = command(&["--json", "--api", &url, "ban", "mallory"]).env("STANDINGS_TOKEN", "expired-token").output().await.unwrap();
    assert_eq!(expired.status.code(), Some(1));
    let error: Value = serde_json::from_slice(&expired.stdout).unwrap();
    assert_eq!(error["error"], json!({"code": "unauthorized", "status": 401, "message": "Unauthorized"}), "{error}");
}

/// `application/x-www-form-urlencoded` pairs (the few characters the command's form uses).
fn url_form(body: &str) -> Vec<(String, String)> {
    let decode = |s: &str| s.replace('+', " ").replace("%2F", "/").replace("%2f", "/");
    body.split('&').filter_map(|pair| pair.split_once('=')).map(|(k, v)| (decode(k), decode(v))).collect()
}

#[tokio::test]
async fn listings_follow_every_page_in_order() {
    // Three pages of tournaments; each request is recorded with its query.
    type Asked = Arc<std::sync::Mutex<Vec<HashMap<String, String>>>>;
    let asked: Asked = Arc::default();
    async fn list(State(asked): State<Asked>, Query(query): Query<HashMap<String, String>>) -> Json<Value> {
        asked.lock().unwrap().push(query.clone());
        let (rows, next) = match query.get("cursor").map(String::as_str) {
            None => (vec!["a-cup", "b-cup"], Some("c1")),
            Some("c1") => (vec!["c-cup"], Some("c2")),
            Some(_) => (vec!["d-cup"], None),
        };
        let rows: Vec<Value> = rows.into_iter().map(|id| json!({"tournament_id": id, "state": "open"})).collect();
        Json(json!({"tournaments": rows, "next_cursor": next}))
    }
    let url = serve(Router::new().route("/v1/tournaments", get(list)).with_state(asked.clone())).await;

    let output = command(&["--json", "--api", &url, "tournaments", "list", "--state", "open"]).output().await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    let ids: Vec<&str> = answer["tournaments"].as_array().unwrap().iter().map(|t| t["tournament_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["a-cup", "b-cup", "c-cup", "d-cup"]);
    assert_eq!(answer["next_cursor"], Value::Null);
    let asked = asked.lock().unwrap().clone();
    let cursors: Vec<Option<&str>> = asked.iter().map(|q| q.get("cursor").map(String::as_str)).collect();
    assert_eq!(cursors, [None, Some("c1"), Some("c2")], "{asked:?}");
    let kept = |q: &HashMap<String, String>| {
        q.get("state").map(String::as_str) == Some("open") && q.get("limit").map(String::as_str) == Some("100")
    };
    assert!(asked.iter().all(kept), "every page keeps the filter, at the most a page holds: {asked:?}");
}

/// A restore that never completes: each invocation reports one more line applied.
#[derive(Clone, Default)]
struct Endless {
    invocations: Arc<AtomicUsize>,
    /// Set: the second invocation answers only once this is notified.
    hold_second: Option<Arc<Notify>>,
    /// Notified when the second invocation arrives.
    second_arrived: Arc<Notify>,
}

async fn invoke(State(endless): State<Endless>, Path(function): Path<String>) -> Json<Value> {
    assert_eq!(function, "journal");
    let n = endless.invocations.fetch_add(1, Ordering::SeqCst) + 1;
    if n == 2 {
        endless.second_arrived.notify_one();
        if let Some(hold) = &endless.hold_second {
            hold.notified().await;
        }
    }
    Json(json!({"status": "in_progress", "boards": [{"board": "points", "status": "in_progress", "replayed": 1, "applied": 1}]}))
}

fn endless_app(endless: Endless) -> Router {
    Router::new().route("/2015-03-31/functions/{function}/invocations", post(invoke)).with_state(endless)
}

#[tokio::test]
async fn a_job_at_its_invocations_limit_prints_what_it_did_and_exits_non_zero() {
    let endless = Endless::default();
    let url = serve(endless_app(endless.clone())).await;
    let output = command(&["--json", "--lambda-endpoint", &url, "restore", "--board", "points"]).output().await.unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let failure: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(failure["error"]["code"], "incomplete", "{failure}");
    let invocations = endless.invocations.load(Ordering::SeqCst);
    assert_eq!(invocations, 500, "the limit is 500 invocations");
    assert_eq!(failure["summary"]["boards"][0]["applied"], json!(invocations), "the summary so far: {failure}");
}

#[tokio::test]
async fn ctrl_c_stops_a_job_between_invocations_with_its_summary_so_far() {
    let hold = Arc::new(Notify::new());
    let endless = Endless { hold_second: Some(hold.clone()), ..Endless::default() };
    let url = serve(endless_app(endless.clone())).await;
    let mut child = command(&["--json", "--lambda-endpoint", &url, "restore", "--board", "points"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().unwrap().to_string();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();

    // Ctrl-C while the second invocation runs; it answers once the command said it will stop.
    endless.second_arrived.notified().await;
    let sent = std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(sent.success());
    let mut seen = Vec::new();
    while let Some(line) = stderr.next_line().await.unwrap() {
        let stopping = line.starts_with("stopping after this invocation");
        seen.push(line);
        if stopping {
            break;
        }
    }
    assert!(seen.iter().any(|l| l.starts_with("stopping after this invocation")), "{seen:?}");
    hold.notify_one();

    let output = child.wait_with_output().await.unwrap();
    assert_eq!(output.status.code(), Some(130));
    assert_eq!(endless.invocations.load(Ordering::SeqCst), 2, "no invocation after the one under way");
    let failure: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(failure["error"]["code"], "stopped", "{failure}");
    assert_eq!(failure["summary"]["boards"][0]["applied"], json!(2), "both invocations' lines: {failure}");
}

/// A restore whose third and fifth invocations fail (the function's own error, as the Invoke
/// API returns it) and whose seventh completes; every payload it was sent is kept.
#[derive(Clone, Default)]
struct Flaky {
    payloads: Arc<std::sync::Mutex<Vec<Value>>>,
}

async fn flaky(State(flaky): State<Flaky>, body: String) -> (StatusCode, HeaderMap, Json<Value>) {
    let n = {
        let mut payloads = flaky.payloads.lock().unwrap();
        payloads.push(serde_json::from_str(&body).unwrap());
        payloads.len()
    };
    let mut headers = HeaderMap::new();
    if n == 3 || n == 5 {
        headers.insert("x-amz-function-error", "Unhandled".parse().unwrap());
        return (StatusCode::OK, headers, Json(json!({"errorType": "Timeout", "errorMessage": "Task timed out after 900.00 seconds"})));
    }
    let status = if n >= 7 { "complete" } else { "in_progress" };
    (
        StatusCode::OK,
        headers,
        Json(json!({"status": status, "boards": [{"board": "points", "status": status, "replayed": 1, "applied": 1}]})),
    )
}

#[tokio::test]
async fn a_failed_invocation_keeps_what_the_ones_before_it_did_and_the_same_command_goes_on() {
    let stand_in = Flaky::default();
    let url = serve(Router::new().route("/2015-03-31/functions/{function}/invocations", post(flaky)).with_state(stand_in.clone())).await;
    let args = ["--json", "--lambda-endpoint", &url, "restore", "--board", "points"];

    let failed = command(&args).output().await.unwrap();
    assert_eq!(failed.status.code(), Some(1), "{}", String::from_utf8_lossy(&failed.stderr));
    let failure: Value = serde_json::from_slice(&failed.stdout).unwrap();
    assert_eq!(failure["error"]["code"], "Timeout", "the function's own error: {failure}");
    assert_eq!(failure["summary"]["boards"][0]["applied"], json!(2), "the two invocations before it: {failure}");
    // Readable: the summary so far on stdout, the failure on stderr.
    let readable = command(&args[1..]).output().await.unwrap();
    assert_eq!(readable.status.code(), Some(1));
    let (out, err) = (String::from_utf8_lossy(&readable.stdout), String::from_utf8_lossy(&readable.stderr));
    assert!(out.contains("status: in_progress") && out.contains("points"), "the fourth invocation's summary: {out}");
    assert!(err.contains("standings: Timeout: Task timed out after 900.00 seconds"), "{err}");
    // The same command again goes on to the end.
    let completed = command(&args[1..]).output().await.unwrap();
    assert_eq!(completed.status.code(), Some(0), "the seventh invocation completes: {}", String::from_utf8_lossy(&completed.stderr));
    let text = String::from_utf8_lossy(&completed.stdout);
    assert!(text.contains("status: complete") && text.contains("points"), "{text}");

    let payloads = stand_in.payloads.lock().unwrap().clone();
    assert_eq!(payloads.len(), 7, "{payloads:?}");
    assert!(payloads.iter().all(|p| *p == json!({"restore": {"board": "points"}})), "the same job, resumed by the function: {payloads:?}");
}

#[tokio::test]
async fn a_listing_whose_page_fails_prints_the_rows_before_it_and_where_it_stopped() {
    async fn list(Query(query): Query<HashMap<String, String>>) -> (StatusCode, Json<Value>) {
        match query.get("cursor") {
            None => (StatusCode::OK, Json(json!({"boards": [{"board": "points"}, {"board": "streaks"}], "next_cursor": "c1"}))),
            Some(_) => (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"error": {"code": "unavailable", "message": "try again"}}))),
        }
    }
    let url = serve(Router::new().route("/v1/boards", get(list))).await;
    let output = command(&["--json", "--api", &url, "boards", "list"]).output().await.unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let failure: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!((&failure["error"]["code"], &failure["error"]["status"]), (&json!("unavailable"), &json!(503)), "{failure}");
    let boards: Vec<&str> = failure["summary"]["boards"].as_array().unwrap().iter().map(|b| b["board"].as_str().unwrap()).collect();
    assert_eq!(boards, ["points", "streaks"]);
    assert_eq!(failure["summary"]["next_cursor"], "c1", "the page not read: {failure}");
}
