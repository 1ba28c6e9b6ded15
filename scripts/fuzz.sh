#!/usr/bin/env bash
# Fuzzes request parsing and validation (tests/integration/fuzz.rs) through the ingest router
# against a throwaway redis-server, for MINUTES minutes (default 10). Not part of CI, which
# runs a short pass of the same test. A failing input's seed lands in
# tests/fuzz/regressions.txt, replayed first by every later run (CI included): commit it.
#
#   ./scripts/fuzz.sh [MINUTES]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps
minutes=${1:-10}

prepare_run_dir
start_redis "$run"
REDIS_URL="redis://127.0.0.1:$REDIS_PORT" STANDINGS_FUZZ_SECONDS=$((minutes * 60)) \
  "${INTEGRATION[@]}" fuzz:: -- --nocapture
