//! The Redis connection: standalone (`ConnectionManager`, reconnecting) or cluster
//! (`cluster_async`), plain or TLS, built once per container and shared by every request.
//!
//! A request that finds its connection dead (Redis restarted, a failover, an idle connection
//! closed) is sent once more on a new one before it fails: the manager only reconnects after
//! the request that saw the old connection die has failed, which would otherwise cost every
//! container one 503 per restart. Sending again is safe for every request: reads repeat, and
//! every write script is idempotent by its id (a resent write that did run is a duplicate).
//! The cluster client re-sends on its own (`cluster_async`'s retries).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, FromRedisValue, Pipeline, RedisError, RedisFuture, Script, ServerErrorKind, ToRedisArgs, Value};
use tokio::sync::OnceCell;

use super::error::StoreError;
use super::keys::Layout;
use super::settings::{RedisSettings, ReplicaWait};

/// rustls needs a process-wide crypto provider; redis-rs does not pick one. `ring` is
/// installed explicitly (not left to crate features) so that another crate enabling
/// `aws-lc-rs` in the same binary cannot make TLS connections panic.
fn install_tls_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // Err means another provider was installed first, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

// One per container, so the size difference between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
enum Backend {
    Standalone(ConnectionManager),
    Cluster { client: ClusterClient, connection: OnceCell<ClusterConnection> },
}

/// A handle to Redis; cheap to clone, one per container.
#[derive(Clone)]
pub struct Store {
    backend: Arc<Backend>,
    round_trips: Arc<AtomicU64>,
    replica_wait: ReplicaWait,
    policy: Arc<PolicyGate>,
    layouts: Arc<super::layout::Layouts>,
    nodes: Arc<super::node_map::NodeMap>,
}

/// How long a probe of the store's eviction policy is trusted before writes probe again.
pub const POLICY_PROBE_SECS: u64 = 30;

/// The last probe of the store's `maxmemory-policy`: writes are refused unless it is
/// `noeviction`, or the operator allowed evicting policies.
#[derive(Default)]
struct PolicyGate {
    allow_evicting: bool,
    last: std::sync::Mutex<Option<(std::time::Instant, String)>>,
}

