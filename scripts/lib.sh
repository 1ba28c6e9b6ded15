# Shared by the scripts in this folder: install what is missing, start and stop local
# services on loopback. Source it; do not run it.

sudo_if_needed() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Installs redis-server, cargo-lambda and moto_server (a local DynamoDB) when they are missing
# (fresh Debian machine).
ensure_deps() {
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    sudo_if_needed apt-get update -qq
    sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
  fi
  if ! command -v cargo >/dev/null; then
    echo "cargo is required: https://rustup.rs" >&2
    exit 1
  fi
  if ! cargo lambda --version >/dev/null 2>&1; then
    python3 -m pip install --quiet cargo-lambda
  fi
  ensure_moto
}

# The OpenAPI tests: openapi-spec-validator (pip) validates the document; its jsonschema and
# referencing check real answers against it (tests/openapi/conforms.py).
ensure_test_deps() {
  if ! python3 -c 'import openapi_spec_validator' 2>/dev/null; then
    python3 -m pip install --quiet openapi-spec-validator
  fi
}

# cfn-lint and the SAM CLI check infra/template.yaml (lint_templates, run by scripts/test.sh).
ensure_infra_deps() {
  if ! python3 -c 'import cfnlint' 2>/dev/null; then
    python3 -m pip install --quiet cfn-lint
  fi
  if ! python3 -c 'import samcli' 2>/dev/null; then
    python3 -m pip install --quiet aws-sam-cli
  fi
}

# Both linters on the SAM template. Offline: `sam validate` only needs a region to be named.
lint_templates() {
  cfn-lint infra/template.yaml
  AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}" SAM_CLI_TELEMETRY=0 \
    sam validate --lint --template infra/template.yaml
}

# moto_server, the DynamoDB emulator for the season table (tests and run-local.sh), with the
# boto3 and PyYAML that scripts/local_table.py uses.
ensure_moto() {
  if ! command -v moto_server >/dev/null || ! python3 -c 'import moto.server, boto3, yaml' 2>/dev/null; then
    python3 -m pip install --quiet 'moto[server]'
  fi
}

# The browser tests: Debian's chromium and playwright-core (npm, pinned by
# tests/browser/package-lock.json; it drives /usr/bin/chromium and downloads no browser).
ensure_browser_deps() {
  if [ ! -x /usr/bin/chromium ]; then
    sudo_if_needed apt-get update -qq
    sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
  if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' 2>/dev/null; then
    echo "the browser tests need Node.js 20 or newer (node and npm on PATH)" >&2
    exit 1
  fi
  # `npm ls` fails when what is installed does not match package.json (missing or other version).
  if ! npm ls --prefix tests/browser >/dev/null 2>&1; then
    npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_redis DIR: a throwaway redis-server on a free loopback port; sets REDIS_PORT.
start_redis() {
  local dir=$1
  REDIS_PORT=$(free_port)
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$dir" --save '' --appendonly no \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
  for _ in $(seq 1 100); do
    redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "redis-server did not start; see $dir/redis.log" >&2
  return 1
}

# start_moto DIR: a throwaway moto_server (an in-memory DynamoDB) on a free loopback port, and
# the AWS SDK pointed at it with dummy credentials; sets MOTO_PORT, writes DIR/moto.pid.
start_moto() {
  local dir=$1
  MOTO_PORT=$(free_port)
  moto_server -H 127.0.0.1 -p "$MOTO_PORT" >"$dir/moto.log" 2>&1 &
  echo $! >"$dir/moto.pid"
  wait_http "http://127.0.0.1:$MOTO_PORT/moto-api/" 60 || { cat "$dir/moto.log" >&2; return 1; }
  export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$MOTO_PORT"
  export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
}

# stop_pidfile FILE: stops that process and waits until it is gone.
stop_pidfile() {
  [ -f "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  kill "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}

# prepare_run_dir: sets $run, a scratch directory for this script's servers; on exit the
# redis-server and moto_server started there are stopped and the directory removed.
prepare_run_dir() {
  run=$(mktemp -d)
  trap 'stop_pidfile "$run/redis.pid"; stop_pidfile "$run/moto.pid"; rm -rf "$run"' EXIT
}

# wait_http URL SECONDS: until URL answers at all.
wait_http() {
  for _ in $(seq 1 "$(( $2 * 10 ))"); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.1
  done
  echo "$1 did not answer within $2 s" >&2
  return 1
}
