//! What the store looks like from here: reachable, mode, eviction policy, whether it takes writes.
//! Used by `GET /v1/health` and by every function's start-up check. Never reports addresses
//! or credentials.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::redis::error::StoreError;
use crate::redis::store::Store;

/// What `GET /v1/health` may tell anyone: enough for an operator to act on (is the store
/// reachable, will it take writes, and why not), nothing an attacker could use (no version,
/// address or credential).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoreHealth {
    pub mode: &'static str,
    pub maxmemory_policy: String,
    /// True unless the policy is `noeviction`: boards carry TTLs, so even `volatile-*`
    /// policies may evict them under memory pressure.
    pub eviction_risk: bool,
    /// False when writes are refused (503 `store_misconfigured`) because of that risk; true
    /// with `noeviction`, or when the operator allowed evicting policies.
    pub writes_accepted: bool,
}

/// One round trip (`INFO memory`), bounded by `timeout`.
pub async fn check(store: &Store, timeout: Duration) -> Result<StoreHealth, StoreError> {
    let probe = async {
        let policy = store.connection().await?.maxmemory_policy().await?;
        Ok(StoreHealth {
            mode: if store.is_cluster() { "cluster" } else { "standalone" },
            eviction_risk: policy != "noeviction",
            writes_accepted: store.writes_accepted(&policy),
            maxmemory_policy: policy,
        })
    };
    tokio::time::timeout(timeout, probe).await.map_err(|_| StoreError::Timeout(timeout))?
}

/// How long one probe's answer is served to every caller of the health route.
pub const HEALTH_CACHE: Duration = Duration::from_secs(5);

/// The last probe, shared by a container's requests: however often the health route is
/// called, the store sees at most one probe per `HEALTH_CACHE` from each container (callers
/// arriving during a probe wait for it instead of sending their own).
#[derive(Default)]
pub struct HealthCache {
    last: tokio::sync::Mutex<Option<(Instant, Option<StoreHealth>)>>,
}

impl HealthCache {
    /// The store's health (`None`: unreachable or too slow), probed at most once per
    /// `HEALTH_CACHE`.
    pub async fn get(&self, store: &Store, timeout: Duration) -> Option<StoreHealth> {
        let mut last = self.last.lock().await;
        if let Some((_, health)) = last.as_ref().filter(|(at, _)| at.elapsed() < HEALTH_CACHE) {
            return health.clone();
        }
        let health = check(store, timeout).await.inspect_err(|error| tracing::warn!(%error, "health probe failed")).ok();
        *last = Some((Instant::now(), health.clone()));
        health
    }
}

/// Start-up check: a loud warning when the store may evict boards. Never fails start-up: the
/// store may simply not be up yet.
pub async fn warn_if_evicting(store: &Store) {
    match check(store, Duration::from_secs(2)).await {
        Ok(health) if health.eviction_risk => tracing::warn!(
            maxmemory_policy = %health.maxmemory_policy,
            writes_accepted = health.writes_accepted,
            "the store's maxmemory-policy may evict leaderboards under memory pressure; set it to noeviction (writes are refused until then unless STANDINGS_ALLOW_EVICTING_POLICY=true)"
        ),
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "could not check the store's eviction policy at start-up"),
    }
}
