#!/usr/bin/env bash
# Runs Standings locally: its own redis-server and moto_server (DynamoDB, for archived seasons)
# on loopback, and every function under `cargo lambda watch`, at the same paths API Gateway
# uses (behind /lambda-url/<function>).
# Auth is off (local development only). Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps

run=$(mktemp -d)
cleanup() {
  stop_pidfile "$run/redis.pid"
  stop_pidfile "$run/moto.pid"
  rm -rf "$run" || true
}
trap cleanup EXIT

if [ -z "${REDIS_URL:-}" ]; then
  start_redis "$run"
  export REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
fi
if [ -z "${AWS_ENDPOINT_URL_DYNAMODB:-}" ]; then
  start_moto "$run"
fi
export STANDINGS_TABLE=${STANDINGS_TABLE:-standings}
cargo run -q -p archive --example create_table
export STANDINGS_AUTH=off
port=${PORT:-9000}
base="http://127.0.0.1:$port/lambda-url"
cat <<MSG
Standings is starting (first build takes a few minutes). Redis: $REDIS_URL
Try:
  curl -s -X POST $base/ingest/v1/events -H 'content-type: application/json' \\
    -d '{"event_id":"e1","user_id":"alice","action":"comment","target":"article-1"}'
Archive a finished season, then read it:
  cargo lambda invoke archive --invoke-port $port --data-ascii '{"board":"points","season":"2026-01"}'
  curl -s $base/query/v1/boards/points/seasons/2026-01/top
MSG
cargo lambda watch --invoke-address 127.0.0.1 --invoke-port "$port"
