//! How to reach Redis, read from the environment: URLs (one, or a cluster's seed list), TLS,
//! credentials from a secret, and the replica acknowledgement writes wait for.

use std::time::Duration;

use super::error::StoreError;

/// How to reach Redis; read from the environment (docs/configuration.md).
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
    /// Replica acknowledgement every write waits for unless its board says otherwise.
    pub replica_wait: ReplicaWait,
    /// Write even when the store's `maxmemory-policy` may evict keys
    /// (`STANDINGS_ALLOW_EVICTING_POLICY=true`): an operator's explicit choice to risk it.
    pub allow_evicting_policy: bool,
}

/// `WAIT <replicas> <timeout>` after a write script, in the same round trip: the write is
/// answered only once that many replicas have it, so a failover cannot lose it. `replicas: 0`
/// (the default) answers as soon as the primary has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaWait {
    pub replicas: u32,
    pub timeout: Duration,
}

const DEFAULT_WAIT_TIMEOUT_MS: u64 = 500;

impl ReplicaWait {
    pub const NONE: Self = Self { replicas: 0, timeout: Duration::from_millis(DEFAULT_WAIT_TIMEOUT_MS) };

    /// The same timeout, another replica count (a board's own `wait_replicas`).
    pub fn with_replicas(self, replicas: Option<u32>) -> Self {
        Self { replicas: replicas.unwrap_or(self.replicas), ..self }
    }
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
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// `from_vars`, with `REDIS_URL` taken from the secret `REDIS_URL_SECRET` names, if any.
    pub async fn from_env_with_secret(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, StoreError> {
        let secret_url = crate::runtime::secrets::redis_url(&lookup).await.map_err(|e| StoreError::Config(e.to_string()))?;
        Self::from_vars(|name| match (name, &secret_url) {
            ("REDIS_URL", Some(url)) => Some(url.clone()),
            _ => lookup(name),
        })
    }

    /// The settings the environment variables `lookup` answers for would give.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, StoreError> {
        let var = |name: &str| lookup(name).filter(|v| !v.is_empty());
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
        let response_timeout = millis("REDIS_RESPONSE_TIMEOUT_MS", 2_000)?;
        let replica_wait = ReplicaWait {
            replicas: var("REDIS_WAIT_REPLICAS")
                .map(|v| v.parse().map_err(|_| StoreError::Config("REDIS_WAIT_REPLICAS must be a replica count".into())))
                .transpose()?
                .unwrap_or(0),
            timeout: millis("REDIS_WAIT_TIMEOUT_MS", DEFAULT_WAIT_TIMEOUT_MS)?,
        };
        // WAIT 0 would block forever; past the response timeout the client gives up first.
        if replica_wait.timeout.is_zero() || replica_wait.timeout >= response_timeout {
            return Err(StoreError::Config("REDIS_WAIT_TIMEOUT_MS must be above 0 and below REDIS_RESPONSE_TIMEOUT_MS".into()));
        }
        Ok(Self {
            urls,
            cluster,
            ca_cert,
            read_from_replicas: var("REDIS_READ_FROM_REPLICAS").as_deref() == Some("true"),
            connect_timeout: millis("REDIS_CONNECT_TIMEOUT_MS", 2_000)?,
            response_timeout,
            replica_wait,
            allow_evicting_policy: var("STANDINGS_ALLOW_EVICTING_POLICY").as_deref() == Some("true"),
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
            replica_wait: ReplicaWait::NONE,
            allow_evicting_policy: false,
        }
    }

    pub(super) fn certificates(&self) -> Option<redis::TlsCertificates> {
        self.ca_cert.clone().map(|root_cert| redis::TlsCertificates { client_tls: None, root_cert: Some(root_cert) })
    }

    pub(super) fn uses_tls(&self) -> bool {
        self.urls.iter().any(|url| url.starts_with("rediss://"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<RedisSettings, StoreError> {
        RedisSettings::from_vars(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned()))
    }

    #[test]
    fn defaults_and_cluster_seed_lists() {
        let defaults = settings(&[]).unwrap();
        assert_eq!(defaults.urls, ["redis://127.0.0.1:6379"]);
        assert!(!defaults.cluster && !defaults.uses_tls());
        assert_eq!(defaults.replica_wait, ReplicaWait::NONE);
        let seeds = settings(&[("REDIS_CLUSTER", "rediss://a:1, rediss://b:2")]).unwrap();
        assert_eq!(seeds.urls, ["rediss://a:1", "rediss://b:2"]);
        assert!(seeds.cluster && seeds.uses_tls());
        assert!(settings(&[("REDIS_URL", "redis://x:1"), ("REDIS_CLUSTER", "true")]).unwrap().cluster);
    }

    #[test]
    fn replica_waits_are_read_and_bounded() {
        let wait = settings(&[("REDIS_WAIT_REPLICAS", "1"), ("REDIS_WAIT_TIMEOUT_MS", "250")]).unwrap().replica_wait;
        assert_eq!(wait, ReplicaWait { replicas: 1, timeout: Duration::from_millis(250) });
        assert_eq!(wait.with_replicas(Some(0)).replicas, 0, "a board can opt out");
        assert_eq!(wait.with_replicas(None), wait);
        for bad in [("REDIS_WAIT_TIMEOUT_MS", "0"), ("REDIS_WAIT_TIMEOUT_MS", "2000"), ("REDIS_WAIT_REPLICAS", "one")] {
            assert!(matches!(settings(&[bad]), Err(StoreError::Config(_))), "{bad:?}");
        }
    }

    #[test]
    fn an_unreadable_ca_file_names_the_variable() {
        let Err(StoreError::Config(message)) = settings(&[("REDIS_CA_CERT", "/nonexistent/ca.pem")]) else { panic!("refused") };
        assert!(message.starts_with("REDIS_CA_CERT /nonexistent/ca.pem"), "{message}");
    }
}
