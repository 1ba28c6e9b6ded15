#!/usr/bin/env bash
# Runs Standings locally, everything on loopback and stopped on exit (Ctrl-C):
# - its own redis-server (or the one in REDIS_URL) and moto_server for the season table (or the
#   DynamoDB endpoint in AWS_ENDPOINT_URL_DYNAMODB, e.g. docker-compose.yml's DynamoDB Local);
# - every function under `cargo lambda watch`, at the paths API Gateway uses
#   (`[workspace.metadata.lambda.watch.router]` in Cargo.toml): http://127.0.0.1:9000/v1/events;
# - the hotness schedule: the function invoked at the start of every minute with the scheduled
#   event for that minute;
# - a demo workload (scripts/demo.py), checked against what the boards answer.
# Auth is off (STANDINGS_AUTH=off: local development only).
#
#   ./scripts/run-local.sh            serve until Ctrl-C (PORT=9000 by default)
#   ./scripts/run-local.sh --smoke    start, load and check the demo, fire hotness and the journal once, stop
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

smoke=false
case "${1:-}" in
  --smoke) smoke=true ;;
  "") ;;
  *) echo "usage: $0 [--smoke]" >&2; exit 2 ;;
esac

ensure_deps

run=$(mktemp -d)
cleanup() {
  if [ -n "${schedule_pid:-}" ]; then kill "$schedule_pid" 2>/dev/null || true; fi
  if [ -n "${poller_pid:-}" ]; then kill "$poller_pid" 2>/dev/null || true; fi
  if [ -n "${tail_pid:-}" ]; then pkill -P "$$" tail 2>/dev/null || true; kill "$tail_pid" 2>/dev/null || true; fi
  if [ -n "${watch_pid:-}" ]; then
    kill -- "-$watch_pid" 2>/dev/null || true
    wait "$watch_pid" 2>/dev/null || true
  fi
  stop_pidfile "$run/redis.pid"
  stop_pidfile "$run/moto.pid" moto_server
  rm -rf "$run" || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

own_redis=
if [ -z "${REDIS_URL:-}" ]; then
  start_redis "$run"
  export REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
  own_redis=$REDIS_PORT
fi
# The SDK's own variables; any credentials do for an emulator.
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-local}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-local}"
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}" AWS_REGION="${AWS_REGION:-${AWS_DEFAULT_REGION:-us-east-1}}"
if [ -z "${AWS_ENDPOINT_URL_DYNAMODB:-}" ]; then
  start_moto "$run"
  export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$MOTO_PORT"
fi
export STANDINGS_TABLE="${STANDINGS_TABLE:-standings-seasons}"
python3 scripts/local_table.py "$AWS_ENDPOINT_URL_DYNAMODB" "$STANDINGS_TABLE"
export STANDINGS_AUTH=off
# The queue and its dead-letter queue on the same moto_server (the SDK's own variable points the
# `queue` function there); scripts/queue_poller.py below stands in for the event source mapping.
export AWS_ENDPOINT_URL_SQS="${AWS_ENDPOINT_URL_SQS:-$AWS_ENDPOINT_URL_DYNAMODB}"
read -r STANDINGS_EVENT_QUEUE_URL STANDINGS_DEAD_LETTER_QUEUE_URL < <(python3 scripts/queue_poller.py create "standings-$$")
export STANDINGS_EVENT_QUEUE_URL STANDINGS_DEAD_LETTER_QUEUE_URL
# The journal's bucket on the same moto_server: every write is journaled, and the journal
# function below drains it there every minute (docs/journal.md).
export AWS_ENDPOINT_URL_S3="${AWS_ENDPOINT_URL_S3:-$AWS_ENDPOINT_URL_DYNAMODB}"
export STANDINGS_JOURNAL_BUCKET="${STANDINGS_JOURNAL_BUCKET:-standings-journal}"
python3 -c 'import boto3, sys; s3 = boto3.client("s3"); names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
if sys.argv[1] not in names: s3.create_bucket(Bucket=sys.argv[1])' "$STANDINGS_JOURNAL_BUCKET"
# The rank-change notifications' bus on the same moto_server, with the template's example rule to
# a queue of its own (docs/notifications.md); the journal drain sends to it every minute.
export AWS_ENDPOINT_URL_EVENTBRIDGE="${AWS_ENDPOINT_URL_EVENTBRIDGE:-$AWS_ENDPOINT_URL_DYNAMODB}"
export STANDINGS_EVENT_BUS="${STANDINGS_EVENT_BUS:-standings-notifications}"
STANDINGS_RANK_CHANGED_QUEUE_URL=$(python3 scripts/local_bus.py "$STANDINGS_EVENT_BUS")

