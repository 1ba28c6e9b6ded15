//! The Redis connection: standalone (`ConnectionManager`, reconnecting) or cluster
//! (`cluster_async`), plain or TLS, built once per container and shared by every request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};
use tokio::sync::OnceCell;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("redis: {0}")]
    Redis(#[from] RedisError),
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
    #[error("redis configuration: {0}")]
    Config(String),
    #[error("redis did not answer within {0:?}")]
    Timeout(Duration),
}

/// How to reach Redis; read from the environment (SPEC §7).
#[derive(Clone)]
pub struct RedisSettings {
    /// One URL for standalone; the seed nodes for cluster.
    pub urls: Vec<String>,
    pub cluster: bool,
    /// PEM bundle of the CA that signed the server certificate (`rediss://` only).
    pub ca_cert: Option<Vec<u8>>,
    /// Serve reads from replicas (cluster only). Off by default: reads go to the primary so a
    /// read right after an acknowledged write sees it.
    pub read_from_replicas: bool,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
}

// The URL may carry a password: never print it.
impl std::fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSettings")
            .field("nodes", &self.urls.len())
            .field("cluster", &self.cluster)
            .field("tls_ca", &self.ca_cert.is_some())
            .finish_non_exhaustive()
    }
}

impl RedisSettings {
    pub fn from_env() -> Result<Self, StoreError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let url = var("REDIS_URL").unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
        let cluster_var = var("REDIS_CLUSTER").unwrap_or_default();
        let (urls, cluster) = match cluster_var.as_str() {
            "" | "false" | "0" => (vec![url], false),
            "true" | "1" => (vec![url], true),
            list => (list.split(',').map(|s| s.trim().to_owned()).collect(), true),
        };
        let ca_cert = var("REDIS_CA_CERT")
            .map(|path| std::fs::read(&path).map_err(|e| StoreError::Config(format!("REDIS_CA_CERT {path}: {e}"))))
            .transpose()?;
        let millis = |name: &str, default: u64| -> Result<Duration, StoreError> {
            var(name)
                .map(|v| v.parse().map_err(|_| StoreError::Config(format!("{name} must be milliseconds"))))
                .transpose()
                .map(|ms| Duration::from_millis(ms.unwrap_or(default)))
        };
        Ok(Self {
            urls,
            cluster,
            ca_cert,
            read_from_replicas: var("REDIS_READ_FROM_REPLICAS").as_deref() == Some("true"),
            connect_timeout: millis("REDIS_CONNECT_TIMEOUT_MS", 2_000)?,
            response_timeout: millis("REDIS_RESPONSE_TIMEOUT_MS", 2_000)?,
        })
    }

    pub fn standalone(url: &str) -> Self {
        Self {
            urls: vec![url.to_owned()],
            cluster: false,
            ca_cert: None,
            read_from_replicas: false,
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(2),
        }
    }

    fn certificates(&self) -> Option<redis::TlsCertificates> {
        self.ca_cert.clone().map(|root_cert| redis::TlsCertificates { client_tls: None, root_cert: Some(root_cert) })
    }
}

/// rustls needs a process-wide crypto provider; redis-rs does not pick one, and a `rediss://`
/// connection panics without it. `ring` is installed explicitly so that another crate enabling
/// `aws-lc-rs` in the same binary cannot leave the choice ambiguous.
fn install_tls_provider() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        // Err means another provider was installed first, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

enum Backend {
    Standalone(ConnectionManager),
    Cluster { client: ClusterClient, connection: OnceCell<ClusterConnection> },
}

/// A handle to Redis; cheap to clone, one per container.
#[derive(Clone)]
pub struct Store {
    backend: Arc<Backend>,
    round_trips: Arc<AtomicU64>,
}

impl Store {
    /// Builds the client without waiting for Redis: a container starts even while the store is
    /// down, and answers 503 until it is back.
    pub fn connect(settings: &RedisSettings) -> Result<Self, StoreError> {
        install_tls_provider();
        let backend = if settings.cluster {
            let mut builder = ClusterClientBuilder::new(settings.urls.clone())
                .connection_timeout(settings.connect_timeout)
                .response_timeout(settings.response_timeout);
            if let Some(certs) = settings.certificates() {
                builder = builder.certs(certs);
            }
            if settings.read_from_replicas {
                builder = builder.read_routing_strategy(redis::cluster_read_routing::RandomReplicaStrategy);
            }
            Backend::Cluster { client: builder.build()?, connection: OnceCell::new() }
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
        Ok(Self { backend: Arc::new(backend), round_trips: Arc::default() })
    }

    pub fn from_env() -> Result<Self, StoreError> {
        Self::connect(&RedisSettings::from_env()?)
    }

    pub fn is_cluster(&self) -> bool {
        matches!(*self.backend, Backend::Cluster { .. })
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
        Ok(Connection { link, round_trips: self.round_trips.clone() })
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
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        match &mut self.link {
            Link::Standalone(c) => c.req_packed_command(cmd),
            Link::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(&'a mut self, pipeline: &'a Pipeline, offset: usize, count: usize) -> RedisFuture<'a, Vec<Value>> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        match &mut self.link {
            Link::Standalone(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.link {
            Link::Standalone(c) => c.get_db(),
            Link::Cluster(c) => c.get_db(),
        }
    }
}
