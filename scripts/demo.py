#!/usr/bin/env python3
"""Loads the demo workload into a running Standings through its HTTP API, then checks that the
boards answer exactly what the write receipts say.

    demo.py BASE_URL        e.g. http://127.0.0.1:9000 (the API Gateway paths)

The workload (seeded, so every run posts the same events; event ids carry the UTC date, so a
second run on the same day against the same Redis is answered as duplicates and changes nothing):
- `activity`: a small forum - authors publish articles, readers view, praise, comment, collect
  and follow, and take a few praises back;
- `points`: a study group's learning, Q&A, notes and reviews, some beyond the daily caps;
- `invites`: members inviting friends, one friend invited twice (counted once);
- `xp`: the learners' lessons and practice on the weekly league board: 35 learners fill one
  bronze cohort of 30 and open a second;
- `hot-videos`: heat on a few videos;
- `sprint-paris-<year>`: a tournament every six hours in Paris (a cron schedule) with prizes, three
  attempts for twelve members;
- display profiles (nicknames) for the forum's members.

Every event happens now: the API refuses events older than its 15-minute grace window, so there
is no backdating; "a month of points" is many members' points today, in this month's season.

Checks: every event is accepted; each cumulative board's top list equals the sum of the deltas
its receipts report, member by member (and `invite_count` the invites counted); the hot board
lists exactly the heated videos, each at the heat the receipts report when the board was
synthesized within the hour the heat landed in. Exits non-zero on any difference.

With STANDINGS_EVENT_QUEUE_URL set (scripts/run-local.sh sets it), the `high-scores` game's
submissions go through the SQS queue instead (boto3, which moto_server brings), each sent
twice as at-least-once delivery may, and the board is checked once the `queue` function has
applied them. Otherwise standard library only.
"""
import datetime
import json
import os
import time
import random
import sys
import urllib.error
import urllib.request
from collections import Counter, defaultdict

BATCH = 500  # the API's batch limit
# `cargo lambda watch` now and then loses a function's answer under CPU load (more often the
# larger it is) and answers its own 500, a problem+json body without our `error` field. Every
# call here is idempotent (event ids, whole profiles), so such a call is retried.
EMULATOR_RETRIES = 4
HOT_BOARD = "hot-videos"
LAP_BOARD = "lap-times"  # a score board where lower is better: each member's best lap is kept

MEMBERS = [
    ("lin", "Lin Yue"), ("mei", "Mei Chen"), ("hao", "Hao Zhang"), ("an", "An Nguyen"),
    ("bao", "Bao Tran"), ("chi", "Chi Le"), ("dung", "Dung Pham"), ("qing", "Qing Wu"),
    ("jun", "Jun Li"), ("xiu", "Xiu Ying"), ("minh", "Minh Vo"), ("lan", "Lan Do"),
    ("ping", "Ping Zhao"), ("tuan", "Tuan Hoang"), ("wei", "Wei Sun"), ("yen", "Yen Bui"),
    ("kai", "Kai Huang"), ("ngoc", "Ngoc Dang"), ("rui", "Rui Guo"), ("son", "Son Ly"),
]


