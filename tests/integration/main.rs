//! One integration binary (faster to link, one place to read). Every module talks to the real
//! redis-server (and, for archives, the moto_server) started by scripts/test.sh; each test has
//! its own key prefix. scripts/test.sh runs the binary twice: against a standalone server, then
//! against a 6-node cluster (`REDIS_CLUSTER=true`), skipping in that second pass the modules
//! that bring servers of their own (`faults`, `tls`) or use the standalone `cargo lambda watch`
//! (`lambda_watch`).

mod admin;
mod archive;
mod archived_statements;
mod batch;
mod batch_isolation;
mod cluster_slots;
mod distribution;
mod emptied_seasons;
mod exactly_once;
mod faults;
mod friends;
mod fuzz;
mod hardening;
mod health;
mod hot;
mod hot_metrics;
mod journal;
mod journal_checks;
mod journal_restore;
mod keyspace;
mod lambda_watch;
mod layers;
mod league_model;
mod leagues;
mod limits;
mod local_log;
mod lua_keys;
mod malformed;
mod markers;
mod model;
mod notifications;
mod notify_lease;
mod notify_model;
mod notify_put_events;
mod openapi;
mod partial_writes;
mod query;
mod queue;
mod queue_dead_letters;
mod queue_fifo;
mod queue_poller;
mod queue_time;
mod round_trips;
mod rules;
mod runtime_api;
mod score_batch;
mod score_corrections;
mod score_model;
mod score_semantics;
mod scores;
mod semantics;
mod sign_ins;
mod startup_check;
mod statements;
mod store_down;
mod template;
mod time_and_ties;
mod tls;
mod void;
mod web_page;
mod window;
