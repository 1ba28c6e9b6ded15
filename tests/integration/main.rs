//! One integration binary (faster to link, one place to read). Every module talks to the real
//! redis-server (and, for archives, the moto_server) started by scripts/test.sh; each test has
//! its own key prefix.

mod archive;
mod batch;
mod exactly_once;
mod lambda_watch;
mod malformed;
mod rules;
mod store_down;
mod time_and_ties;
