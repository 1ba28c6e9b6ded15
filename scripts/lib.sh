# Shared by the scripts in this folder: install what is missing, start and stop local
# services on loopback. Source it; do not run it.

sudo_if_needed() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Installs redis-server, openssl, cargo-lambda and moto_server (a local DynamoDB) when they are
# missing (fresh Debian machine).
ensure_deps() {
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null || ! command -v openssl >/dev/null; then
    sudo_if_needed apt-get update -qq
    sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools openssl >/dev/null
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

# The Rust lints: rustfmt (with rustfmt.toml) and clippy, as components of the toolchain.
ensure_lint_deps() {
  if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
    rustup component add rustfmt clippy
  fi
}

# The code is formatted as rustfmt.toml says (and clippy finds nothing: lint_while_building).
lint_rust() {
  cargo fmt --all --check
  # The functions that need no AWS API link no AWS SDK (bootstrap size, cold starts).
  local function
  for function in ingest query hotness; do
    if cargo tree -p "$function" -e normal --locked | grep -q aws-sdk; then
      echo "$function links an AWS SDK crate:" >&2
      cargo tree -p "$function" -e normal --locked -i aws-smithy-runtime >&2 || true
      return 1
    fi
  done
}

# Clippy lints every workspace crate as it is compiled, for every cargo command after this
# (`cargo clippy` is this wrapper around `cargo check`, and these its variables): the build the
# tests run is the lint too, `-D warnings` failing it, with no second compile of every
# dependency in check mode (5 of a cold build's 19 minutes). The variables are part of the
# workspace crates' fingerprints: every cargo command of a run keeps them (the watch's too).
lint_while_building() {
  RUSTC_WORKSPACE_WRAPPER=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)
  export RUSTC_WORKSPACE_WRAPPER
  export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
}

# The OpenAPI tests: openapi-spec-validator (pip) validates the document; its jsonschema and
# referencing check real answers against it (tests/openapi/conforms.py). DuckDB (pip) for the
# journal's objects.
ensure_test_deps() {
  if ! python3 -c 'import openapi_spec_validator' 2>/dev/null; then
    python3 -m pip install --quiet openapi-spec-validator
  fi
  # DuckDB reads the journal's objects in tests/journal/read.py, a reader nobody here wrote.
  if ! python3 -c 'import duckdb' 2>/dev/null; then
    python3 -m pip install --quiet duckdb
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
  free_ports 1
}

# free_ports N: N distinct loopback ports nothing listens on (all held open while chosen),
# below the kernel's ephemeral range so no outgoing connection takes one before its server.
free_ports() {
  python3 -c 'import random, socket, sys
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
held = []
while len(held) < int(sys.argv[1]):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randrange(10000, low)))
        held.append(s)
    except OSError:
        s.close()
print(" ".join(str(s.getsockname()[1]) for s in held))' "$1"
}

