"""Flow control on PostgreSQL: "why is this job waiting?" and the registry of live workers
(decision 0015). The claim under concurrency limits is built with every other claim, by
:mod:`jobs_postgres.claims` (decision 0027).
"""

from __future__ import annotations

from jobs_postgres import rate_claims


def waiting_facts() -> str:
    """The counts of "why is this job waiting?" for one job (psycopg syntax).

    Index: jobs_queue_idx, its ``running`` range for the running counts and its queued range
    for the jobs ahead (up to the cap); the worker table is small; the pause and the key's
    recorded starts (a rate limit's): their primary keys.
    """
    return (
        """
SELECT
    (SELECT count(*) FROM jobs AS r WHERE r.status = 'running' AND r.type = %(type)s
        AND r.concurrency_key = %(key)s),
    (SELECT count(*) FROM jobs AS r WHERE r.status = 'running' AND r.type = %(type)s),
    (SELECT count(*) FROM (
        SELECT 1 FROM jobs AS q
        WHERE q.status = 'queued' AND q.type = %(type)s AND q.run_at <= %(now)s
          AND (q.priority > %(priority)s OR (q.priority = %(priority)s
               AND (q.created_at, q.id) < (%(created_at)s, %(id)s)))
        LIMIT %(cap)s
    ) AS ahead),
    (SELECT count(*) FROM job_workers AS w
        WHERE %(type)s = ANY(w.types) AND w.last_seen_at >= %(live_after)s),
    EXISTS (SELECT 1 FROM job_type_pauses AS p WHERE p.type = %(type)s),
    """
        + rate_claims.WAITING_STARTS
        + "\n"
    )


# -- the worker registry (jobs_core.workers) ---------------------------------------------------

FORGET_SILENT = "DELETE FROM job_workers WHERE last_seen_at < %(live_after)s"
REGISTER = """
INSERT INTO job_workers (id, host, pid, types, concurrency, started_at, last_seen_at)
VALUES (%(id)s, %(host)s, %(pid)s, %(types)s, %(concurrency)s, %(started_at)s, %(last_seen_at)s)
ON CONFLICT (id) DO UPDATE SET last_seen_at = excluded.last_seen_at
"""
SEEN = "UPDATE job_workers SET last_seen_at = %(now)s WHERE id = %(id)s RETURNING id"
UNREGISTER = "DELETE FROM job_workers WHERE id = %(id)s"
LIVE = """
SELECT id, host, pid, types, concurrency, started_at, last_seen_at FROM job_workers
WHERE last_seen_at >= %(live_after)s ORDER BY started_at, id
"""
