#!/usr/bin/env bash
# Runs the whole test suite: the SAM template's linters, rustfmt and clippy (as the build
# compiles: lint_while_building), unit, property and
# integration tests against real Redis — a standalone redis-server, a 6-node Redis Cluster and a
# TLS-only server with an ACL user — and a real moto_server (DynamoDB), the functions through
# `cargo lambda watch`, and (without test filters) the page in headless Chromium, a smoke run
# of scripts/run-local.sh and the integration suite again with the real clock a year ahead, all started here on loopback and stopped on exit. Extra arguments go to
# both `cargo test` runs (e.g. a test name filter).
set -euo pipefail
cd "$(dirname "$0")/.."
# A failing test's own message is what tells why; an async test's backtrace is runtime frames
# that push it out of a CI log's excerpt.
export RUST_BACKTRACE=0
. scripts/lib.sh
ensure_deps
ensure_test_deps
ensure_infra_deps
ensure_lint_deps
lint_templates
lint_rust
lint_while_building

run=$(mktemp -d)
# Servers the fault tests start for themselves live here too, so they are stopped on exit
# even if a test process dies before it can stop them.
export STANDINGS_TEST_TMP="$run"
cleanup() {
  if [ -n "${watch_pid:-}" ]; then
    kill -- "-$watch_pid" 2>/dev/null
    wait "$watch_pid" 2>/dev/null
  fi
  stop_redis_under "$run"
  stop_pidfile "$run/moto.pid" moto_server
  rm -rf "$run" || true
}
trap cleanup EXIT

start_redis "$run/standalone"
start_cluster "$run/cluster"
start_tls_redis "$run/tls"
export REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
export STANDINGS_TEST_TLS_PORT="$TLS_PORT" STANDINGS_TEST_TLS_USER="$TLS_USER" \
  STANDINGS_TEST_TLS_PASSWORD="$TLS_PASSWORD" STANDINGS_TEST_TLS_CA="$run/tls/ca.crt" \
  STANDINGS_TEST_TLS_OTHER_CA="$run/tls/other-ca.crt"
start_moto "$run"

cargo build --workspace --all-targets --locked

# cargo lambda watch serves every function at /lambda-url/<package>/..., with its own key prefix
# and season table (created here, as the template does in AWS); the tests are told both.
# Its writes are journaled to a bucket of its own, which the journal function drains.
export STANDINGS_WATCH_KEY_PREFIX="watch-$$" STANDINGS_WATCH_TABLE="watch-$$" STANDINGS_WATCH_JOURNAL_BUCKET="watch-$$"
# The example as the build above made it (`cargo run -p archive` would resolve features for
# that package alone, and compile most of the dependencies a second time).
STANDINGS_TABLE="$STANDINGS_WATCH_TABLE" "${CARGO_TARGET_DIR:-target}/debug/examples/create_table"
python3 -c 'import boto3, os, sys; boto3.client("s3").create_bucket(Bucket=sys.argv[1])' "$STANDINGS_WATCH_JOURNAL_BUCKET"
watch_port=$(free_port)
STANDINGS_AUTH=off STANDINGS_KEY_PREFIX="$STANDINGS_WATCH_KEY_PREFIX" STANDINGS_TABLE="$STANDINGS_WATCH_TABLE" \
  STANDINGS_JOURNAL_BUCKET="$STANDINGS_WATCH_JOURNAL_BUCKET" \
  setsid cargo lambda watch --invoke-address 127.0.0.1 --invoke-port "$watch_port" --ignore-changes \
  >"$run/watch.log" 2>&1 &
watch_pid=$!
wait_http "http://127.0.0.1:$watch_port/" 120 || { cat "$run/watch.log"; exit 1; }
export STANDINGS_WATCH_URL="http://127.0.0.1:$watch_port"
# No drain first: a new deployment's boards take journaled writes from the first, each function
# judging them new at its start (docs/journal.md#fence); the watch's tests write before any drain.

cargo test --workspace --locked "$@" || { echo "--- cargo lambda watch log"; tail -n 50 "$run/watch.log"; exit 1; }

# Without test filters: the live page in headless Chromium against the same cargo lambda watch,
# then a smoke run of the README's run command.
if [ $# -eq 0 ]; then
  ensure_browser_deps
  STANDINGS_SCREENSHOT_DIR="${CARGO_TARGET_DIR:-$PWD/target}/browser" node --test tests/browser/*.test.mjs \
    || { echo "--- cargo lambda watch log"; tail -n 50 "$run/watch.log"; exit 1; }
  # On a port of its own with its own servers: the demo loaded and checked, hotness fired.
  env -u REDIS_URL -u AWS_ENDPOINT_URL_DYNAMODB -u AWS_ENDPOINT_URL_SQS -u AWS_ENDPOINT_URL_S3 -u STANDINGS_TABLE PORT="$(free_port)" ./scripts/run-local.sh --smoke
  # The tests that write expiring keys, a year from today (no test may depend on the date).
  run_clock_shifted "$run/shifted" $(( 366 * 24 * 3600 ))
fi

# The same integration suite again, against the cluster. Modules that bring servers of their
# own (faults, tls) or drive the standalone `cargo lambda watch` ran in the first pass, as did
# the volume test of the season table (FIRST_PASS_ONLY).
skips=(--skip faults:: --skip tls:: --skip lambda_watch:: "${FIRST_PASS_ONLY[@]}")
args=("$@")
if printf '%s\n' "${args[@]}" | grep -qx -- '--'; then args+=("${skips[@]}"); else args+=(-- "${skips[@]}"); fi
echo "--- integration suite against Redis Cluster (127.0.0.1:${CLUSTER_PORTS[0]} and 5 more nodes)"
REDIS_URL="redis://127.0.0.1:${CLUSTER_PORTS[0]}" REDIS_CLUSTER=true \
  "${INTEGRATION[@]}" "${args[@]}"