port=${PORT:-9000}
base="http://127.0.0.1:$port"
echo "Building the functions (the first build takes a few minutes)…"
cargo build --workspace --locked --quiet
# The functions log JSON and EMF metric lines, as in Lambda: all of it goes to a log file (named
# in the banner); the terminal gets one readable line per request and job run.
if $smoke; then
  watch_log="$run/watch.log"
else
  watch_log="${CARGO_TARGET_DIR:-$PWD/target}/run-local.log"
  : >"$watch_log"
fi
setsid cargo lambda watch --invoke-address 127.0.0.1 --invoke-port "$port" --ignore-changes >"$watch_log" 2>&1 &
watch_pid=$!
if ! $smoke; then
  tail -n +1 -F "$watch_log" 2>/dev/null | python3 -u scripts/local_log.py &
  tail_pid=$!
fi
wait_http "$base/" 120 || { $smoke && tail -n 50 "$watch_log"; exit 1; }
python3 -u scripts/queue_poller.py poll "$base" "$STANDINGS_EVENT_QUEUE_URL" >>"$watch_log" 2>&1 &
poller_pid=$!

# One scheduled run of `hotness` for the minute of now, through the Lambda Invoke API that
# `cargo lambda watch` serves (what `cargo lambda invoke hotness` does), with the scheduled
# event's shape (functions/hotness/fixtures/scheduled-event.json) and this minute as its time.
fire_hotness() {
  local minute
  minute=$(date -u +%Y-%m-%dT%H:%M:00Z)
  sed "s/\"time\": \"[^\"]*\"/\"time\": \"$minute\"/" functions/hotness/fixtures/scheduled-event.json |
    curl -sS --fail-with-body --max-time 60 --retry 2 --retry-all-errors -X POST "$base/2015-03-31/functions/hotness/invocations" --data-binary @-
}

# One drain of the journal, as its schedule would (the Invoke API again). None runs before the
# demo: a new deployment's boards take writes from the first, each function judging them new at
# its start (docs/journal.md#fence).
fire_journal() {
  curl -sS --fail-with-body --max-time 60 --retry 2 --retry-all-errors -X POST "$base/2015-03-31/functions/journal/invocations" --data-binary '{"drain": {}}'
}

if ! python3 scripts/demo.py "$base"; then
  $smoke && tail -n 50 "$watch_log"
  exit 1
fi
first_run=$(fire_hotness)
python3 scripts/local_log.py --hotness "$first_run" || echo "hotness: $first_run"
drained=$(fire_journal)
echo "journal: $drained"

