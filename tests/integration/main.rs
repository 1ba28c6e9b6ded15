//! One integration binary (faster to link, one place to read). Every module talks to the real
//! redis-server started by scripts/test.sh; each test has its own key prefix.

mod batch;
mod exactly_once;
mod friends;
mod health;
mod hot;
mod lambda_watch;
mod malformed;
mod openapi;
mod query;
mod round_trips;
mod rules;
mod runtime_api;
mod store_down;
mod time_and_ties;
mod web_page;
