#!/usr/bin/env bash
# Runs the whole test suite: the SAM template's linters, unit, property and integration tests
# against a real redis-server and a real moto_server (DynamoDB), the functions through
# `cargo lambda watch`, and (without test filters) the page in headless Chromium and a smoke run
# of scripts/run-local.sh, all started here on loopback and stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps
ensure_test_deps
ensure_infra_deps
lint_templates

run=$(mktemp -d)
cleanup() {
  if [ -n "${watch_pid:-}" ]; then
    kill -- "-$watch_pid" 2>/dev/null
    wait "$watch_pid" 2>/dev/null
  fi
  stop_pidfile "$run/redis.pid"
  stop_pidfile "$run/moto.pid"
  rm -rf "$run" || true
}
trap cleanup EXIT

start_redis "$run"
export REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
start_moto "$run"

cargo build --workspace --all-targets --locked

# cargo lambda watch serves every function at /lambda-url/<package>/..., with its own key prefix
# and season table (created here, as the template does in AWS); the tests are told both.
export STANDINGS_WATCH_KEY_PREFIX="watch-$$" STANDINGS_WATCH_TABLE="watch-$$"
STANDINGS_TABLE="$STANDINGS_WATCH_TABLE" cargo run -q --locked -p archive --example create_table
watch_port=$(free_port)
STANDINGS_AUTH=off STANDINGS_KEY_PREFIX="$STANDINGS_WATCH_KEY_PREFIX" STANDINGS_TABLE="$STANDINGS_WATCH_TABLE" \
  setsid cargo lambda watch --invoke-address 127.0.0.1 --invoke-port "$watch_port" --ignore-changes \
  >"$run/watch.log" 2>&1 &
watch_pid=$!
wait_http "http://127.0.0.1:$watch_port/" 120 || { cat "$run/watch.log"; exit 1; }
export STANDINGS_WATCH_URL="http://127.0.0.1:$watch_port"

cargo test --workspace --locked "$@" || { echo "--- cargo lambda watch log"; tail -n 50 "$run/watch.log"; exit 1; }

# Without test filters: the live page in headless Chromium against the same cargo lambda watch,
# then a smoke run of the README's run command.
if [ $# -eq 0 ]; then
  ensure_browser_deps
  STANDINGS_SCREENSHOT_DIR="${CARGO_TARGET_DIR:-$PWD/target}/browser" node --test tests/browser/*.test.mjs \
    || { echo "--- cargo lambda watch log"; tail -n 50 "$run/watch.log"; exit 1; }
  # On a port of its own with its own servers: the demo loaded and checked, hotness fired.
  env -u REDIS_URL -u AWS_ENDPOINT_URL_DYNAMODB -u STANDINGS_TABLE PORT="$(free_port)" ./scripts/run-local.sh --smoke
fi
