#!/usr/bin/env bash
# Runs the benchmarks (not tests) against a throwaway redis-server on loopback, started here
# and stopped on exit, and prints the machine they ran on followed by Markdown results.
#   ./scripts/bench.sh                      every scenario, 7 repetitions each
#   ./scripts/bench.sh --repetitions 11 hot-synthesis
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps

cargo build --profile bench-tool -p standings-bench --locked
prepare_run_dir
start_redis "$run"
export REDIS_URL="redis://127.0.0.1:$REDIS_PORT"

echo "## Machine"
echo
echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores available)"
echo "- Memory: $(free -g | awk '/^Mem:/ {print $2}') GiB"
echo "- Redis: $(redis-server --version | grep -o 'v=[^ ]*' | cut -d= -f2) (standalone, loopback, no persistence)"
echo
cargo run --quiet --profile bench-tool -p standings-bench --locked -- "$@"
