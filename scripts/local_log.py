"""Turns what `cargo lambda watch` prints in the local run into one readable line per request
(and a line for each warning or error); everything, JSON included, stays in the log file the
banner names. In Lambda the functions log JSON lines and EMF metric blobs for CloudWatch: that
is what this reads, unchanged.

Usage: tail -F <log> | python3 scripts/local_log.py
       python3 scripts/local_log.py --hotness '<a hotness run's answer>'
       python3 scripts/local_log.py --journal '<a journal drain's answer>'
"""
import json
import sys


def readable(line):
    """The terminal's line for one log line, or None to keep it only in the file."""
    try:
        entry = json.loads(line)
    except ValueError:
        # cargo lambda watch's own lines (start-up, builds): short, and worth seeing.
        return line.rstrip("\n") or None
    if not isinstance(entry, dict) or "_aws" in entry:
        return None  # EMF metrics
    time = str(entry.get("timestamp", ""))[11:19]
    level = entry.get("level", "")
    message = entry.get("message", "")
    spans = entry.get("spans") or []
    request = next((s for s in spans if s.get("name") == "request"), {})
    if message == "request" and "status" in entry:
        method = request.get("method", "")
        route = request.get("route", "")
        board = request.get("board") or ""
        extra = f" board={board}" if board else ""
        return f"{time} {entry['status']} {method} {route}{extra} {entry.get('millis', '?')} ms"
    if level in ("WARN", "ERROR"):
        fields = {k: v for k, v in entry.items() if k not in ("timestamp", "level", "message", "target", "spans", "span")}
        return f"{time} {level} {message} {json.dumps(fields, separators=(',', ':'))}"
    return None


def hotness_line(answer):
    """One line for a scheduled hotness run: each board and its members."""
    import datetime
    run = json.loads(answer)
    boards = ", ".join(f"{b['board']} {b.get('members', '?')} members" for b in run.get("boards", []))
    return f"{datetime.datetime.now():%H:%M:%S} hotness ran: {boards or 'no boards'}"


def journal_line(answer):
    """One line for a scheduled journal drain: entries stored in S3, notifications sent, lag."""
    import datetime
    run = json.loads(answer)
    return (f"{datetime.datetime.now():%H:%M:%S} journal drained: {run.get('entries', '?')} entries, "
            f"{run.get('notifications', 0)} notifications, lag {run.get('lag_seconds', '?')} s")


def main():
    if sys.argv[1:2] == ["--hotness"]:
        print(hotness_line(sys.argv[2]))
        return
    if sys.argv[1:2] == ["--journal"]:
        print(journal_line(sys.argv[2]))
        return
    for line in sys.stdin:
        shown = readable(line)
        if shown is not None:
            print(shown, flush=True)


if __name__ == "__main__":
    main()
