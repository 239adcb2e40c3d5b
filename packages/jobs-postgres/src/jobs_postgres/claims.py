"""The claim and the finish on PostgreSQL: one builder for every claim (decision 0027).

A :class:`jobs_core.claims.ClaimPlan` says what a claim selects (types, concurrency limits,
fairness between orgs, how many); :func:`statements` composes its SQL from the parts it needs,
the steps of :func:`jobs_core.claims.choose` one for one:

1. the walk of the due jobs (``_walk``; never of a paused type: ``_DUE`` reads
   ``job_type_pauses``), filtered by the plan's types and, under limits, by the
   keys and types already full (``_FULL``); in claim order (:func:`claim_order`, the one ORDER BY
   of every claim), or in fair order (``_fair``: each org's head first, orgs in turn);
2. it locks up to ``:limit`` candidates ``FOR UPDATE SKIP LOCKED``: concurrent claimers never
   wait on nor take the same job;
3. without limits, the same statement claims them (``claim_set``) and logs the claim; under
   limits, the statement claims its candidates of the types without a limit (they always fit)
   and takes one advisory lock per limited key and type of the others, in ascending lock-id
   order; a second statement of the same transaction, only if there are such others, with a
   snapshot taken once those locks are held, counts the running jobs again and claims those
   that fit, in the order the first one chose (``_admitted``). A plan with a rate-limited type
   adds the parts of :mod:`jobs_postgres.rate_claims` to both (decision 0042).

Why two statements under limits: two claimers of one key are serialised by its advisory lock,
and the second one's count must include the first one's claim, committed while it waited; only
a snapshot taken after the lock is granted sees it. Nothing else makes a job running, and every
end of a job lowers the count when it commits. A candidate that does not fit is left queued,
untouched (no attempt spent).

The finish (``_finish_parts``) assigns each outcome to the row its attempt holds; with a claim it
is one statement (one round trip, one commit: decision 0006), whose claim sees the statement's
snapshot (a job the finish re-queues is still running for it). Under limits the finish commits
first and the limited claim runs after it, told which jobs the finish re-queued.

Row locks, always in one order (no deadlock, issue 22): the finish reads its outcomes sorted by
id and so locks its rows in ascending id order; a sweep's patch (one with ``seen_at``) is taken
only if its row is free (``SKIP LOCKED``): a row somebody holds is a job showing life. The
claims never wait on a row.

Indexes: ``jobs_queue_idx`` (``status, priority DESC, created_at, id``, partial on queued and
running) for the walk, read in claim order and stopped after ``limit`` rows; the fair claim's
skip scan of ``jobs_org_queue_idx``; the primary key for everything found by id.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from jobs_core.claims import ClaimPlan
from jobs_core.flow import ClaimLimits
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from jobs_postgres import limit_claims, rate_claims, sql
from jobs_postgres.job_rows import columns

_DIALECT = psycopg_dialect.dialect()  # type: ignore[no-untyped-call]


def claim_order(alias: str) -> str:
    """The claim order of rows ``alias`` (:func:`jobs_core.domain.claim_order`): higher priority
    first, then oldest. Every claim walks ``jobs_queue_idx`` in exactly this order."""
    return f"{alias}.priority DESC, {alias}.created_at, {alias}.id"


def _fair_rank(alias: str) -> str:
    """The fair order (:func:`jobs_core.flow.fair_order`): the claim order with, within a
    priority, the heads of the orgs (``tier`` 0) first, orgs after the turn's (``wrapped``
    false) first, then by org."""
    return (
        f"{alias}.priority DESC, {alias}.tier, {alias}.wrapped, {alias}.org, "
        f"{alias}.created_at, {alias}.id"
    )


@dataclass(frozen=True, slots=True)
class Shape:
    """What the text of a claim depends on (its values are parameters)."""

    types: bool
    fair: bool
    limited: bool
    finish: bool
    sweep: bool = False
    rated: bool = False

    @classmethod
    def of(cls, plan: ClaimPlan, *, finish: bool = False, sweep: bool = False) -> Shape:
        return cls(
            plan.types is not None, plan.fair, plan.limited, finish, finish and sweep, plan.rated
        )


def parameters(plan: ClaimPlan) -> dict[str, Any]:
    """The parameters of the statements of ``plan``."""
    params: dict[str, Any] = {"now": plan.now, "limit": plan.limit}
    if plan.types is not None:
        params["types"] = list(plan.types)
    if plan.turn is not None:
        params["after"] = plan.turn.after
    if plan.limits:
        params.update(limit_params(plan.limits))
        if plan.rated:
            params.update(rate_claims.params(plan.limits))
    return params


def limit_params(limits: ClaimLimits) -> dict[str, Any]:
    """The ``lim`` parameters of a claim under limits."""
    names = sorted(limits)
    return {
        "lim_types": names,
        "key_limits": [limits[name].key_limit for name in names],
        "type_limits": [limits[name].type_limit for name in names],
    }


# For the transaction of a claim under limits: its walk must be the ordered index scan that
# stops after ``limit`` rows. With every row of the table queued, or estimates of the filters
# that are off, the planner otherwise picks a scan of the whole queue and a sort (FOR UPDATE
# rules out a top-N sort): 300-460 ms at 100,000 queued jobs instead of a fraction of a ms.
PLANNER_SETTINGS = ("SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off")
PLANNER = "; ".join(PLANNER_SETTINGS)


# -- the parts --------------------------------------------------------------------------------

_TYPES = "AND j.type = ANY(CAST(:types AS text[]))"
# Scalar filters against arrays built once (InitPlans), never joins: the walk stays an ordered
# scan of the index that stops after ``limit`` rows whatever the estimates.
_FULL = """AND j.type <> ALL(ARRAY(SELECT t.type FROM full_types AS t))
      AND (j.concurrency_key IS NULL OR j.type || chr(31) || j.concurrency_key <> ALL(
          ARRAY(SELECT f.type || chr(31) || f.concurrency_key FROM full_keys AS f)
      ))"""
_SKIPPED = "AND j.id <> ALL(CAST(:skipped AS uuid[]))"

# Due, and not of a paused type (jobs_core.pauses): the pauses are one array built once per
# statement (an InitPlan over the few rows of job_type_pauses), a scalar filter on the rows the
# walk yields, as the type filter is. Written as array containment, not ``j.type <> ALL(...)``:
# the planner estimates ``<> ALL`` of an array it cannot see as ten ``<>`` in a row, each
# 1 - 1/(distinct types): with three types it expected 1.7 % of the queue to pass (a 58x
# underestimate), and with one type none, and chose a scan of the whole queue and a sort
# (tests/postgres/test_fair_plan.py). ``NOT (ARRAY[type] <@ ...)`` gets the operator's default
# estimate instead (99.5 % pass): the walk's plan is the one it had without pauses.
_DUE = """j.status = 'queued' AND j.run_at <= :now
      AND NOT (ARRAY[j.type] <@ ARRAY(SELECT p.type FROM job_type_pauses AS p))"""


def _walk(filters: str) -> list[str]:
    """The plain ``due`` CTE: up to ``:limit`` due jobs, locked, in claim order.

    Index: jobs_queue_idx. Its ``status = 'queued'`` range is read in claim order, so the scan
    stops after ``limit`` due rows: the finished history is not in the partial index at all.
    ``run_at``, ``type`` and the limits filter the rows it yields.
    """
    return [
        f"""due AS (
    SELECT j.id, j.type, j.concurrency_key FROM jobs AS j
    WHERE {_DUE} {filters}
    ORDER BY {claim_order("j")}
    LIMIT :limit
    FOR UPDATE OF j SKIP LOCKED
)"""
    ]


def _fair(filters: str, full: str) -> list[str]:
    """The fair ``due`` CTEs (:func:`jobs_core.flow.fair_order`); the statement is ``WITH
    RECURSIVE``. The cost grows with the number of orgs that have queued jobs (two index probes
    per org), never with the size of one org's backlog:

    1. ``fair_orgs``: the orgs with queued jobs, by a skip scan of ``jobs_org_queue_idx``
       (``org_id, priority DESC, created_at, id WHERE status = 'queued'``), one probe per org;
    2. ``fair_heads``: each org's head, its first due job of the plan's types, in claim order
       (one more probe of the same index per org; the limits' ``full`` filter is not applied
       to it: with it the planner read each org's whole backlog and sorted it, a second per
       claim at 100,000 queued jobs of one org);
    3. ``fair_ranked``: the heads and the first ``:limit`` jobs of the plain walk, in fair
       order (orgs compared in code points, ``COLLATE "C"``, as Python compares strings); that
       walk (``fair_fifo``) locks its rows ``SKIP LOCKED`` as the plain claim's does: a locking
       walk is never planned as a top-N sort of the whole queue (decision 0048);
    4. ``fair_pick``: the ranked candidates that are not ``full`` locked in that order,
       ``SKIP LOCKED``, up to ``:limit``;
    5. ``fair_fill``: what other claimers' locks left short, from the plain walk, so a fair
       claim never comes back empty while a due job is free.
    """
    return [
        """fair_orgs AS (
    (SELECT j.org_id FROM jobs AS j WHERE j.status = 'queued' ORDER BY j.org_id LIMIT 1)
    UNION ALL
    SELECT (
        SELECT j.org_id FROM jobs AS j
        WHERE j.status = 'queued' AND j.org_id > o.org_id ORDER BY j.org_id LIMIT 1
    ) FROM fair_orgs AS o WHERE o.org_id IS NOT NULL
)""",
        f"""fair_heads AS (
    SELECT h.* FROM fair_orgs AS o CROSS JOIN LATERAL (
        SELECT j.id, j.org_id, j.priority, j.created_at FROM jobs AS j
        WHERE j.org_id = o.org_id AND {_DUE} {filters}
        ORDER BY {claim_order("j")}
        LIMIT 1
    ) AS h
    WHERE o.org_id IS NOT NULL
)""",
        f"""fair_fifo AS (
    SELECT j.id, j.priority, j.created_at FROM jobs AS j
    WHERE {_DUE} {filters} {full}
    ORDER BY {claim_order("j")}
    LIMIT :limit
    FOR UPDATE OF j SKIP LOCKED
)""",
        """fair_ranked AS (
    SELECT h.id, h.priority, 0 AS tier,
           coalesce(h.org_id COLLATE "C" <= CAST(:after AS text) COLLATE "C", false) AS wrapped,
           h.org_id COLLATE "C" AS org, h.created_at
    FROM fair_heads AS h
    UNION ALL
    SELECT f.id, f.priority, 1, false, '' COLLATE "C", f.created_at FROM fair_fifo AS f
    WHERE f.id <> ALL(ARRAY(SELECT h.id FROM fair_heads AS h))
)""",
        f"""fair_pick AS (
    SELECT c.* FROM (
        SELECT r.* FROM fair_ranked AS r ORDER BY {_fair_rank("r")}
    ) AS r
    CROSS JOIN LATERAL (
        SELECT j.id, j.type, j.concurrency_key FROM jobs AS j
        WHERE j.id = r.id AND j.status = 'queued' {full}
        FOR UPDATE SKIP LOCKED
    ) AS c
    LIMIT :limit
)""",
        f"""fair_fill AS (
    SELECT j.id, j.type, j.concurrency_key FROM jobs AS j
    WHERE {_DUE} {filters} {full}
      AND j.id <> ALL(ARRAY(SELECT p.id FROM fair_pick AS p))
    ORDER BY {claim_order("j")}
    LIMIT (:limit - (SELECT count(*) FROM fair_pick))
    FOR UPDATE SKIP LOCKED
)""",
        """due AS (
    SELECT p.* FROM fair_pick AS p
    UNION ALL
    SELECT f.* FROM fair_fill AS f
)""",
    ]


def _due(shape: Shape) -> list[str]:
    """The CTEs ending in ``due`` (id, type, concurrency_key of the locked candidates, in the
    plan's order) for ``shape``."""
    filters = " ".join(
        part
        for part, wanted in ((_TYPES, shape.types), (_SKIPPED, shape.limited and shape.finish))
        if wanted
    )
    full = _FULL if shape.limited else ""
    return _fair(filters, full) if shape.fair else _walk(f"{filters} {full}")


# The claim of the rows of ``due``, found by primary key through ``id = ANY(ARRAY(...))``: a join
# with the CTE could be planned as a scan of the whole table, whose history the planner cannot
# see through the CTE. No status test: the rows are locked since they matched it, and one would
# let the planner walk every queued row of jobs_queue_idx instead of probing the key. The key of
# a ``queue``-scope job is released in the same statement (docs/contract.md §3).
_CLAIMED = f"""claimed AS (
    UPDATE jobs AS j
    {sql.claim_set(":now")}
    WHERE j.id = ANY(ARRAY(SELECT id FROM due))
    RETURNING {columns("j")}
)"""

# A batch of patches as rows: ``:outcomes`` is a JSON array of domain.Patch, one object per
# attempt with its ``ord`` (rows.patches_json).
_OUTCOME = """outcome AS (
    SELECT * FROM jsonb_to_recordset(CAST(:outcomes AS jsonb)) AS o(
        ord int, id uuid, lease uuid, status text, attempts int, snoozes int,
        run_at timestamptz, error text, report jsonb, finished_at timestamptz, dedup_key text,
        seen_at timestamptz, hook_due_at timestamptz, ended_at timestamptz, worker text,
        attempt_outcome text, traceback text
    )
)"""

# The record of each attempt the finish ended (jobs_core.history.record_of, computed by the
# caller and sent with its patch), in the same statement: one INSERT node per statement, one
# row per finished attempt. Only the rows the fence let through (``finished``) are recorded.
# Its number: the job's records so far + 1, read backwards on job_attempts_pkey (one index
# probe; the job's row is locked by the update, so nobody numbers it concurrently). A data-
# modifying CTE runs whether or not anything reads it.
_ATTEMPTED = """attempted AS (
    INSERT INTO job_attempts (
        job_id, attempt, started_at, ended_at, worker, outcome, error, traceback
    )
    SELECT f.id,
           coalesce((SELECT max(a.attempt) FROM job_attempts AS a WHERE a.job_id = f.id), 0) + 1,
           f.started_at, o.ended_at, o.worker, o.attempt_outcome, o.error, o.traceback
    FROM finished AS f JOIN outcome AS o ON o.ord = f.ord
    WHERE o.ended_at IS NOT NULL AND f.started_at IS NOT NULL
)"""

# Row locks of a finish, in one order. ``:outcomes`` comes sorted by id (rows.patches_json),
# and the update meets its rows in that order whatever its join: driven by ``outcome`` (a hash
# or nested loop join, outcome outer: its order) or by the primary key's ``= ANY`` scan (key
# order), so a finish locks its rows in ascending id order, as every other multi-row write that
# waits for rows does (sql._LOCK_IDS): two of them never wait on each other in a cycle. A sweep's
# patch (``seen_at``) is written only if its row is free, locked first ``SKIP LOCKED``: held by
# a finish or a heartbeat, the job is showing life and the sweep leaves it (NOWAIT semantics,
# without the error); it never waits on a finish.
_SWEEPING = """sweeping AS (
    SELECT j.id FROM jobs AS j
    WHERE j.id = ANY(ARRAY(SELECT o.id FROM outcome AS o WHERE o.seen_at IS NOT NULL))
    ORDER BY j.id
    FOR NO KEY UPDATE SKIP LOCKED
)"""
_TAKEN = "SELECT o.id FROM outcome AS o"
_TAKEN_SWEEP = "SELECT o.id FROM outcome AS o WHERE o.seen_at IS NULL UNION ALL " + (
    "SELECT s.id FROM sweeping AS s"
)


# Each row of ``outcome`` assigned as given (domain.apply), fenced on the attempt (lease, still
# running) and, for a sweep's patch, on the heartbeat it read (domain.applies). Nothing is
# decided here; the cancellation request is never written (a request made during the attempt
# outlives it: domain.cancel_now). ``hook_due_at`` is the patch's too (decision 0025). Index:
# the primary key, probed with ``id = ANY(ARRAY(...))``; the rows come back with their ``ord``.
def _finish_parts(sweep: bool) -> list[str]:
    taken = _TAKEN_SWEEP if sweep else _TAKEN
    finished = f"""finished AS (
    UPDATE jobs AS j
    SET status = o.status,
        attempts = o.attempts,
        snoozes = o.snoozes,
        run_at = o.run_at,
        error = o.error,
        report = o.report,
        finished_at = o.finished_at,
        dedup_key = o.dedup_key,
        hook_due_at = o.hook_due_at,
        lease = NULL
    FROM outcome AS o
    WHERE j.id = ANY(ARRAY({taken})) AND j.id = o.id AND j.lease = o.lease
      AND {sql.RUNNING} AND (o.seen_at IS NULL OR j.heartbeat_at = o.seen_at)
    RETURNING o.ord, {columns("j")}
)"""
    return [
        _OUTCOME,
        *([_SWEEPING] if sweep else []),
        finished,
        _ATTEMPTED,
        sql.wake("finished"),
    ]


# Statement 2 under limits: the candidates (``:ids``, locked by statement 1, in its order) that
# fit, counted afresh. A candidate fits when the running jobs of its key plus the candidates of
# that key before it stay under the key's limit, and likewise for its type among the candidates
# that fit their key (jobs_core.flow.admit). Index: the primary key for the candidates,
# jobs_queue_idx's ``running`` range for the counts.


def _admitted(rated: bool) -> list[str]:
    """Statement 2's CTEs (with a rate limit: its parts from :mod:`jobs_postgres.rate_claims`)."""
    opened, columns, join, fits = rate_claims.ADMISSION if rated else ("", "", "", "")
    return [
        limit_claims.limits(rated),
        """key_running AS (
    SELECT type, concurrency_key, count(*) AS n FROM running
    WHERE concurrency_key IS NOT NULL GROUP BY type, concurrency_key
)""",
        "type_running AS (SELECT type, count(*) AS n FROM running GROUP BY type)",
        f"""candidate AS (
    SELECT c.id, c.type, c.concurrency_key, u.rank, l.key_limit, l.type_limit,
           kr.n AS key_running{columns}
    FROM unnest(CAST(:ids AS uuid[])) WITH ORDINALITY AS u(id, rank)
    JOIN jobs AS c ON c.id = u.id
    LEFT JOIN lim AS l ON l.type = c.type
    LEFT JOIN key_running AS kr ON kr.type = c.type AND kr.concurrency_key = c.concurrency_key{join}
    WHERE c.id = ANY(CAST(:ids AS uuid[]))
)""",
        f"""key_fit AS (
    SELECT c.*, row_number() OVER (PARTITION BY c.type ORDER BY c.rank) AS type_rank
    FROM (
        SELECT c.*, row_number() OVER (
            PARTITION BY c.type, c.concurrency_key ORDER BY c.rank
        ) AS key_rank
        FROM candidate AS c
    ) AS c
    WHERE {opened}c.key_limit IS NULL OR c.concurrency_key IS NULL
       OR coalesce(c.key_running, 0) + c.key_rank <= c.key_limit{fits}
)""",
        """due AS (
    SELECT k.id FROM key_fit AS k LEFT JOIN type_running AS tr ON tr.type = k.type
    WHERE k.type_limit IS NULL OR coalesce(tr.n, 0) + k.type_rank <= k.type_limit
)""",
        _CLAIMED,
        sql.LOG_CLAIMED,
        *(rate_claims.WRITTEN if rated else []),
    ]


# -- the statements ---------------------------------------------------------------------------


def _compiled(ctes: list[str], select: str, *, recursive: bool = False) -> str:
    """``WITH ctes select`` in psycopg's syntax (``%(name)s``), as the store runs it."""
    statement = f"WITH {'RECURSIVE ' if recursive else ''}" + ",\n".join(ctes) + f"\n{select}\n"
    return str(text(statement).compile(dialect=_DIALECT))


@cache
def finish(*, sweep: bool = False) -> str:
    """The finish of ``:outcomes`` alone (sorted by id; with ``sweep``, some patches have a
    ``seen_at``); the rows come back with their ``ord`` so the caller aligns them with its
    input (a patch whose attempt lost the job returns no row)."""
    return _compiled(
        [*_finish_parts(sweep), sql.LOG_FINISHED],
        f"SELECT finished.* FROM finished {sql.NOTIFIED}",
    )


@cache
def _statements(shape: Shape) -> tuple[str, ...]:
    if shape.limited:
        rated = shape.rated
        candidates = _compiled(
            [
                limit_claims.limits(rated),
                limit_claims.FULL_SETS.format(spent=rate_claims.SPENT_KEYS if rated else ""),
                *_due(shape),
                limit_claims.ADVISORY.format(
                    key_locked=rate_claims.KEY_LOCKED if rated else limit_claims.KEY_LIMITED
                ),
                limit_claims.CLAIMED_FREE,
                sql.LOG_CLAIMED,
            ],
            limit_claims.CANDIDATES,
            recursive=shape.fair,
        )
        return candidates, _compiled(_admitted(rated), "SELECT * FROM claimed")
    if not shape.finish:
        return (
            _compiled(
                [*_due(shape), _CLAIMED, sql.LOG_CLAIMED],
                "SELECT * FROM claimed",
                recursive=shape.fair,
            ),
        )
    return (
        _compiled(
            [*_finish_parts(shape.sweep), *_due(shape), _CLAIMED, sql.LOG_BOTH],
            f"SELECT finished.* FROM finished {sql.NOTIFIED}\n"
            "UNION ALL\nSELECT NULL, claimed.* FROM claimed",
            recursive=shape.fair,
        ),
    )


def statements(plan: ClaimPlan, *, finish: bool = False, sweep: bool = False) -> tuple[str, ...]:
    """The statements of ``plan`` (psycopg syntax, built once per shape).

    Without limits, one statement: the claim (with ``finish``, the finish of ``:outcomes`` and
    the claim; the finished rows first, with their ``ord``, then the claimed ones with a NULL
    ``ord``). Under limits, the two statements of one transaction (run after :data:`PLANNER`):
    the locked candidates' ids, then the claim of those of ``:ids`` that fit; with ``finish``
    (the finish committed just before) the walk passes over ``:skipped``, the jobs it re-queued.
    ``sweep``: the finish has sweep patches (see :func:`finish`).
    """
    return _statements(Shape.of(plan, finish=finish, sweep=sweep))
