#!/usr/bin/env bash
# The whole-system simulation alone, for longer than CI gives it (docs/testing.md#the-simulation):
# `./scripts/simulate.sh --minutes N` starts its own standalone redis-server, 6-node cluster and
# moto_server on loopback, runs fresh seeds for N minutes on each topology (default 10), prints
# the histories, steps, faults and reads checked, and stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=10
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    *) echo "usage: $0 [--minutes N]" >&2; exit 2 ;;
  esac
done
. scripts/lib.sh
ensure_deps
run=$(mktemp -d)
export STANDINGS_TEST_TMP="$run"
cleanup() {
  stop_redis_under "$run"
  stop_pidfile "$run/moto.pid" moto_server
  rm -rf "$run" || true
}
trap cleanup EXIT
start_redis "$run/standalone"
start_cluster "$run/cluster"
start_moto "$run"
export STANDINGS_SIM_SECS=$((minutes * 60))
echo "--- simulation, standalone, $minutes minutes"
REDIS_URL="redis://127.0.0.1:$REDIS_PORT" "${INTEGRATION[@]}" simulation -- --nocapture
echo "--- simulation, Redis Cluster, $minutes minutes"
REDIS_URL="redis://127.0.0.1:${CLUSTER_PORTS[0]}" REDIS_CLUSTER=true \
  "${INTEGRATION[@]}" simulation -- --nocapture