impl Store {
    /// Builds the client without waiting for Redis: a container starts even while the store is
    /// down, and answers 503 until it is back.
    pub fn connect(settings: &RedisSettings) -> Result<Self, StoreError> {
        if settings.uses_tls() {
            install_tls_provider();
        }
        let cluster = || {
            let mut builder = ClusterClientBuilder::new(settings.urls.clone())
                .connection_timeout(settings.connect_timeout)
                .response_timeout(settings.response_timeout);
            if let Some(certs) = settings.certificates() {
                builder = builder.certs(certs);
            }
            if settings.read_from_replicas {
                builder = builder.read_routing_strategy(redis::cluster_read_routing::RandomReplicaStrategy);
            }
            builder
        };
        // Pipelines a node (`nodes`) go on a client that never retries: one sent by a stale map
        // fails at once, and its parts go again, each on its own, on the client that does.
        let unretried = if settings.cluster { Some(cluster().retries(0).build()?) } else { None };
        let backend = if settings.cluster {
            Backend::Cluster { client: cluster().build()?, connection: OnceCell::new() }
        } else {
            let url = settings.urls.first().ok_or_else(|| StoreError::Config("REDIS_URL is empty".into()))?;
            let client = match settings.certificates() {
                Some(certs) => redis::Client::build_with_tls(url.as_str(), certs)?,
                None => redis::Client::open(url.as_str())?,
            };
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(settings.connect_timeout))
                .set_response_timeout(Some(settings.response_timeout))
                .set_number_of_retries(2)
                .set_max_delay(Duration::from_millis(500));
            Backend::Standalone(ConnectionManager::new_lazy_with_config(client, config)?)
        };
        let policy = Arc::new(PolicyGate { allow_evicting: settings.allow_evicting_policy, ..PolicyGate::default() });
        Ok(Self {
            backend: Arc::new(backend),
            round_trips: Arc::default(),
            replica_wait: settings.replica_wait,
            policy,
            layouts: Arc::default(),
            nodes: Arc::new(super::node_map::NodeMap::new(settings.read_from_replicas, unretried)),
        })
    }

    /// From the environment, `REDIS_URL` read from Secrets Manager when `REDIS_URL_SECRET`
    /// names a secret (see `secrets`).
    pub async fn from_env() -> Result<Self, StoreError> {
        Self::connect(&RedisSettings::from_env_with_secret(|name| std::env::var(name).ok()).await?)
    }

    pub fn is_cluster(&self) -> bool {
        matches!(*self.backend, Backend::Cluster { .. })
    }

    /// The replica acknowledgement writes wait for by default (`REDIS_WAIT_REPLICAS`).
    pub fn replica_wait(&self) -> ReplicaWait {
        self.replica_wait
    }

    /// A connection handle; all handles share one multiplexed connection (per node), so
    /// concurrent calls are pipelined.
    pub async fn connection(&self) -> Result<Connection, StoreError> {
        let link = match &*self.backend {
            Backend::Standalone(manager) => Link::Standalone(manager.clone()),
            Backend::Cluster { client, connection } => {
                Link::Cluster(connection.get_or_try_init(|| client.get_async_connection()).await?.clone())
            }
        };
        Ok(Connection { link, round_trips: self.round_trips.clone(), layouts: self.layouts.clone(), nodes: self.nodes.clone() })
    }

    /// A connection for a write: refused (`EvictingPolicy`) when the store may evict keys. The
    /// policy is probed with one `INFO memory` at most every `POLICY_PROBE_SECS` per
    /// container, so the write path stays one round trip per board in between.
    pub async fn write_connection(&self) -> Result<Connection, StoreError> {
        let mut conn = self.connection().await?;
        // Allowed whatever the policy: no probe needed.
        if self.policy.allow_evicting {
            return Ok(conn);
        }
        let fresh =
            self.policy.last.lock().ok().and_then(|last| {
                last.as_ref().filter(|(at, _)| at.elapsed() < Duration::from_secs(POLICY_PROBE_SECS)).map(|(_, p)| p.clone())
            });
        let policy = match fresh {
            Some(policy) => policy,
            None => {
                let policy = conn.maxmemory_policy().await?;
                if let Ok(mut last) = self.policy.last.lock() {
                    *last = Some((std::time::Instant::now(), policy.clone()));
                }
                policy
            }
        };
        if self.writes_accepted(&policy) { Ok(conn) } else { Err(StoreError::EvictingPolicy(policy)) }
    }

    /// The layout `board`'s data is in, as recorded in Redis (`layout`) now: for the jobs
    /// (archive, drain, restore, move), which act on it seldom and must not act on a probe up to
    /// `LAYOUT_PROBE_SECS` old (a restore or a move in another container may have recorded
    /// another layout since, and the one probed then holds unborn guards).
    pub async fn read_layout(&self, keys: &super::keys::Keys, board: &crate::domain::config::Board) -> Result<Layout, StoreError> {
        self.forget_layout(keys, &board.name);
        let mut conn = self.connection().await?;
        let (shards, generation) = self.layouts.recorded(&mut conn, keys, board, chrono::Utc::now(), false).await?;
        Ok(keys.layout_at(&board.name, shards, generation))
    }

    /// `write_layout` for a write that lays out scores as the board holds them, or writes none
    /// (a ban), whatever `max_score` the configuration says: the layout holding the scale its
    /// scores are in (`Layout::held_scale`, for `scores::held_at`). A board with no record yet
    /// gets its configured layout recorded, as its first write would, so a move finds what the
    /// write left there; a deploy on another `max_score` writes on until a move re-encodes the
    /// board (docs/boards.md#changing-max_score).
    pub async fn written_layout(&self, keys: &super::keys::Keys, board: &crate::domain::config::Board) -> Result<Layout, StoreError> {
        let mut conn = self.connection().await?;
        let (shards, generation, held) = self.layouts.holding(&mut conn, keys, board, chrono::Utc::now(), true).await?;
        Ok(keys.layout_at(&board.name, shards, generation).holding(held))
    }

    /// The layout a write to `board` goes to: where its data is, as reads read it, whatever
    /// shards the configuration says. A deploy with another count writes where the data is
    /// until a move's switch records the new layout (docs/scaling.md#changing-shards); only the
    /// move's last step refuses writes (its `moving` fence, 503 `board_resharding`).
    pub async fn write_layout(&self, keys: &super::keys::Keys, board: &crate::domain::config::Board) -> Result<Layout, StoreError> {
        let mut conn = self.connection().await?;
        let (recorded, generation) = self.layouts.recorded(&mut conn, keys, board, chrono::Utc::now(), true).await?;
        Ok(keys.layout_at(&board.name, recorded, generation))
    }

    /// The layout `board`'s data is in and the `max_score` its scores are held at
    /// (`Layout::held_scale`), whatever the configuration says: what a read of its standings
    /// reads, so reads answer from the scores as they are while a move re-encodes them
    /// (docs/boards.md#changing-max_score); and a read of what holds no composite (its guard's
    /// bans, its audit log).
    pub async fn held_layout(&self, keys: &super::keys::Keys, board: &crate::domain::config::Board) -> Result<Layout, StoreError> {
        let mut conn = self.connection().await?;
        let (shards, generation, held) = self.layouts.holding(&mut conn, keys, board, chrono::Utc::now(), false).await?;
        Ok(keys.layout_at(&board.name, shards, generation).holding(held))
    }

    /// `read` on `board`'s recorded layout (`held_layout`); again on the layout recorded now
    /// when it found the guard gone because a move's switch freed the layout this container had
    /// probed (docs/scaling.md#changing-shards), rather than answer 503 until its probe expires.
    pub async fn on_read_layout<T, F, Fut>(
        &self,
        keys: &super::keys::Keys,
        board: &crate::domain::config::Board,
        read: F,
    ) -> Result<T, StoreError>
    where
        F: Fn(Layout) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        let layout = self.held_layout(keys, board).await?;
        let read_in = (layout.shards(), layout.generation());
        match read(layout).await {
            Err(error) if error.is_restoring() => {
                self.forget_layout(keys, &board.name);
                let now = self.held_layout(keys, board).await?;
                if (now.shards(), now.generation()) == read_in { Err(error) } else { read(now).await }
            }
            other => other,
        }
    }

    /// Forgets the probed layout of `board` (a reshard recorded a new one).
    pub fn forget_layout(&self, keys: &super::keys::Keys, board: &str) {
        self.layouts.forget(&keys.board_layout(board));
    }

    /// Whether writes go ahead under `maxmemory-policy` `policy`: with `noeviction`, or with
    /// any policy when the operator allowed evicting ones.
    pub fn writes_accepted(&self, policy: &str) -> bool {
        policy == "noeviction" || self.policy.allow_evicting
    }

    /// Which primary holds each slot, as this container last read it (`nodes`).
    pub fn node_map(&self) -> &super::node_map::NodeMap {
        &self.nodes
    }

    /// Requests sent to Redis so far by this store (a pipeline or a script call is one; a
    /// cluster pipeline spanning several nodes is also counted once).
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }
}