if $smoke; then
  python3 -c 'import json, sys; run = json.loads(sys.argv[1]); assert [b["board"] for b in run["boards"]] == ["hot-videos"], run' "$first_run"
  python3 -c 'import json, sys; run = json.loads(sys.argv[1]); assert run["entries"] > 0 and run["lag_seconds"] < 60, run' "$drained"
  # The demo's league board notifies with a quiet time: its crossings are held, then released.
  released=$(curl -sS --fail-with-body --max-time 60 -X POST "$base/2015-03-31/functions/journal/invocations" --data-binary '{"drain": {"release_held": true}}')
  python3 -c 'import json, sys; run = json.loads(sys.argv[1]); assert run["notifications"] > 0, run' "$released"
  for path in / /v1/openapi.json /v1/health; do
    # Into a file, not /dev/null: curl cannot truncate /dev/null before a retry and gives up
    # ("Failed to truncate file"), so the retry around the emulator's lost answers never ran.
    # --max-time: an answer the emulator lost may also never come (a CI run hung 18 min here).
    curl -sS --fail-with-body --max-time 20 --retry 3 --retry-all-errors -o "$run/smoke-get.out" "$base$path" || { echo "GET $path failed" >&2; tail -n 50 "$watch_log"; exit 1; }
  done
  # The operators' command line against the same functions: a job through the Invoke API
  # (invoked until complete), an admin write and reads through the routes, a refusal's code.
  cli=("${CARGO_TARGET_DIR:-$PWD/target}/debug/standings" --api "$base" --lambda-endpoint "$base")
  verified=$("${cli[@]}" verify --json)
  python3 -c 'import json, sys; run = json.loads(sys.argv[1]); assert run["mismatches"] == 0 and run["boards"], run' "$verified"
  restored=$("${cli[@]}" restore --board points --json 2>"$run/restore.progress")
  python3 -c 'import json, sys; run = json.loads(sys.argv[1]); assert run["status"] == "complete", run' "$restored"
  # Not a terminal: the progress as lines on stderr, the JSON alone on stdout.
  grep -q "^restore: invocation 1, boards 1/1" "$run/restore.progress" || { echo "standings restore: no progress in $(cat "$run/restore.progress")" >&2; exit 1; }
  before=$("${cli[@]}" rank points u-lin --json)
  "${cli[@]}" correct points u-lin --delta 3 --reason "run-local smoke" >/dev/null
  after=$("${cli[@]}" rank points u-lin --json)
  python3 -c 'import json, sys; a, b = (json.loads(x) for x in sys.argv[1:]); assert b["score"] == a["score"] + 3, (a, b)' "$before" "$after"
  # The day Redis lost everything (only a redis-server this run started: never the caller's):
  # the journal drained, a literal FLUSHALL, and one command restores every board.
  if [ -n "$own_redis" ]; then
    "${cli[@]}" drain --json >/dev/null
    redis-cli -p "$own_redis" flushall >/dev/null
    restored=$("${cli[@]}" restore --json 2>"$run/restore-all.progress")
    python3 -c 'import json, sys; run = json.loads(sys.argv[1]); assert run["status"] == "complete" and len(run["boards"]) > 1, run' "$restored"
    grep -Eq "^restore: invocation [0-9]+, boards [0-9]+/[0-9]+, [0-9]+ lines .*journal .*\(100%\)" "$run/restore-all.progress" \
      || { echo "standings restore after FLUSHALL: no progress in $(cat "$run/restore-all.progress")" >&2; exit 1; }
    again=$("${cli[@]}" rank points u-lin --json)
    python3 -c 'import json, sys; a, b = (json.loads(x) for x in sys.argv[1:]); assert a["score"] == b["score"], (a, b)' "$after" "$again"
  fi
  "${cli[@]}" top points --limit 100 | grep -q u-lin || { echo "standings top: no u-lin in the table" >&2; exit 1; }
  if "${cli[@]}" top no-such-board 2>"$run/cli.err"; then echo "standings top of an unknown board exited 0" >&2; exit 1; fi
  grep -q unknown_board "$run/cli.err" || { echo "standings: no code in $(cat "$run/cli.err")" >&2; exit 1; }
  refused=$("${cli[@]}" --json top no-such-board || true)
  python3 -c 'import json, sys; e = json.loads(sys.argv[1])["error"]; assert (e["code"], e["status"]) == ("unknown_board", 404), e' "$refused"
  # --stack: the API and the functions found by the stack's outputs, through CloudFormation
  # (moto's here; the Invoke API the SDK's own endpoint variable names, the watch's). Without
  # the outputs the jobs would go to `<stack>-journal`, which nothing here serves.
  stack="standings-smoke-$$"
  python3 -c 'import boto3, json, sys; boto3.client("cloudformation", endpoint_url=sys.argv[1]).create_stack(StackName=sys.argv[2],
    TemplateBody=json.dumps({"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}, "Outputs": {"ApiUrl": {"Value": sys.argv[3]},
      "JournalFunctionName": {"Value": "journal"}, "ArchiveFunctionName": {"Value": "archive"}}}))' \
    "$AWS_ENDPOINT_URL_DYNAMODB" "$stack" "$base"
  stacked=$(AWS_ENDPOINT_URL_CLOUDFORMATION="$AWS_ENDPOINT_URL_DYNAMODB" "${cli[0]}" --stack "$stack" top points --limit 100 --json)
  python3 -c 'import json, sys; top = json.loads(sys.argv[1]); assert any(e["user_id"] == "u-lin" for e in top["entries"]), top' "$stacked"
  stacked=$(AWS_ENDPOINT_URL_CLOUDFORMATION="$AWS_ENDPOINT_URL_DYNAMODB" AWS_ENDPOINT_URL_LAMBDA="$base" "${cli[0]}" --stack "$stack" verify --json)
  python3 -c 'import json, sys; run = json.loads(sys.argv[1]); assert run["mismatches"] == 0 and run["boards"], run' "$stacked"
  status=0
  AWS_ENDPOINT_URL_CLOUDFORMATION="$AWS_ENDPOINT_URL_DYNAMODB" "${cli[0]}" --stack no-such-stack top points 2>"$run/cli.err" || status=$?
  if [ "$status" != 2 ] || ! grep -q "no stack named no-such-stack" "$run/cli.err"; then
    echo "standings --stack of an unknown stack: exit $status, $(cat "$run/cli.err")" >&2; exit 1
  fi
  # Poison through the local queue: dead-lettered by the queue function with its reason, as in
  # the deployed stack (the local run gives each function its template's timeout, not the
  # emulator's deadline long past, with which every message was handed back for the redrive).
  python3 - "$STANDINGS_EVENT_QUEUE_URL" "$STANDINGS_DEAD_LETTER_QUEUE_URL" <<'PY' || { tail -n 50 "$watch_log"; exit 1; }
