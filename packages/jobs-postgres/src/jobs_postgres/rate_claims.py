"""The parts a claim under a rate limit adds (decision 0042), composed by
:mod:`jobs_postgres.claims` only when a type of the plan has one (``Shape.rated``): a plan
without a rate-limited type runs the statements it ran before, text for text.

The rule is :mod:`jobs_core.rates`, applied as :func:`jobs_core.claims.choose` applies it:

- statement 1 (the candidates) passes over the keys whose last N recorded starts are all in the
  window (``starts[N] > now - P``: the array is newest first), as it passes over full keys:
  they join ``full_keys``; it takes the advisory lock of every rate-limited key among its
  candidates (the same lock as a concurrency-limited key's, one per key);
- statement 2 (the admission, with a snapshot taken once those locks are held) counts each
  candidate key's starts in the window again, admits a candidate while that count plus the
  candidates of its key before it stays within N (and within the key's and the type's
  concurrency limits), and writes the starts of the keys it admitted: the newest N of the
  claim's ``now`` (one per job started) and the key's starts (:func:`jobs_core.rates.recorded`),
  in the same statement as the claim.

Only claimers of the same key wait for each other, and only for that short transaction; a
claimer of other keys reads the key rows of its plan's rate-limited types (one primary key
range per type) and nothing else.
"""

from __future__ import annotations

from typing import Any

from jobs_core.flow import ClaimLimits

# The limits with the rate columns: ``rate_n`` (N) and ``since`` (the window's start, ``now``
# minus the period), NULL for a type without a rate limit.
LIMITS = """lim AS (
    SELECT l.type, l.key_limit, l.type_limit, l.rate_n,
           CAST(:now AS timestamptz) - make_interval(secs => l.rate_s) AS since
    FROM unnest(
        CAST(:lim_types AS text[]), CAST(:key_limits AS int[]), CAST(:type_limits AS int[]),
        CAST(:rate_counts AS int[]), CAST(:rate_periods AS float8[])
    ) AS l(type, key_limit, type_limit, rate_n, rate_s)
)"""

# Added to ``full_keys``: the rate-limited keys with N starts in the window. Index: the primary
# key of job_rate_keys, one range per rate-limited type.
SPENT_KEYS = """
    UNION ALL
    SELECT k.type, k.key FROM job_rate_keys AS k JOIN lim AS l USING (type)
    WHERE l.rate_n IS NOT NULL AND k.starts[l.rate_n] > l.since"""

# A key's advisory lock is taken for a concurrency limit or a rate limit.
KEY_LOCKED = "(l.key_limit IS NOT NULL OR l.rate_n IS NOT NULL)"

# The columns statement 2's ``candidate`` adds: its type's rate and its key's starts in the
# window (the key's row found by primary key).
CANDIDATE_COLUMNS = """, l.rate_n,
           coalesce((SELECT count(*) FROM unnest(rk.starts) AS s WHERE s > l.since), 0)
               AS key_started"""
CANDIDATE_JOIN = """
    LEFT JOIN job_rate_keys AS rk
        ON l.rate_n IS NOT NULL AND rk.type = c.type AND rk.key = c.concurrency_key"""

# A candidate fits its key's rate while its key's starts in the window plus the candidates of
# its key before it stay within N.
FITS = """)
      AND (c.rate_n IS NULL OR c.concurrency_key IS NULL
           OR c.key_started + c.key_rank <= c.rate_n)"""

# The starts of the keys this claim started jobs of, written with the claim: the newest N of
# ``now`` (once per job) and the key's starts (jobs_core.rates.recorded: not pruned by this
# claimer's window, which a claimer whose clock is behind would need). The key's row is read in the
# statement's snapshot, taken after its advisory lock was granted: no claimer of the key wrote
# it since. One row per key (grouped first: an upsert must not touch a row twice).
WRITTEN = [
    """rate_started AS (
    SELECT c.type, c.concurrency_key AS key, count(*) AS n
    FROM claimed AS c JOIN lim AS l ON l.type = c.type
    WHERE l.rate_n IS NOT NULL AND c.concurrency_key IS NOT NULL
    GROUP BY c.type, c.concurrency_key
)""",
    """rate_written AS (
    INSERT INTO job_rate_keys AS k (type, key, starts)
    SELECT s.type, s.key, ARRAY(
        SELECT t FROM unnest(
            array_fill(CAST(:now AS timestamptz), ARRAY[CAST(s.n AS int)])
            || coalesce(o.starts, CAST('{}' AS timestamptz[]))
        ) AS t
        ORDER BY t DESC LIMIT l.rate_n
    )
    FROM rate_started AS s JOIN lim AS l ON l.type = s.type
    LEFT JOIN job_rate_keys AS o ON o.type = s.type AND o.key = s.key
    ON CONFLICT (type, key) DO UPDATE SET starts = excluded.starts
)""",
]


ADMISSION = ("(", CANDIDATE_COLUMNS, CANDIDATE_JOIN, FITS)
"""What statement 2 adds: the parenthesis that opens the concurrency test ``FITS`` closes, the
candidate's columns, its join and ``FITS``."""


def params(limits: ClaimLimits) -> dict[str, Any]:
    """The rate parameters of a claim under ``limits`` (in ``lim_types`` order: sorted)."""
    names = sorted(limits)
    rates = [limits[name].rate for name in names]
    return {
        "rate_counts": [None if rate is None else rate.count for rate in rates],
        "rate_periods": [None if rate is None else rate.per_s for rate in rates],
    }


# "Why is this job waiting?": the starts of the job's key (its primary key), NULL for none.
WAITING_STARTS = """(SELECT k.starts FROM job_rate_keys AS k
        WHERE k.type = %(type)s AND k.key = %(key)s)"""
