#!/usr/bin/env bash
# Runs Standings locally: its own redis-server on loopback and every function under
# `cargo lambda watch`, at the same paths API Gateway uses (behind /lambda-url/<function>).
# Auth is off (local development only). Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps

run=$(mktemp -d)
cleanup() {
  stop_pidfile "$run/redis.pid"
  rm -rf "$run" || true
}
trap cleanup EXIT

if [ -z "${REDIS_URL:-}" ]; then
  start_redis "$run"
  export REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
fi
export STANDINGS_AUTH=off
port=${PORT:-9000}
base="http://127.0.0.1:$port/lambda-url"
cat <<MSG
Standings is starting (first build takes a few minutes). Redis: $REDIS_URL
Try:
  curl -s -X POST $base/ingest/v1/events -H 'content-type: application/json' \\
    -d '{"event_id":"e1","user_id":"alice","action":"comment","target":"article-1"}'
MSG
cargo lambda watch --invoke-address 127.0.0.1 --invoke-port "$port"
