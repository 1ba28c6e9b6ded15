//! One integration binary (faster to link, one place to read). Every module talks to the real
//! redis-server started by scripts/test.sh; each test has its own key prefix.

mod admin;
mod batch;
mod exactly_once;
mod lambda_watch;
mod limits;
mod malformed;
mod rules;
mod sign_ins;
mod store_down;
mod time_and_ties;