#[derive(Clone)]
enum Link {
    Standalone(ConnectionManager),
    Cluster(ClusterConnection),
}

#[derive(Clone)]
pub struct Connection {
    link: Link,
    round_trips: Arc<AtomicU64>,
    layouts: Arc<super::layout::Layouts>,
    nodes: Arc<super::node_map::NodeMap>,
}

/// One call of a Lua script: the script, its KEYS and its ARGV, run with
/// [`Connection::run_script`].
pub struct ScriptCall<'a> {
    script: &'a Script,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl<'a> ScriptCall<'a> {
    pub fn new(script: &'a Script) -> Self {
        Self { script, keys: Vec::new(), args: Vec::new() }
    }

    pub fn key(&mut self, key: impl ToRedisArgs) -> &mut Self {
        self.keys.extend(key.to_redis_args());
        self
    }

    pub fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        self.args.extend(arg.to_redis_args());
        self
    }

    /// The script called (to load it where a node answered NOSCRIPT).
    pub(super) fn script(&self) -> &Script {
        self.script
    }

    pub(super) fn evalsha(&self) -> Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.script.get_hash()).arg(self.keys.len()).arg(&self.keys).arg(&self.args);
        cmd
    }
}

impl Connection {
    /// The cluster connection, to address one node (e.g. SCAN on every primary); `None`
    /// standalone.
    pub fn cluster(&self) -> Option<&ClusterConnection> {
        match &self.link {
            Link::Cluster(cluster) => Some(cluster),
            Link::Standalone(_) => None,
        }
    }

    /// The store's `maxmemory-policy`, from the server or every primary of a cluster at once
    /// (`probe::policy_of`).
    pub async fn maxmemory_policy(&mut self) -> Result<String, StoreError> {
        super::probe::policy_of(self.on_every_primary(&super::probe::info_memory()).await?)
    }

