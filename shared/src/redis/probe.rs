//! What the store says about itself, read in one round trip: its eviction policy, which decides
//! whether writes are safe (see `Store::write_connection`) and what `GET /v1/health` reports.

use redis::aio::ConnectionLike;

use super::error::StoreError;

/// The value of `field` in an INFO reply.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| line.strip_prefix(field)?.strip_prefix(':')).map(str::trim)
}

/// The store's `maxmemory-policy`, in one round trip (`INFO memory`). A one-command pipeline:
/// a cluster sends it to one node, where a bare INFO would fan out to every primary and fail
/// while any is down.
pub(crate) async fn maxmemory_policy(conn: &mut impl ConnectionLike) -> Result<String, StoreError> {
    let (memory,): (String,) = redis::pipe().cmd("INFO").arg("memory").query_async(conn).await?;
    Ok(info_field(&memory, "maxmemory_policy").unwrap_or("unknown").to_owned())
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
