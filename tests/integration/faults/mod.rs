//! Fault tests. Each breaks a Redis it started itself (`standings_tests::servers`), so they
//! run once, beside the suite's standalone pass, and never touch the suite's servers.

mod aof_kill;
mod dropped_connection;
mod failover;
mod out_of_memory;
mod replica_wait;