    /// `cmd` on the standalone server, or on every primary of a cluster at once: each node's
    /// answer (a text reply) or error, by address. One round trip per node.
    pub(crate) async fn on_every_primary(&mut self, cmd: &Cmd) -> Result<Vec<(String, Result<String, RedisError>)>, StoreError> {
        use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
        let cluster = match &self.link {
            Link::Standalone(_) => return Ok(vec![("standalone".to_owned(), cmd.query_async(self).await)]),
            Link::Cluster(cluster) => cluster.clone(),
        };
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
        let Value::Map(answers) = cluster.clone().route_command(cmd.clone(), routing).await? else {
            return Err(StoreError::Protocol("every primary's answers are not a map".into()));
        };
        Ok(answers
            .into_iter()
            .map(|(node, answer)| {
                let node = String::from_redis_value(node).unwrap_or_default();
                let answer = match answer {
                    Value::ServerError(error) => Err(RedisError::from(error)),
                    other => String::from_redis_value(other).map_err(RedisError::from),
                };
                (node, answer)
            })
            .collect())
    }

    /// Which primary holds each slot, as this container last read it (`nodes`).
    pub(super) fn nodes(&self) -> &super::node_map::NodeMap {
        &self.nodes
    }

    /// Counts a request sent past `ConnectionLike` (a node addressed by hand).
    pub(super) fn count_round_trip(&self) {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
    }

    /// Runs a script with EVALSHA; NOSCRIPT (after `SCRIPT FLUSH`, or on a node that never saw
    /// it) is answered by loading the script and running it again. With `wait.replicas > 0`
    /// the script is followed by `WAIT` in the same pipeline, on the same connection (so it
    /// covers this write), and fewer acknowledgements than asked is `NotReplicated`: the
    /// write happened on the primary, and a retry with the same event id gets its answer.
    pub async fn run_script<T: FromRedisValue>(&mut self, call: &ScriptCall<'_>, wait: ReplicaWait) -> Result<T, StoreError> {
        let (reply, acknowledged) = match self.send_script(call, wait).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                call.script.load_async(self).await?;
                self.send_script(call, wait).await?
            }
            result => result?,
        };
        if acknowledged < wait.replicas {
            return Err(StoreError::NotReplicated { wanted: wait.replicas, acknowledged });
        }
        Ok(reply)
    }

    async fn send_script<T: FromRedisValue>(&mut self, call: &ScriptCall<'_>, wait: ReplicaWait) -> Result<(T, u32), RedisError> {
        if wait.replicas == 0 {
            return Ok((call.evalsha().query_async(self).await?, 0));
        }
        let timeout_ms = u64::try_from(wait.timeout.as_millis()).unwrap_or(u64::MAX);
        redis::pipe().add_command(call.evalsha()).cmd("WAIT").arg(wait.replicas).arg(timeout_ms).query_async(self).await
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let layouts = self.layouts.clone();
        let link = &mut self.link;
        Box::pin(async move {
            let answer = match link {
                Link::Standalone(c) => match c.req_packed_command(cmd).await {
                    Err(error) if error.is_connection_dropped() => c.req_packed_command(cmd).await,
                    answer => answer,
                },
                Link::Cluster(c) => c.req_packed_command(cmd).await,
            };
            super::refusals::forget_if_restoring(&layouts, answer)
        })
    }

    fn req_packed_commands<'a>(&'a mut self, pipeline: &'a Pipeline, offset: usize, count: usize) -> RedisFuture<'a, Vec<Value>> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let layouts = self.layouts.clone();
        let link = &mut self.link;
        Box::pin(async move {
            let answer = match link {
                Link::Standalone(c) => match c.req_packed_commands(pipeline, offset, count).await {
                    Err(error) if error.is_connection_dropped() => c.req_packed_commands(pipeline, offset, count).await,
                    answer => answer,
                },
                Link::Cluster(c) => c.req_packed_commands(pipeline, offset, count).await,
            };
            super::refusals::forget_if_restoring(&layouts, answer)
        })
    }

    fn get_db(&self) -> i64 {
        match &self.link {
            Link::Standalone(c) => c.get_db(),
            Link::Cluster(c) => c.get_db(),
        }
    }
}
