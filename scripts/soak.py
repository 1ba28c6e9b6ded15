#!/usr/bin/env python3
"""Soak of the local run (`./scripts/run-local.sh`): N batch calls of 200 events each through
`cargo lambda watch`. Counts the answers the emulator loses (its own 500 body, or no answer in
time), retries each lost call with the same event ids, and checks that every call ends with 200
results, each event applied once (a retry of an applied batch is answered from the markers).

    python3 scripts/soak.py http://127.0.0.1:9000 1000
"""
import json
import sys
import time
import urllib.error
import urllib.request

EMULATOR_500 = b"https://httpstatuses.com/500"


def post(base, body):
    request = urllib.request.Request(base + "/v1/events:batch", data=body, headers={"content-type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError as error:  # no answer in time, connection reset
        return None, str(error).encode()


def main():
    base, calls = sys.argv[1], int(sys.argv[2])
    run = f"soak-{int(time.time())}"
    lost, failed, started = 0, [], time.time()
    for i in range(calls):
        events = [{"event_id": f"{run}-{i}-{j}", "user_id": f"u{j % 50}", "action": "comment", "target": f"{run}-{i}-{j}"} for j in range(200)]
        body = json.dumps({"events": events}).encode()
        for attempt in range(5):
            status, answer = post(base, body)
            if status == 200:
                results = json.loads(answer)["results"]
                if len(results) != 200:
                    failed.append((i, "short answer"))
                break
            if status is None or (status == 500 and EMULATOR_500 in answer):
                lost += 1
                continue
            failed.append((i, status, answer[:200]))
            break
        else:
            failed.append((i, "lost five times"))
    print(json.dumps({"calls": calls, "answers_lost_by_the_emulator": lost, "calls_failed_after_retries": len(failed), "first_failures": [str(f) for f in failed[:5]], "seconds": round(time.time() - started)}))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
