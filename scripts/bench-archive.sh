#!/usr/bin/env bash
# Benchmark (not a test): the archive job's items/s next to raw BatchWriteItem to the same
# DynamoDB endpoint, in one run, against a throwaway redis-server and moto_server started here
# on loopback and stopped on exit. Usage: ./scripts/bench-archive.sh [members, default 20000]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps

cargo build --profile bench-tool -p archive --example bench_archive --locked
prepare_run_dir
start_redis "$run"
export REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
start_moto "$run"
cargo run --quiet --profile bench-tool -p archive --example bench_archive --locked -- "${1:-20000}"
