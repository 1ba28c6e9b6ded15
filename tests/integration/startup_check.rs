//! Every function's start-up check: the real binaries, started as Lambda starts them, against a
//! redis-server of this test's own whose `maxmemory-policy` may evict boards, log the warning
//! before serving anything.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A redis-server on a free loopback port with an evicting policy; killed when dropped.
async fn evicting_redis() -> (Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(["--maxmemory-policy", "allkeys-lru"])
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("redis-server is installed (scripts/test.sh installs it)");
    let url = format!("redis://127.0.0.1:{port}");
    let client = redis::Client::open(url.as_str()).unwrap();
    let ready = async {
        loop {
            if let Ok(mut conn) = client.get_multiplexed_async_connection().await
                && redis::cmd("PING").query_async::<String>(&mut conn).await.is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), ready).await.expect("redis-server answers");
    (server, url)
}

/// The first JSON log line of `function` started against `redis_url` whose message matches.
async fn startup_warning(function: &str, redis_url: &str) -> Value {
    let binary = std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().join(function);
    let mut child = Command::new(&binary)
        .env_clear()
        .env("AWS_LAMBDA_FUNCTION_NAME", function)
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        // Nothing listens there: the runtime fails after the start-up check, which is all we need.
        .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:1")
        .env("REDIS_URL", redis_url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{} must be built (scripts/test.sh builds all targets): {e}", binary.display()));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let warning = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let Ok(line) = serde_json::from_str::<Value>(&line) else { continue };
            if line["message"].as_str().is_some_and(|m| m.contains("maxmemory-policy")) {
                return line;
            }
        }
        panic!("{function} exited without warning about the eviction policy");
    };
    tokio::time::timeout(Duration::from_secs(30), warning).await.unwrap_or_else(|_| panic!("{function}: no warning within 30 s"))
}

#[tokio::test]
async fn every_function_warns_at_start_up_when_the_store_may_evict_boards() {
    let (_server, url) = evicting_redis().await;
    for function in ["ingest", "query", "hotness"] {
        let warning = startup_warning(function, &url).await;
        assert_eq!(warning["level"], "WARN", "{function}: {warning}");
        assert_eq!(warning["maxmemory_policy"], "allkeys-lru", "{function}: {warning}");
    }
}
