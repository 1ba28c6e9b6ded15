//! redis-server processes a test owns, for fault tests that must break a server without
//! disturbing the suite's: each on a free loopback port in a directory of its own, killed
//! with SIGKILL and restarted (same port, same directory) at will, killed when dropped.
//! Directories go under `STANDINGS_TEST_TMP` when set (scripts/test.sh points it at its run
//! directory and kills every `redis.pid` there on exit, even if a test process dies first).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::future::join_all;
use redis::aio::MultiplexedConnection;
use standings::redis::settings::RedisSettings;

use crate::cluster::parse_cluster_nodes;

/// A loopback port nothing listens on right now, below the kernel's ephemeral range so that
/// no outgoing connection takes it before the server binds it.
pub fn free_port() -> u16 {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let ephemeral_start: u16 = range.split_whitespace().next().and_then(|p| p.parse().ok()).unwrap_or(32768);
    loop {
        let random = std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), crate::unique_prefix());
        let port = 10_000 + (random % u64::from(ephemeral_start - 10_000)) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Polls `check` every 20 ms until it yields a value; panics with `what` after `timeout`.
pub async fn eventually<T, F: std::future::Future<Output = Option<T>>>(what: &str, timeout: Duration, mut check: impl FnMut() -> F) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub struct RedisServer {
    pub port: u16,
    /// The cluster bus port of a cluster node.
    bus_port: Option<u16>,
    dir: PathBuf,
    args: Vec<String>,
    /// Environment variables the server process gets (e.g. a clock shim's).
    env: Vec<(String, String)>,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server without persistence (unless `args` ask for it) and waits until it
    /// answers PING.
    pub async fn start(args: &[&str]) -> Self {
        Self::start_with(args, &[], false).await
    }

    /// A server whose process gets `env` too (e.g. `LD_PRELOAD` of a clock shim).
    pub async fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_with(args, env, false).await
    }

    /// A cluster node (`args` enable cluster mode): it gets a bus port of its own too.
    pub async fn start_cluster_node(args: &[&str]) -> Self {
        Self::start_with(args, &[], true).await
    }

    async fn start_with(args: &[&str], env: &[(&str, &str)], cluster_bus: bool) -> Self {
        let base = std::env::var_os("STANDINGS_TEST_TMP").map_or_else(std::env::temp_dir, PathBuf::from);
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        // Another process may bind a port between its choice and the server's start: try anew.
        for attempt in 1.. {
            let dir = base.join(format!("redis-{}", crate::unique_prefix()));
            std::fs::create_dir_all(&dir).unwrap();
            let bus_port = cluster_bus.then(free_port);
            let mut server = Self { port: free_port(), bus_port, dir, args: args.clone(), env: env.clone(), child: None };
            server.spawn();
            match server.wait_ready().await {
                Ok(()) => return server,
                Err(log) if attempt < 3 && log.contains("Address already in use") => continue,
                Err(log) => panic!("redis-server exited:\n{log}"),
            }
        }
        unreachable!()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        let path = |name: &str| self.dir.join(name).to_str().unwrap().to_owned();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--dir", &path(""), "--logfile", &path("redis.log"), "--pidfile", &path("redis.pid")])
            .args(self.bus_port.iter().flat_map(|port| ["--cluster-port".to_owned(), port.to_string()]))
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (scripts/test.sh installs it)");
        self.child = Some(child);
    }

    /// SIGKILL: no shutdown, no last fsync; what survives is what the server had persisted.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("the server process can be killed");
            child.wait().unwrap();
        }
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Same port, same directory, same arguments: the same AOF, the same cluster identity.
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn();
        if let Err(log) = self.wait_ready().await {
            panic!("redis-server did not come back:\n{log}");
        }
    }

    /// Copies the append-only files as they stand, with no write in flight: the older state
    /// `roll_back` starts the server on (as a snapshot restored into a new cache would be).
    pub fn snapshot(&self) {
        let (from, to) = (self.dir.join("appendonlydir"), self.dir.join("snapshot"));
        let _ = std::fs::remove_dir_all(&to);
        std::fs::create_dir_all(&to).unwrap();
        for file in std::fs::read_dir(&from).expect("an append-only server (--appendonly yes)") {
            let file = file.unwrap();
            std::fs::copy(file.path(), to.join(file.file_name())).unwrap();
        }
    }

    /// SIGKILL, then started again on the files `snapshot` copied: a Redis rolled back.
    pub async fn roll_back(&mut self) {
        self.kill();
        let aof = self.dir.join("appendonlydir");
        std::fs::remove_dir_all(&aof).unwrap();
        std::fs::rename(self.dir.join("snapshot"), &aof).expect("a snapshot taken before");
        self.spawn();
        if let Err(log) = self.wait_ready().await {
            panic!("redis-server did not come back:\n{log}");
        }
    }

    pub async fn connection(&self) -> redis::RedisResult<MultiplexedConnection> {
        redis::Client::open(self.url())?.get_multiplexed_async_connection().await
    }

    /// One command on a fresh connection; an error when the server is down.
    pub async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        cmd.query_async(&mut self.connection().await?).await
    }

    /// Until PING answers PONG (not LOADING while an AOF is replayed); the log if the server
    /// exits instead.
    async fn wait_ready(&mut self) -> Result<(), String> {
        let log = self.dir.join("redis.log");
        let what = format!("redis-server on port {} (log: {})", self.port, log.display());
        let url = self.url();
        let child = self.child.as_mut().unwrap();
        eventually(&what, Duration::from_secs(20), || {
            let exited =
                child.try_wait().unwrap().map(|status| format!("({status}) {}", std::fs::read_to_string(&log).unwrap_or_default()));
            let url = url.clone();
            async move {
                if exited.is_some() {
                    return exited.map(Err);
                }
                let mut conn = redis::Client::open(url).ok()?.get_multiplexed_async_connection().await.ok()?;
                redis::cmd("PING").query_async::<String>(&mut conn).await.ok().filter(|pong| pong == "PONG").map(|_| Ok(()))
            }
        })
        .await
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// A Redis Cluster a test owns: `primaries` primaries with one replica each (or `replicas`,
/// `start_with`), made with `redis-cli --cluster create`, with a short node timeout
/// (`NODE_TIMEOUT_MS`).
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
    replicas: usize,
}

