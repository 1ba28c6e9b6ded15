//! One integration binary (faster to link, one place to read). Every module talks to the real
//! redis-server (and, for archives, the moto_server) started by scripts/test.sh; each test has
//! its own key prefix.

mod admin;
mod archive;
mod batch;
mod exactly_once;
mod friends;
mod health;
mod hot;
mod hot_metrics;
mod lambda_watch;
mod limits;
mod malformed;
mod openapi;
mod query;
mod rules;
mod runtime_api;
mod sign_ins;
mod startup_check;
mod store_down;
mod template;
mod time_and_ties;
mod web_page;
