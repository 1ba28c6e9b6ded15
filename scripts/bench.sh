#!/usr/bin/env bash
# Runs the benchmarks (not tests) against a throwaway redis-server and moto_server (DynamoDB)
# on loopback, started here and stopped on exit. Prints Markdown: each scenario's table, the
# targets, the machine. A run of every scenario also writes those results into BENCHMARKS.md
# (between its results markers).
#   ./scripts/bench.sh                                 every scenario, 7 repetitions each (~5 min)
#   ./scripts/bench.sh --around-members 1000000        around-me on 1,000,000 members, not 10,000,000
#   ./scripts/bench.sh --repetitions 11 hot-synthesis  one scenario (BENCHMARKS.md left alone)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps

cargo build --profile bench-tool -p standings-bench --locked
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
prepare_run_dir
# DEBUG from loopback: the rollback scenario loads the store again from its snapshot, and
# compares keys by digest.
start_redis "$run" --enable-debug-command local
export REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
start_moto "$run"
# Scenario 13 spreads one board over a cluster: the same 6 nodes the tests use.
mkdir -p "$run/cluster"
start_cluster "$run/cluster"
export STANDINGS_BENCH_CLUSTER_URL="redis://127.0.0.1:${CLUSTER_PORTS[0]}"

# Run directly (not `cargo run`): the bootstrap scenario builds the release functions itself.
"$target_dir/bench-tool/standings-bench" "$@"
