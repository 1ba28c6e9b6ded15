//! Fault tests. Each breaks a Redis it started itself (`standings_tests::servers`), so they
//! run once, beside the suite's standalone pass, and never touch the suite's servers.

mod aof_kill;
mod dropped_connection;
mod eviction_probe;
mod failover;
mod noscript_reads;
mod out_of_memory;
mod replica_wait;
mod restart;
mod restore_history;

/// The default `activity` board's comment rule, and sign-ins, waiting for one replica on
/// every write.
const WAITING_BOARD: &str = r#"
[[boards]]
name = "activity"
kind = "cumulative"
timezone = "Asia/Shanghai"
periods = ["day", "month"]
top = 30
wait_replicas = 1
rules = [{ action = "comment", points = 3, scope = "user_target_day", reversible = true }]
sign_in = { points = 1 }
"#;