# poll SECONDS WHAT COMMAND...: runs COMMAND every 0.1 s until it succeeds.
poll() {
  local seconds=$1 what=$2
  shift 2
  for _ in $(seq 1 "$(( seconds * 10 ))"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "$what: not within $seconds s" >&2
  return 1
}

# redis_server DIR ARGS...: a daemonized redis-server bound to loopback, without persistence,
# its pid, log and data in DIR.
redis_server() {
  local dir=$1
  shift
  mkdir -p "$dir"
  redis-server --bind 127.0.0.1 --dir "$dir" --save '' --appendonly no \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" "$@"
}

# start_redis DIR [OPTION...]: a throwaway redis-server on a free loopback port, with redis-server's
# options after DIR; sets REDIS_PORT.
start_redis() {
  local dir=$1
  shift
  REDIS_PORT=$(free_port)
  redis_server "$dir" --port "$REDIS_PORT" "$@"
  poll 10 "redis-server (see $dir/redis.log)" redis-cli -p "$REDIS_PORT" ping
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
  # moto serves every service on one port: SQS too (the queue function, its tests).
  export AWS_ENDPOINT_URL_SQS="http://127.0.0.1:$MOTO_PORT"
  # And S3: the journal bucket (the journal function, its tests).
  export AWS_ENDPOINT_URL_S3="http://127.0.0.1:$MOTO_PORT"
  # And EventBridge: the bus rank-change notifications go to (the journal function, its tests).
  export AWS_ENDPOINT_URL_EVENTBRIDGE="http://127.0.0.1:$MOTO_PORT"
  export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
}

# start_cluster DIR: a 6-node Redis Cluster (3 primaries, 3 replicas) on free loopback ports,
# one directory per node under DIR. Returns once every node sees the cluster ok with all
# 16384 slots covered and all 3 replicas in sync. Sets CLUSTER_PORTS (an array).
start_cluster() {
  local dir=$1 ports port i
  read -ra ports <<<"$(free_ports 12)"
  CLUSTER_PORTS=("${ports[@]:0:6}")
  for i in 0 1 2 3 4 5; do
    port=${ports[$i]}
    redis_server "$dir/node-$port" --port "$port" --cluster-port "${ports[$((i + 6))]}" \
      --cluster-enabled yes --cluster-config-file nodes.conf
  done
  for port in "${CLUSTER_PORTS[@]}"; do
    poll 10 "cluster node $port (see $dir/node-$port/redis.log)" redis-cli -p "$port" ping
  done
  redis-cli --cluster create $(printf '127.0.0.1:%s ' "${CLUSTER_PORTS[@]}") \
    --cluster-replicas 1 --cluster-yes >"$dir/create.log"
  poll 30 "the cluster to be ok (see $dir/create.log)" cluster_ok
}

cluster_ok() {
  local port info in_sync=0
  for port in "${CLUSTER_PORTS[@]}"; do
    info=$(redis-cli -p "$port" cluster info) || return 1
    grep -q '^cluster_state:ok' <<<"$info" && grep -q '^cluster_slots_ok:16384' <<<"$info" || return 1
    if redis-cli -p "$port" info replication | grep -q '^master_link_status:up'; then
      in_sync=$((in_sync + 1))
    fi
  done
  [ "$in_sync" -eq 3 ]
}

# make_certs DIR: a CA, a server certificate it signs for 127.0.0.1 and localhost, and a
# second CA that signed nothing (to test a wrong CA).
make_certs() {
  local dir=$1
  mkdir -p "$dir"
  for ca in ca other-ca; do
    openssl req -x509 -new -nodes -newkey rsa:2048 -days 2 -subj "/CN=Standings test $ca" \
      -keyout "$dir/$ca.key" -out "$dir/$ca.crt" 2>/dev/null
  done
  openssl req -new -nodes -newkey rsa:2048 -subj "/CN=localhost" \
    -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$dir/server.ext"
  openssl x509 -req -days 2 -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
    -CAcreateserial -extfile "$dir/server.ext" -out "$dir/server.crt" 2>/dev/null
}

# start_tls_redis DIR: a redis-server that only speaks TLS (--port 0), with certificates made
# here, the default user off and one ACL user with a password. Sets TLS_PORT, TLS_USER,
# TLS_PASSWORD; the CA is DIR/ca.crt.
start_tls_redis() {
  local dir=$1
  make_certs "$dir"
  TLS_PORT=$(free_port)
  TLS_USER=standings
  TLS_PASSWORD=$(openssl rand -hex 16)
  redis_server "$dir" --port 0 --tls-port "$TLS_PORT" --tls-auth-clients no \
    --tls-cert-file "$dir/server.crt" --tls-key-file "$dir/server.key" --tls-ca-cert-file "$dir/ca.crt"
  local cli=(redis-cli --tls --cacert "$dir/ca.crt" -p "$TLS_PORT")
  poll 10 "TLS redis-server (see $dir/redis.log)" "${cli[@]}" ping
  # What a Standings deployment gets (README: ElastiCache), with every key for the tests' prefixes.
  "${cli[@]}" acl setuser "$TLS_USER" on ">$TLS_PASSWORD" '~*' +@all -@dangerous +info >/dev/null
  "${cli[@]}" acl setuser default off >/dev/null
}

# stop_pidfile FILE [NAME]: stops the process whose pid FILE holds if it still runs as NAME
# (default redis-server; a pid of a server that died may have been reused), and waits until it
# has exited (redis-server writes its log on the way out).
stop_pidfile() {
  [ -f "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  if [ "$(ps -o comm= -p "$pid" 2>/dev/null)" = "${2:-redis-server}" ] && kill "$pid" 2>/dev/null; then
    # moto_server sometimes ignores SIGTERM while a request thread is busy.
    poll 10 "${2:-redis-server} $pid to exit" exited "$pid" || kill -KILL "$pid" 2>/dev/null || true
  fi
}

exited() {
  ! kill -0 "$1" 2>/dev/null
}

# stop_redis_under DIR: stops every redis-server with a pid file under DIR.
stop_redis_under() {
  local pidfile
  while IFS= read -r pidfile; do
    stop_pidfile "$pidfile"
  done < <(find "$1" -name redis.pid 2>/dev/null)
}

# prepare_run_dir: sets $run, a scratch directory for this script's servers; on exit every
# redis-server started under it and its moto_server are stopped and the directory removed.
prepare_run_dir() {
  run=$(mktemp -d)
  trap 'stop_redis_under "$run"; stop_pidfile "$run/moto.pid" moto_server; rm -rf "$run"' EXIT
}

# wait_http URL SECONDS: until URL answers at all.
wait_http() {
  poll "$2" "$1" curl -s -o /dev/null "$1"
}

# The integration binary alone, built as `cargo test --workspace` builds it. With `-p
# standings-tests`, Cargo resolves features for that package only (tokio without the CLI's
# `signal`, reqwest without its rustls): every crate above them is compiled a second time, most
# of a cold build again.
INTEGRATION=(cargo test --workspace --locked --test integration)

# Run in the first pass only: a volume test of the season table (25,001 items through
# DynamoDB's batches, a third of the suite's time on moto), whose Redis side is the same paged
# read on any topology and any date. The archive's other tests run in every pass.
FIRST_PASS_ONLY=(--skip archive::a_season_of_25001_members_is_archived_rank_for_rank_and_redis_is_freed)

# The whole integration suite also runs with the real-time clock a year ahead
# (run_clock_shifted), so no test depends on today's date. Left out: the modules that bring
# servers of their own (faults, tls) or run a function binary outside the shim (lambda_watch,
# runtime_api), whose clock is the real one, and the simulation, whose clock is its own.
CLOCK_SHIFTED_SKIPS=(--skip faults:: --skip tls:: --skip lambda_watch:: --skip runtime_api:: --skip simulation:: "${FIRST_PASS_ONLY[@]}")

# run_clock_shifted DIR SECONDS: builds tests/clockshift (an LD_PRELOAD shim moving
# CLOCK_REALTIME by SECONDS), starts a redis-server under it and runs the integration
# suite (but CLOCK_SHIFTED_SKIPS) against that server with the test binary under the same shim.
run_clock_shifted() {
  local dir=$1 offset=$2 port
  mkdir -p "$dir"
  gcc -shared -fPIC -O2 -o "$dir/clockshift.so" tests/clockshift/clockshift.c
  port=$(free_port)
  STANDINGS_CLOCK_OFFSET_SECS=$offset LD_PRELOAD="$dir/clockshift.so" redis_server "$dir" --port "$port"
  poll 10 "clock-shifted redis-server (see $dir/redis.log)" redis-cli -p "$port" ping
  local skew=$(( $(redis-cli -p "$port" time | head -1) - $(date +%s) ))
  if [ "$skew" -lt $(( offset - 60 )) ]; then
    echo "the clock shim did not move redis-server's clock (skew $skew s)" >&2
    return 1
  fi
  echo "--- the integration suite with the real-time clock $offset s ahead (redis-server on $port)"
  REDIS_URL="redis://127.0.0.1:$port" REDIS_CLUSTER=false STANDINGS_CLOCK_OFFSET_SECS=$offset \
    CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="env LD_PRELOAD=$dir/clockshift.so" \
    "${INTEGRATION[@]}" -- "${CLOCK_SHIFTED_SKIPS[@]}"
}