import sys, time
import boto3
sqs = boto3.client("sqs")
events, dead = sys.argv[1], sys.argv[2]
body = '{"event_id": "poison-smoke"'
sqs.send_message(QueueUrl=events, MessageBody=body)
# Well before the redrive could move it (10 receives, 10 s apart).
until = time.time() + 45
while time.time() < until:
    answer = sqs.receive_message(QueueUrl=dead, MaxNumberOfMessages=10, WaitTimeSeconds=5, MessageAttributeNames=["All"])
    for message in answer.get("Messages", []):
        if message["Body"] == body:
            code = message.get("MessageAttributes", {}).get("error_code", {}).get("StringValue")
            assert code, f"dead-lettered without its reason: {message}"
            print(f"poison dead-lettered by the local queue function: error_code={code}")
            sys.exit(0)
sys.exit("the poison message did not reach the dead-letter queue with its reason")
PY
  echo "run-local smoke: demo loaded and checked, hotness ran, journal drained, notifications sent, page served, standings CLI ran (a restore after FLUSHALL included), poison dead-lettered"
  exit 0
fi

# The schedule: a run at the start of every minute (EventBridge's `rate(1 minute)`).
(
  while sleep $((60 - $(date +%s) % 60)); do
    summary=$(fire_hotness) && python3 scripts/local_log.py --hotness "$summary" \
      || echo "$(date +%H:%M:%S) hotness run failed" >&2
    drain=$(fire_journal) && python3 scripts/local_log.py --journal "$drain" \
      || echo "$(date +%H:%M:%S) journal drain failed" >&2
  done
) &
schedule_pid=$!

standings="${CARGO_TARGET_DIR:-$PWD/target}/debug/standings --api $base --lambda-endpoint $base"
cat <<MSG

Standings is running on $base (Redis $REDIS_URL, season table $STANDINGS_TABLE at $AWS_ENDPOINT_URL_DYNAMODB).
The live page:   $base/
Boards:          curl -s '$base/v1/boards/activity/top'
                 curl -s '$base/v1/boards/points/top?period=season'
                 curl -s '$base/v1/boards/invites/top'
A member:        curl -s '$base/v1/boards/activity/users/u-lin?around=2'
Hot videos:      curl -s '$base/v1/hot/hot-videos'   (hotness runs every minute)
Post an event:   curl -s -X POST $base/v1/events -H 'content-type: application/json' \\
                   -d '{"event_id":"e1","user_id":"alice","action":"comment","target":"article-1"}'
OpenAPI:         $base/v1/openapi.json
Operate it:      $standings top points        (the standings command, docs/operations.md#the-standings-command)
                 $standings correct points u-lin --delta 5 --reason "a late event"
Archive a finished season, then read it:
                 $standings archive --board points --season 2026-10
                 curl -s '$base/v1/boards/points/seasons/2026-10/top'
The journal:     every write, drained to s3://$STANDINGS_JOURNAL_BUCKET/journal/ every minute; restore with
                 $standings restore
Notifications:   the xp board's rank changes, sent to the bus $STANDINGS_EVENT_BUS every minute; read them with
                 aws --endpoint-url $AWS_ENDPOINT_URL_EVENTBRIDGE sqs receive-message --queue-url $STANDINGS_RANK_CHANGED_QUEUE_URL
Logs:            one line per request below; the functions' JSON logs and metrics are in
                 $watch_log
Ctrl-C stops everything.
MSG
wait "$watch_pid"
