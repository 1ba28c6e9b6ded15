//! Release bootstraps (scenario 8): the size of each function's deployable `bootstrap`, built
//! as it is deployed (`cargo lambda build --release --arm64`), and the cold init time of the
//! x86_64 release binary — from spawning the process to its first poll of the Lambda Runtime
//! API's `next` (a minimal emulator here answers nothing, so the poll marks "ready") — both
//! against a trivial `lambda_runtime` function built the same way (`examples/hello_lambda.rs`).
//!
//! `ingest` and `query` check Redis's eviction policy before their first poll, so their init
//! includes connecting to Redis (the benchmark's, on loopback).

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

use crate::harness::{Bench, BenchError, Measurement, Report, Table, Target, ratio};

const FUNCTIONS: [&str; 4] = ["ingest", "query", "hotness", "seasons"];
/// Measured without a bound: the archived-season reads carry the DynamoDB SDK, and were moved
/// out of `query` so that the function on every live read's path stays small.
const UNBOUNDED: &str = "seasons";
const HELLO: &str = "hello_lambda";
/// Cold starts of each binary per repetition.
const STARTS: usize = 3;
/// The bound on a bootstrap, in bytes (8 MB).
const MAX_BOOTSTRAP: u64 = 8_000_000;

/// Runs cargo in the workspace, its output on stderr (stdout carries the results).
async fn cargo(workspace: &Path, args: &[&str]) -> Result<(), BenchError> {
    eprintln!("  cargo {}", args.join(" "));
    let status = tokio::process::Command::new("cargo")
        .args(args)
        .current_dir(workspace)
        .stdout(Stdio::from(std::io::stderr().as_fd().try_clone_to_owned()?))
        .status()
        .await?;
    if !status.success() {
        return Err(format!("cargo {} failed: {status}", args.join(" ")).into());
    }
    Ok(())
}

async fn target_dir(workspace: &Path) -> Result<PathBuf, BenchError> {
    let output = tokio::process::Command::new("cargo")
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(workspace)
        .output()
        .await?;
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    Ok(metadata["target_directory"].as_str().ok_or("cargo metadata has no target_directory")?.into())
}

fn size(path: &Path) -> Result<u64, BenchError> {
    Ok(std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?.len())
}

fn megabytes(bytes: u64) -> String {
    format!("{:.2} MB", bytes as f64 / 1e6)
}

/// Reads one HTTP request head from the function.
async fn request_line(listener: &TcpListener) -> Result<String, BenchError> {
    let (mut socket, _) = listener.accept().await?;
    let mut head = Vec::new();
    let mut buffer = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = socket.read(&mut buffer).await?;
        if read == 0 {
            break;
        }
        head.extend_from_slice(&buffer[..read]);
    }
    let head = String::from_utf8_lossy(&head);
    Ok(head.lines().next().unwrap_or_default().to_owned())
}

/// Spawn → first `GET …/runtime/invocation/next`.
async fn cold_init(bench: &Bench, binary: &Path, name: &str) -> Result<Duration, BenchError> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let started = Instant::now();
    let mut function = tokio::process::Command::new(binary)
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", listener.local_addr()?.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", name)
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("REDIS_URL", &bench.redis_url)
        .env("STANDINGS_KEY_PREFIX", bench.keys.prefix())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let ready = async {
        loop {
            let line = request_line(&listener).await?;
            if line.starts_with("GET /2018-06-01/runtime/invocation/next") {
                return Ok::<_, BenchError>(started.elapsed());
            }
            if line.contains("/runtime/init/error") {
                return Err(format!("{name} failed to initialise").into());
            }
        }
    };
    let elapsed = tokio::time::timeout(Duration::from_secs(30), ready).await.map_err(|_| format!("{name} never polled"))??;
    function.kill().await?;
    Ok(elapsed)
}

pub async fn run(bench: &Bench) -> Result<Report, BenchError> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().ok_or("the bench crate is in the workspace")?.to_owned();
    let target = target_dir(&workspace).await?;
    let mut lambda_build = vec!["lambda", "build", "--release", "--arm64", "--locked"];
    lambda_build.extend(FUNCTIONS.iter().flat_map(|f| ["-p", f]));
    cargo(&workspace, &lambda_build).await?;
    cargo(&workspace, &["lambda", "build", "--release", "--arm64", "--locked", "-p", "standings-bench", "--example", HELLO]).await?;
    let mut native_build = vec!["build", "--release", "--locked"];
    native_build.extend(FUNCTIONS.iter().flat_map(|f| ["-p", f]));
    cargo(&workspace, &native_build).await?;
    cargo(&workspace, &["build", "--release", "--locked", "-p", "standings-bench", "--example", HELLO]).await?;

    let bootstrap = |name: &str| target.join("lambda").join(name).join("bootstrap");
    let native = |name: &str| if name == HELLO { target.join("release/examples").join(name) } else { target.join("release").join(name) };
    let hello_size = size(&bootstrap(HELLO))?;
    let mut sizes = Table::new(&["function", "arm64 `bootstrap`", "/ hello", "x86_64 release binary"]);
    let mut targets = Vec::new();
    for name in FUNCTIONS.iter().copied().chain([HELLO]) {
        let arm64 = size(&bootstrap(name))?;
        sizes.row(vec![
            format!("`{name}`"),
            megabytes(arm64),
            format!("{:.2}", arm64 as f64 / hello_size as f64),
            megabytes(size(&native(name))?),
        ]);
        if name != HELLO && name != UNBOUNDED {
            targets.push(Target {
                row: format!("`{name}` bootstrap (arm64)"),
                goal: "≤ 8 MB".into(),
                measured: megabytes(arm64),
                met: arm64 <= MAX_BOOTSTRAP,
            });
        }
    }

    let mut inits: Vec<(&str, Measurement)> =
        FUNCTIONS.iter().copied().chain([HELLO]).map(|name| (name, Measurement::new(format!("`{name}`")))).collect();
    for start in 0..=STARTS * bench.repetitions {
        for (name, measurement) in &mut inits {
            let elapsed = cold_init(bench, &native(name), name).await?;
            // The first start of each reads the binary from disk into the page cache.
            if start > 0 {
                measurement.samples.push(elapsed);
            }
        }
    }
    let hello = inits.iter().find(|(name, _)| *name == HELLO).map(|(_, m)| m.median()).ok_or("hello was measured")?;
    let mut init_table = Table::timings(&inits.iter().map(|(_, m)| m).collect::<Vec<_>>());
    init_table =
        init_table.with_column("/ hello (median)", inits.iter().map(|(_, m)| format!("{:.2}", ratio(m.median(), hello))).collect());
    Ok(Report {
        title: "release bootstraps: size and cold init (scenario 8)".into(),
        setup: format!(
            "Sizes: `cargo lambda build --release --arm64` (the release profile: `opt-level = \"s\"`, fat LTO, one codegen unit, \
             `panic = \"unwind\"`, symbols stripped), as deployed. Cold init: the x86_64 release binary of the same profile, spawned \
             {} times each (interleaved, after one untimed start), timed from spawn to its first `GET /runtime/invocation/next` \
             on a minimal Runtime API emulator.",
            STARTS * bench.repetitions
        ),
        tables: vec![sizes, init_table],
        notes: vec![format!("hello (`lambda_runtime` echo) bootstrap: {}", megabytes(hello_size))],
        targets,
    })
}
