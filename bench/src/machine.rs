//! The machine a run measured, written beside its results: absolute numbers only mean
//! something next to it, and the load average says whether the machine was shared.

use std::process::Command;

use crate::harness::{Bench, BenchError};

pub struct Machine {
    cpu: String,
    cores: usize,
    memory_gib: u64,
    redis: String,
    commit: String,
    load_at_start: String,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The 1-, 5- and 15-minute load averages.
pub fn load_average() -> String {
    read("/proc/loadavg").split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

impl Machine {
    pub async fn describe(bench: &Bench) -> Result<Self, BenchError> {
        let cpuinfo = read("/proc/cpuinfo");
        let cpu = cpuinfo
            .lines()
            .find_map(|line| {
                line.strip_prefix("model name").and_then(|rest| rest.split_once(':')).map(|(_, model)| model.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        let memory_kib: u64 = read("/proc/meminfo")
            .lines()
            .find_map(|line| line.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let info: String = redis::cmd("INFO").arg("server").query_async(&mut bench.connection().await?).await?;
        let field = |name: &str| info.lines().find_map(|l| l.strip_prefix(name)).unwrap_or("?").trim().to_owned();
        let redis = format!("{} ({} mode)", field("redis_version:"), field("redis_mode:"));
        let git =
            |args: &[&str]| Command::new("git").args(args).output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        // BENCHMARKS.md is what a run rewrites: a change to it alone is not a change to what ran.
        let changes = git(&["status", "--porcelain", "--untracked-files=no", "--", ".", ":!BENCHMARKS.md"]);
        let commit = match (git(&["rev-parse", "--short", "HEAD"]), changes) {
            (Some(hash), Some(changes)) if !changes.is_empty() => format!("{hash} with uncommitted changes"),
            (Some(hash), _) => hash,
            _ => "unknown".to_owned(),
        };
        Ok(Self {
            cpu,
            cores: std::thread::available_parallelism().map_or(0, usize::from),
            memory_gib: memory_kib / (1024 * 1024),
            redis,
            commit,
            load_at_start: load_average(),
        })
    }

    /// The Markdown section; the load average at the end is read now.
    pub fn section(&self, date: &str) -> String {
        let load_at_end = load_average();
        let busiest: f64 =
            [&self.load_at_start, &load_at_end].iter().filter_map(|load| load.split_whitespace().next()?.parse().ok()).fold(0.0, f64::max);
        let shared = if busiest > self.cores as f64 {
            format!(
                "\n- **Shared machine**: the 1-minute load average ({busiest:.1}) exceeded the {} cores: other work was running, \
                 so absolute numbers are pessimistic and noisy; compare the ratios, measured side by side in the same run.",
                self.cores
            )
        } else {
            String::new()
        };
        format!(
            "## Machine\n\n- Run: {date}, commit {}\n- CPU: {} ({} cores available), memory {} GiB\n- Redis: {}, loopback, \
             no persistence (started by `scripts/bench.sh`)\n- Load average (1, 5, 15 min): {} at start, {} at end{shared}\n",
            self.commit, self.cpu, self.cores, self.memory_gib, self.redis, self.load_at_start, load_at_end
        )
    }
}
