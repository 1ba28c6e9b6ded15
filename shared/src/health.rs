//! What the store looks like from here: reachable, version, mode, eviction policy, scripts.
//! Used by `GET /v1/health` and by every function's start-up check. Never reports addresses
//! or credentials.

use std::time::Duration;

use serde::Serialize;

use crate::scripts;
use crate::store::{Store, StoreError};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoreHealth {
    pub version: String,
    pub mode: &'static str,
    pub maxmemory_policy: String,
    /// True unless the policy is `noeviction`: boards carry TTLs, so even `volatile-*`
    /// policies may evict them under memory pressure.
    pub eviction_risk: bool,
    /// False when writes are refused (503 `store_misconfigured`) because of that risk; true
    /// with `noeviction`, or when the operator allowed evicting policies.
    pub writes_accepted: bool,
    /// How many of the Lua scripts are cached on the node that answered. Scripts load on
    /// first use (and again after a flush or failover), so fewer than all is not a fault.
    pub scripts_loaded: usize,
    pub scripts_total: usize,
}

/// The value of `field` in an INFO reply.
pub(crate) fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| line.strip_prefix(field)?.strip_prefix(':')).map(str::trim)
}

/// One pipelined round trip, bounded by `timeout`.
pub async fn check(store: &Store, timeout: Duration) -> Result<StoreHealth, StoreError> {
    let probe = async {
        let mut conn = store.connection().await?;
        let hashes = scripts::hashes();
        let mut pipe = redis::pipe();
        pipe.cmd("INFO").arg("server").cmd("INFO").arg("memory").cmd("SCRIPT").arg("EXISTS").arg(&hashes);
        let (server, memory, loaded): (String, String, Vec<bool>) = pipe.query_async(&mut conn).await?;
        let policy = info_field(&memory, "maxmemory_policy").unwrap_or("unknown").to_owned();
        Ok(StoreHealth {
            version: info_field(&server, "redis_version").unwrap_or("unknown").to_owned(),
            mode: if store.is_cluster() { "cluster" } else { "standalone" },
            eviction_risk: policy != "noeviction",
            writes_accepted: policy == "noeviction" || store.allows_evicting_policy(),
            maxmemory_policy: policy,
            scripts_loaded: loaded.iter().filter(|l| **l).count(),
            scripts_total: hashes.len(),
        })
    };
    tokio::time::timeout(timeout, probe).await.map_err(|_| StoreError::Timeout(timeout))?
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_out_of_info() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n";
        assert_eq!(info_field(info, "redis_version"), Some("7.0.15"));
        assert_eq!(info_field(info, "redis_mode"), Some("standalone"));
        assert_eq!(info_field(info, "redis"), None);
    }
}
