"""Reads the journal's objects under DIR with DuckDB (from PyPI, a reader nobody here wrote) the
way docs/journal.md tells Athena/DuckDB users to: newline-delimited JSON, Hive partitions.
Prints [[event_id, board, times seen], ...] for the events (kind = 'event')."""
import json
import sys

import duckdb

root = sys.argv[1]
rows = duckdb.sql(
    f"""
    SELECT event_id, board, count(*) AS n
    FROM read_json('{root}/**/*.jsonl', format = 'newline_delimited', hive_partitioning = true,
                   union_by_name = true)
    WHERE kind = 'event'
    GROUP BY event_id, board
    ORDER BY event_id
    """
).fetchall()
print(json.dumps([[r[0], r[1], r[2]] for r in rows]))