class Api:
    def __init__(self, base):
        self.base = base.rstrip("/")

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(EMULATOR_RETRIES + 1):
            request = urllib.request.Request(self.base + path, data=data, method=method, headers={"content-type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    return response.status, json.loads(response.read() or b"null")
            except urllib.error.HTTPError as error:
                status, answer = error.code, json.loads(error.read() or b"null")
            lost_by_emulator = status == 500 and isinstance(answer, dict) and "error" not in answer
            if not lost_by_emulator or attempt == EMULATOR_RETRIES:
                return status, answer
            print(f"demo: {method} {path}: the emulator lost the answer, retrying", file=sys.stderr)

    def ok(self, method, path, body=None):
        status, answer = self.call(method, path, body)
        if status != 200:
            sys.exit(f"demo: {method} {path} answered {status}: {answer}")
        return answer


def workload(rng, day):
    """(events, heat): the scored events and the heat calls, each with its own id."""
    ids = (f"demo-{day}-{n:05d}" for n in range(1_000_000))
    events, heat = [], []

    def event(user, action, target=None, active=True):
        e = {"event_id": next(ids), "user_id": f"u-{user}", "action": action}
        if target is not None:
            e["target"] = target
        if not active:
            e["active"] = False
        events.append(e)

    members = [m for m, _ in MEMBERS]
    authors = members[:6]
    articles = {f"/articles/{n:02d}": rng.choice(authors) for n in range(1, 13)}
    for article, author in articles.items():
        event(author, "publish", article)
    for reader in members:
        for article in rng.sample(sorted(articles), rng.randint(3, 10)):
            event(reader, "page_view", article)
            for action, chance in (("praise", 0.6), ("comment", 0.3), ("collect", 0.2)):
                if rng.random() < chance:
                    event(reader, action, article)
        for author in rng.sample(authors, 2):
            if author != reader:
                event(reader, "follow", f"u-{author}")
    for reader in rng.sample(members, 4):  # changed their minds: take a praise back
        praised = [e["target"] for e in events if e["user_id"] == f"u-{reader}" and e["action"] == "praise"]
        if praised:
            event(reader, "praise", praised[0], active=False)

    learners = [f"learner-{n:02d}" for n in range(1, 41)]
    for learner in learners:
        for _ in range(rng.randint(1, 7)):  # more than five hit the 50-a-day cap
            event(learner, "learning", f"lesson-{rng.randint(1, 30)}")
        for _ in range(rng.randint(0, 5)):
            event(learner, "qa", f"question-{rng.randint(1, 99)}")
        for _ in range(rng.randint(0, 8)):
            event(learner, "note", f"note-{rng.randint(1, 99)}")
        for course in rng.sample(range(1, 9), rng.randint(0, 3)):
            event(learner, "review", f"course-{course}")

    for learner in learners[:35]:
        for _ in range(rng.randint(1, 4)):
            event(learner, "lesson")
        for _ in range(rng.randint(0, 3)):
            event(learner, "practice")

    inviters = rng.sample(members, 8)
    for inviter in inviters:
        for n in range(rng.randint(1, 6)):
            event(inviter, "invite", f"guest-{inviter}-{n}")
    event(inviters[1], "invite", f"guest-{inviters[0]}-0")  # already invited by another: counts once

    for video in range(1, 16):
        for _ in range(rng.randint(1, 6)):
            heat.append((f"video-{video:02d}", {"event_id": next(ids), "delta": rng.randint(1, 50)}))
    return events, heat


def load(api, events, heat):
    """Posts everything; answers the receipts."""
    for user, nickname in MEMBERS:
        api.ok("PUT", f"/v1/users/u-{user}/profile", {"nickname": nickname})
    receipts = []
    for start in range(0, len(events), BATCH):
        results = api.ok("POST", "/v1/events:batch", {"events": events[start:start + BATCH]})["results"]
        failed = [r for r in results if "error" in r]
        if failed:
            sys.exit(f"demo: events refused: {failed[:3]}")
        receipts.extend(results)
    heat_receipts = [api.ok("POST", f"/v1/hot/{HOT_BOARD}/items/{item}", body) for item, body in heat]
    return receipts, heat_receipts


def check_boards(api, events, receipts):
    """Each cumulative board's top list against the receipts' deltas."""
    expected = defaultdict(Counter)
    counted = defaultdict(Counter)
    for event, receipt in zip(events, receipts):
        user = event["user_id"]
        for result in receipt["results"]:
            expected[result["board"]][user] += result["delta"]
            counted[result["board"]][user] += result["applied"] and result["delta"] > 0
    for board, scores in sorted(expected.items()):
        top = api.ok("GET", f"/v1/boards/{board}/top?limit=1000")
        shown = {entry["user_id"]: entry["score"] for entry in top["entries"]}
        wanted = {user: score for user, score in scores.items() if score > 0}
        if shown != wanted:
            sys.exit(f"demo: {board} shows {shown}, its receipts say {wanted}")
        for entry in top["entries"]:
            count = next((value for key, value in entry.items() if key.endswith("_count")), None)
            if count is not None and count != counted[board][entry["user_id"]]:
                sys.exit(f"demo: {board} counts {count} for {entry['user_id']}, its receipts {counted[board][entry['user_id']]}")
        print(f"  {board}: {len(shown)} members, top {top['entries'][0]['user_id']} with {top['entries'][0]['score']} ({top['period']} {top['period_id']})")


def laps(api, rng, day):
    """Three lap times (ms) per member on the lap board; its top must list each member's
    fastest, fastest first."""
    best = {}
    for user, _ in MEMBERS:
        for n in range(3):
            lap = rng.randint(58_000, 75_000)
            api.ok("POST", f"/v1/boards/{LAP_BOARD}/scores", {"event_id": f"lap-{day}-{user}-{n}", "user_id": f"u-{user}", "score": lap})
            best[f"u-{user}"] = min(lap, best.get(f"u-{user}", lap))
    top = api.ok("GET", f"/v1/boards/{LAP_BOARD}/top?limit=1000")
    shown = [(entry["user_id"], entry["score"]) for entry in top["entries"]]
    wanted = sorted(best.items(), key=lambda pair: pair[1])
    if [score for _, score in shown] != [score for _, score in wanted] or dict(shown) != best:
        sys.exit(f"demo: {LAP_BOARD} shows {shown}, the submissions say {wanted}")
    print(f"  {LAP_BOARD}: {len(shown)} members, fastest {shown[0][0]} in {shown[0][1]} ms ({top['period']} {top['period_id']})")


def tournament(api):
    """A tournament for the year on a cron schedule in Paris (an instance at midnight, 06:00,
    12:00 and 18:00 Paris time, three attempts, prizes for the top three), defined again on
    every run (the same body: 200), and a round of the open instance (its event ids name the
    instance, the local minute it opened); its top must list each member's best kept score, best
    first."""
    # Paris is UTC+1 at New Year (no summer time then): its year, whatever the machine's zone.
    year = str((datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)).year)
    tournament_id = f"sprint-paris-{year}"
    definition = {
        "title": "Sprint", "description": "Three attempts every six hours; the best one counts.", "category": "sprint",
        "keep": "best", "order": "desc", "start": f"{year}-01-01T00:00:00+01:00", "end": f"{int(year) + 1}-01-01T00:00:00+01:00",
        "cron": "0 */6 * * *", "timezone": "Europe/Paris", "duration_secs": 21600, "max_entries": 3, "join_required": False,
        "prizes": [{"ranks": [1, 1], "reward": {"badge": "gold"}}, {"ranks": [2, 3], "reward": {"badge": "silver"}}],
    }
    status, answer = api.call("PUT", f"/v1/admin/tournaments/{tournament_id}", definition)
    if status not in (200, 201):
        sys.exit(f"demo: PUT /v1/admin/tournaments/{tournament_id} answered {status}: {answer}")
    # The open instance is the one the server names (no timezone database needed here).
    day = api.ok("GET", f"/v1/tournaments/{tournament_id}")["instance"]
    rng = random.Random(day + "t")
    best = {}
    for user, _ in MEMBERS[:12]:
        for n in range(3):
            score = rng.randint(1_000, 9_999)
            api.ok("POST", f"/v1/tournaments/{tournament_id}/scores", {"event_id": f"sprint-{day}-{user}-{n}", "user_id": f"u-{user}", "score": score})
            best[f"u-{user}"] = max(score, best.get(f"u-{user}", score))
    top = api.ok("GET", f"/v1/tournaments/{tournament_id}/top?limit=100")
    shown = [(entry["user_id"], entry["score"]) for entry in top["entries"]]
    if [score for _, score in shown] != sorted(best.values(), reverse=True) or dict(shown) != best:
        sys.exit(f"demo: {tournament_id} shows {shown}, the submissions say {best}")
    # What the live page's panel asks: the open ones, a page of 20, walked by its cursor.
    listed, cursor = [], ""
    while True:
        page = api.ok("GET", f"/v1/tournaments?state=open&limit=20{cursor}")
        listed += [entry for entry in page["tournaments"] if entry["tournament_id"] == tournament_id]
        if not page.get("next_cursor"):
            break
        cursor = f"&cursor={page['next_cursor']}"
    if [(entry["instance"], entry["size"]) for entry in listed] != [(top["instance"], len(shown))]:
        sys.exit(f"demo: GET /v1/tournaments?state=open lists {tournament_id} as {listed}, its top shows {len(shown)} players in {top['instance']}")
    print(f"  {tournament_id}: {len(shown)} players in this instance ({top['instance']}), first {shown[0][0]} with {shown[0][1]}, listed open")


def check_league(api):
    """Every learner on `xp` this week is in exactly one cohort of at most 30 (or waits for
    last week's close, which the local run does not schedule), shown best first with its zones."""
    top = api.ok("GET", "/v1/boards/xp/top?limit=1000")
    players = {entry["user_id"] for entry in top["entries"]}
    listing = api.ok("GET", "/v1/boards/xp/leagues")
    sizes = [c["size"] for tier in listing["tiers"] for c in tier["cohorts"]]
    waiting = sum(api.ok("GET", f"/v1/boards/xp/users/{user}/league")["waiting"] for user in sorted(players))
    if sum(sizes) + waiting != len(players) or any(size > listing["cohort_size"] for size in sizes):
        sys.exit(f"demo: xp has {len(players)} players this week, its cohorts hold {sizes}, {waiting} wait")
    for user in sorted(players)[:3]:
        league = api.ok("GET", f"/v1/boards/xp/users/{user}/league")
        scores = [entry["score"] for entry in league["entries"]]
        placed = user in {e["user_id"] for e in league["entries"]}
        if placed == league["waiting"] or scores != sorted(scores, reverse=True):
            sys.exit(f"demo: {user}'s league is {league}")
    print(f"  xp: {len(players)} players in {len(sizes)} cohorts of {listing['cohort_size']} ({listing['period_id']})")


def check_hot(api, heat, heat_receipts):
    final = {}  # (item, bucket) -> the item's heat in that bucket after its last call
    for (item, _), receipt in zip(heat, heat_receipts):
        final[(item, receipt["bucket"])] = receipt["heat"]
    board = api.ok("GET", f"/v1/hot/{HOT_BOARD}?limit=1000")
    shown = {entry["item_id"]: entry["score"] for entry in board["entries"]}
    if set(shown) != {item for item, _ in final}:
        sys.exit(f"demo: {HOT_BOARD} lists {sorted(shown)}, heat went to {sorted({i for i, _ in final})}")
    synthesized_hour = (board["synthesized_at"] or "")[:13]
    if all(bucket[:13] == synthesized_hour for _, bucket in final):  # weight 1.0: exact heat
        for (item, _), value in final.items():
            if shown[item] != value:
                sys.exit(f"demo: {HOT_BOARD} shows {item} at {shown[item]}, its receipts at {value}")
    print(f"  {HOT_BOARD}: {len(shown)} videos, synthesized at {board['synthesized_at']}")


def queued_scores(api, url, rng, day):
    """High scores through the queue, every message twice; the board must keep each best once."""
    import boto3  # only here: the rest of the demo needs nothing beyond the standard library

    sqs = boto3.client("sqs", region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    best = {}
    bodies = []
    for n in range(40):
        member = rng.choice(MEMBERS)[0]
        score = rng.randrange(100, 5000)
        best[member] = max(best.get(member, 0), score)
        body = json.dumps({"kind": "score", "board": "high-scores", "event_id": f"hs-{day}-{n}", "user_id": f"u-{member}", "score": score})
        bodies += [body, body]
    for start in range(0, len(bodies), 10):
        entries = [{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies[start : start + 10])]
        if sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed"):
            sys.exit("demo: the queue refused messages")
    expected = {f"u-{m}": b for m, b in best.items()}
    for _ in range(120):
        status, top = api.call("GET", "/v1/boards/high-scores/top?period=day&limit=100")
        got = {e["user_id"]: e["score"] for e in (top or {}).get("entries", [])} if status == 200 else {}
        if all(got.get(user) == score for user, score in expected.items()):
            break
        time.sleep(0.5)
    else:
        sys.exit(f"demo: the queue's high scores never arrived: {got} != {expected}")
    print(f"demo: {len(bodies)} queue messages ({len(bodies) // 2} submissions, each sent twice), high-scores checked")


def main(base):
    api = Api(base)
    day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d")
    events, heat = workload(random.Random(20261122), day)
    receipts, heat_receipts = load(api, events, heat)
    fresh = sum(not r["duplicate"] for r in receipts)
    print(f"demo: {len(events)} events ({fresh} new), {len(heat)} heat calls, {len(MEMBERS)} profiles")
    check_boards(api, events, receipts)
    laps(api, random.Random(day), day)
    tournament(api)
    check_league(api)
    check_hot(api, heat, heat_receipts)
    if os.environ.get("STANDINGS_EVENT_QUEUE_URL"):
        queued_scores(api, os.environ["STANDINGS_EVENT_QUEUE_URL"], random.Random(day + "q"), day)


if __name__ == "__main__":
    main(*sys.argv[1:])