/// How long a primary may be unreachable before the cluster fails it over: short, so a
/// failover takes seconds, but not so short that a busy 2-core machine fails over by itself.
pub const NODE_TIMEOUT_MS: u64 = 2000;

impl RedisCluster {
    /// Returns once every node sees the cluster ok with every slot covered, and every replica
    /// is in sync with its primary.
    pub async fn start(primaries: usize) -> Self {
        Self::start_with(primaries, 1, &[]).await
    }

    /// `replicas` per primary (0: a node's restart is never failed over), every node started
    /// with `args` too (persistence, say).
    pub async fn start_with(primaries: usize, replicas: usize, args: &[&str]) -> Self {
        let timeout = NODE_TIMEOUT_MS.to_string();
        let mut all = vec!["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", &timeout];
        all.extend_from_slice(args);
        let nodes = join_all((0..primaries * (1 + replicas)).map(|_| RedisServer::start_cluster_node(&all))).await;
        let addresses: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        let created = tokio::process::Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .await
            .expect("redis-cli is installed");
        assert!(created.status.success(), "redis-cli --cluster create: {}", String::from_utf8_lossy(&created.stdout));
        let cluster = Self { nodes, replicas };
        cluster.wait_until_healthy().await;
        cluster
    }

    /// Settings a function would get from `REDIS_URL` + `REDIS_CLUSTER=<every node>`.
    pub fn settings(&self) -> RedisSettings {
        let urls = self.nodes.iter().map(RedisServer::url).collect::<Vec<_>>().join(",");
        RedisSettings::from_vars(|name| match name {
            "REDIS_CLUSTER" => Some(urls.clone()),
            _ => None,
        })
        .unwrap()
    }

    pub fn node(&mut self, port: u16) -> &mut RedisServer {
        self.nodes.iter_mut().find(|n| n.port == port).expect("a node of this cluster")
    }

    /// The live primary serving `slot`, once every running node agrees on it and the cluster
    /// is ok everywhere.
    pub async fn primary_of(&self, slot: u16) -> Option<u16> {
        let mut owner = None;
        for node in self.nodes.iter().filter(|n| n.is_running()) {
            let info: String = node.query(redis::cmd("CLUSTER").arg("INFO")).await.ok()?;
            if !info.contains("cluster_state:ok") {
                return None;
            }
            let text: String = node.query(redis::cmd("CLUSTER").arg("NODES")).await.ok()?;
            let seen = parse_cluster_nodes(&text).into_iter().find(|n| n.is_primary() && !n.is_failing() && n.serves(slot))?.port;
            if owner.is_some_and(|port| port != seen) {
                return None;
            }
            owner = Some(seen);
        }
        owner
    }

    /// Every running node sees the cluster ok with all 16384 slots served, and half of them
    /// are replicas whose link to their primary is up.
    pub async fn wait_until_healthy(&self) {
        eventually("the cluster to be ok with every replica in sync", Duration::from_secs(30), || async {
            let running: Vec<&RedisServer> = self.nodes.iter().filter(|n| n.is_running()).collect();
            let mut replicas_in_sync = 0;
            for node in &running {
                let info: String = node.query(redis::cmd("CLUSTER").arg("INFO")).await.ok()?;
                if !(info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")) {
                    return None;
                }
                let replication: String = node.query(redis::cmd("INFO").arg("replication")).await.ok()?;
                replicas_in_sync += usize::from(replication.contains("master_link_status:up"));
            }
            (replicas_in_sync == running.len() * self.replicas / (1 + self.replicas)).then_some(())
        })
        .await;
    }
}
