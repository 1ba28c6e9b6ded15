//! What the store says about itself, read in one round trip: its eviction policy, which decides
//! whether writes are safe (see `Store::write_connection`) and what `GET /v1/health` reports.

use redis::RedisError;

use super::error::StoreError;

/// The value of `field` in an INFO reply.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| line.strip_prefix(field)?.strip_prefix(':')).map(str::trim)
}

/// The command each primary answers (`Connection::maxmemory_policy`).
pub(crate) fn info_memory() -> redis::Cmd {
    let mut info = redis::cmd("INFO");
    info.arg("memory");
    info
}

/// The store's `maxmemory-policy` from every primary's `INFO memory` (each board lives on one
/// primary, so one that may evict puts its boards at risk): the first policy other than
/// `noeviction`, or `noeviction`. A primary that does not answer is left out (its boards'
/// writes fail on their own); none answering is an error.
pub(crate) fn policy_of(answers: Vec<(String, Result<String, RedisError>)>) -> Result<String, StoreError> {
    let mut policies = Vec::new();
    let mut last_error = None;
    for (node, answer) in answers {
        match answer {
            Ok(memory) => policies.push(info_field(&memory, "maxmemory_policy").unwrap_or("unknown").to_owned()),
            Err(error) => {
                tracing::warn!(node = %node, error = %error, "a primary did not answer the eviction probe");
                last_error = Some(error);
            }
        }
    }
    match (worst_policy(policies), last_error) {
        (Some(policy), _) => Ok(policy),
        (None, Some(error)) => Err(error.into()),
        (None, None) => Err(StoreError::Protocol("INFO memory: no primary answered".into())),
    }
}

/// What a set of primaries' policies mean for the store: any that may evict, else `noeviction`.
fn worst_policy(policies: Vec<String>) -> Option<String> {
    let first = policies.first().cloned()?;
    Some(policies.into_iter().find(|p| p != "noeviction").unwrap_or(first))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_evicting_primary_is_the_stores_policy() {
        let of = |ps: &[&str]| worst_policy(ps.iter().map(|p| p.to_string()).collect());
        assert_eq!(of(&["noeviction", "noeviction"]).as_deref(), Some("noeviction"));
        assert_eq!(of(&["noeviction", "allkeys-lru", "noeviction"]).as_deref(), Some("allkeys-lru"));
        assert_eq!(of(&["volatile-lru"]).as_deref(), Some("volatile-lru"));
        assert_eq!(of(&[]), None);
    }

    #[test]
    fn reads_fields_out_of_info() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n";
        assert_eq!(info_field(info, "redis_version"), Some("7.0.15"));
        assert_eq!(info_field(info, "redis_mode"), Some("standalone"));
        assert_eq!(info_field(info, "redis"), None);
    }
}
