"""The parts of statement 1 of a claim under limits (:mod:`jobs_postgres.claims`, decision
0015): the limits and the running set, the keys and types already full, the advisory locks of
the candidates' limited keys and types, and the claim of the candidates of unlimited types,
which fit whatever runs. Statement 2 (the admission) is built in :mod:`jobs_postgres.claims`."""

from __future__ import annotations

from jobs_postgres import rate_claims, sql
from jobs_postgres.job_rows import columns

# Statement 1 under limits: the limits, the running set, the full keys and types.
_LIM = """lim AS (
    SELECT * FROM unnest(
        CAST(:lim_types AS text[]), CAST(:key_limits AS int[]), CAST(:type_limits AS int[])
    ) AS l(type, key_limit, type_limit)
)"""
_RUNNING = """running AS (
    SELECT r.type, r.concurrency_key FROM jobs AS r
    WHERE r.status = 'running' AND r.type = ANY(CAST(:lim_types AS text[]))
)"""


def limits(rated: bool) -> str:
    """The ``lim`` and ``running`` CTEs of both statements (with the rate columns if ``rated``)."""
    return f"{rate_claims.LIMITS if rated else _LIM},\n{_RUNNING}"


FULL_SETS = """full_keys AS (
    SELECT r.type, r.concurrency_key FROM running AS r JOIN lim AS l USING (type)
    WHERE r.concurrency_key IS NOT NULL AND l.key_limit IS NOT NULL
    GROUP BY r.type, r.concurrency_key, l.key_limit HAVING count(*) >= l.key_limit{spent}
),
full_types AS (
    SELECT r.type FROM running AS r JOIN lim AS l USING (type)
    WHERE l.type_limit IS NOT NULL
    GROUP BY r.type, l.type_limit HAVING count(*) >= l.type_limit
)"""

# Lock ids: hashtextextended(text, seed), one seed per kind so a key and a type never share one.
# A key limited by concurrency, rate or both has one lock.
KEY_LIMITED = "l.key_limit IS NOT NULL"
ADVISORY = """locks AS (
    SELECT pg_advisory_xact_lock(k.id) FROM (
        SELECT hashtextextended(d.type || chr(31) || d.concurrency_key, 1501) AS id
        FROM due AS d JOIN lim AS l USING (type)
        WHERE {key_locked} AND d.concurrency_key IS NOT NULL
        UNION
        SELECT hashtextextended(d.type, 1502) FROM due AS d JOIN lim AS l USING (type)
        WHERE l.type_limit IS NOT NULL
        ORDER BY 1
    ) AS k
)"""

# Statement 1 also claims its candidates of the types without a limit: they fit whatever runs
# (jobs_core.flow.admit counts only the limited types), so they need no second look. It returns,
# in its candidates' order, each claimed row (``pending`` NULL) and the id of each candidate of a
# limited type (``pending``; its columns NULL), which statement 2 admits or leaves queued. A
# claim whose candidates are all of unlimited types (a worker that serves a limited type, but
# whose queue holds other jobs) is then one statement, not two. ``row_number() OVER ()`` numbers
# ``due`` in the order it was chosen, which the join would not keep.
CLAIMED_FREE = f"""claimed AS (
    UPDATE jobs AS j
    {sql.claim_set(":now")}
    WHERE j.id = ANY(ARRAY(
        SELECT d.id FROM due AS d WHERE d.type <> ALL(ARRAY(SELECT l.type FROM lim AS l))
    ))
    RETURNING {columns("j")}
)"""
CANDIDATES = """SELECT CASE WHEN c.id IS NULL THEN d.id END AS pending, c.*
FROM (SELECT d.id, row_number() OVER () AS rank FROM due AS d) AS d
LEFT JOIN claimed AS c ON c.id = d.id
CROSS JOIN (SELECT count(*) FROM locks) AS held
ORDER BY d.rank"""
