"""Flow control on PostgreSQL: the claim under concurrency limits, "why is this job waiting?"
and the registry of live workers (decision 0015).

The rule is :func:`jobs_core.flow.admit`; this module applies it in SQL so it holds across every
process and machine. A claim under limits is one short transaction of two statements:

1. ``LOCK_CANDIDATES`` walks ``jobs_queue_idx`` in claim order, passing over the jobs whose key
   or type is full in its snapshot (a filter against the arrays of full keys and types), locks
   up to ``limit`` candidates ``FOR UPDATE SKIP LOCKED``,
   then takes one transaction-level advisory lock per limited key (and per capped type) of the
   candidates, in ascending lock-id order (so two claimers never deadlock);
2. ``CLAIM_ADMITTED`` starts with a new snapshot, taken once those locks are held: it sees every
   claim of the same keys that committed before, counts the running jobs of each key and type
   again and claims only the candidates that fit.

Two claimers of the same key are thus serialised by the advisory lock, not by a table lock:
the second one's count includes the first one's jobs. Nothing else makes a job running, and every
end of a job (done, failed, cancelled, swept, timed out, snoozed) lowers the count when it
commits. A candidate that does not fit is left queued, untouched (no attempt spent).
"""

from __future__ import annotations

from typing import Any

from jobs_core.flow import ClaimLimits

from jobs_postgres.sql import LOG_CLAIMED, claim_set

# Lock ids: hashtextextended(text, seed), one seed per kind so a key and a type never share one.
_KEY_LOCK = "hashtextextended(d.type || chr(31) || d.concurrency_key, 1501)"
_TYPE_LOCK = "hashtextextended(d.type, 1502)"

_LIMITS = """lim AS (
    SELECT * FROM unnest(
        CAST(%(lim_types)s AS text[]), CAST(%(key_limits)s AS int[]),
        CAST(%(type_limits)s AS int[])
    ) AS l(type, key_limit, type_limit)
),
running AS (
    SELECT r.type, r.concurrency_key FROM jobs AS r
    WHERE r.status = 'running' AND r.type = ANY(CAST(%(lim_types)s AS text[]))
)"""


# For this transaction only: the walk of statement 1 must be the ordered index scan that stops
# after ``limit`` rows. With every row of the table queued, or estimates of the filters that
# are off, the planner otherwise picks a scan of the whole queue and a sort (FOR UPDATE rules
# out a top-N sort): 300-460 ms at 100,000 queued jobs instead of a fraction of a millisecond.
PLANNER = "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off"


def lock_candidates(with_types: bool) -> str:
    """Statement 1 of a claim under limits (psycopg syntax): the ids of the locked candidates.

    Index: jobs_queue_idx for the walk (its queued range in claim order: it stops after
    ``limit`` candidates), and its ``running`` range for the running set (small: one row per
    busy slot).
    """
    type_filter = "AND j.type = ANY(CAST(%(types)s AS text[]))" if with_types else ""
    return f"""
WITH {_LIMITS},
full_keys AS (
    SELECT r.type, r.concurrency_key FROM running AS r JOIN lim AS l USING (type)
    WHERE r.concurrency_key IS NOT NULL AND l.key_limit IS NOT NULL
    GROUP BY r.type, r.concurrency_key, l.key_limit HAVING count(*) >= l.key_limit
),
full_types AS (
    SELECT r.type FROM running AS r JOIN lim AS l USING (type)
    WHERE l.type_limit IS NOT NULL
    GROUP BY r.type, l.type_limit HAVING count(*) >= l.type_limit
),
due AS (
    SELECT j.id, j.type, j.concurrency_key FROM jobs AS j
    WHERE j.status = 'queued' AND j.run_at <= %(now)s {type_filter}
      -- the jobs re-queued by the finish this claim follows (never claimed back by it)
      AND j.id <> ALL(CAST(%(exclude)s AS uuid[]))
      -- scalar filters against arrays built once (InitPlans), never joins: the walk stays an
      -- ordered scan of the index that stops after ``limit`` rows whatever the estimates
      AND j.type <> ALL(ARRAY(SELECT t.type FROM full_types AS t))
      AND (j.concurrency_key IS NULL OR j.type || chr(31) || j.concurrency_key <> ALL(
          ARRAY(SELECT f.type || chr(31) || f.concurrency_key FROM full_keys AS f)
      ))
    ORDER BY j.priority DESC, j.created_at, j.id
    LIMIT %(limit)s
    FOR UPDATE OF j SKIP LOCKED
),
locks AS (
    SELECT pg_advisory_xact_lock(k.id) FROM (
        SELECT {_KEY_LOCK} AS id FROM due AS d JOIN lim AS l USING (type)
        WHERE l.key_limit IS NOT NULL AND d.concurrency_key IS NOT NULL
        UNION
        SELECT {_TYPE_LOCK} FROM due AS d JOIN lim AS l USING (type)
        WHERE l.type_limit IS NOT NULL
        ORDER BY 1
    ) AS k
)
SELECT d.id FROM due AS d CROSS JOIN (SELECT count(*) FROM locks) AS held
"""


def claim_admitted(columns: str) -> str:
    """Statement 2: claim the candidates (locked by statement 1) that fit, counted afresh.

    A candidate fits when the running jobs of its key plus the candidates of that key before
    it stay under the key's limit, and likewise for its type among the candidates that fit
    their key (:func:`jobs_core.flow.admit`, in SQL). Index: the primary key for the
    candidates, jobs_queue_idx's ``running`` range for the counts.
    """
    return f"""
WITH {_LIMITS},
key_running AS (
    SELECT type, concurrency_key, count(*) AS n FROM running
    WHERE concurrency_key IS NOT NULL GROUP BY type, concurrency_key
),
type_running AS (SELECT type, count(*) AS n FROM running GROUP BY type),
candidate AS (
    SELECT c.id, c.type, c.concurrency_key, c.priority, c.created_at, l.key_limit,
           l.type_limit, kr.n AS key_running
    FROM jobs AS c
    LEFT JOIN lim AS l ON l.type = c.type
    LEFT JOIN key_running AS kr ON kr.type = c.type AND kr.concurrency_key = c.concurrency_key
    WHERE c.id = ANY(CAST(%(ids)s AS uuid[]))
),
key_fit AS (
    SELECT c.*, row_number() OVER (
        PARTITION BY c.type ORDER BY c.priority DESC, c.created_at, c.id
    ) AS type_rank
    FROM (
        SELECT c.*, row_number() OVER (
            PARTITION BY c.type, c.concurrency_key ORDER BY c.priority DESC, c.created_at, c.id
        ) AS key_rank
        FROM candidate AS c
    ) AS c
    WHERE c.key_limit IS NULL OR c.concurrency_key IS NULL
       OR coalesce(c.key_running, 0) + c.key_rank <= c.key_limit
),
due AS (
    SELECT k.id FROM key_fit AS k LEFT JOIN type_running AS tr ON tr.type = k.type
    WHERE k.type_limit IS NULL OR coalesce(tr.n, 0) + k.type_rank <= k.type_limit
),
claimed AS (
    UPDATE jobs AS j
    {claim_set("%(now)s")}
    WHERE j.id = ANY(ARRAY(SELECT id FROM due))
    RETURNING {columns}
),
{LOG_CLAIMED}
SELECT * FROM claimed
"""


def limit_params(limits: ClaimLimits) -> dict[str, Any]:
    """The ``lim`` parameters of both statements."""
    names = sorted(limits)
    return {
        "lim_types": names,
        "key_limits": [limits[name].key_limit for name in names],
        "type_limits": [limits[name].type_limit for name in names],
    }


def waiting_facts() -> str:
    """The counts of "why is this job waiting?" for one job (psycopg syntax).

    Index: jobs_queue_idx, its ``running`` range for the running counts and its queued range
    for the jobs ahead (up to the cap); the worker table is small.
    """
    return """
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
        WHERE %(type)s = ANY(w.types) AND w.last_seen_at >= %(live_after)s)
"""


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
