"""Fairness between orgs on PostgreSQL: the ``due`` CTE of a fair claim (opt-in,
``JOBS_FAIR_CLAIM``; docs/flow-control.md, decision 0015 "Fairness between orgs").

The rule is :func:`jobs_core.flow.fair_order`; this module applies it in SQL. A fair claim

1. finds the orgs with queued jobs by a skip scan of ``jobs_org_queue_idx`` (``org_id,
   priority DESC, created_at, id WHERE status = 'queued'``): a recursive CTE that probes the
   index once per org for the next larger ``org_id``, never reading an org's backlog;
2. takes each org's head, its first due job of the claimable types in claim order (one more
   probe of the same index per org; it walks past that org's jobs that are not due yet);
3. ranks the heads with the first ``:limit`` jobs of the plain claim order (``jobs_queue_idx``):
   priority first, then heads before other jobs, heads of the orgs after ``:after`` first
   (code-point order, ``COLLATE "C"``, as Python compares strings), then the oldest;
4. locks the ranked candidates in that order, ``FOR UPDATE SKIP LOCKED``, a probe of the primary
   key each, and stops after ``:limit``;
5. fills what another claimer's locks left short with the plain ordered walk of
   ``jobs_queue_idx`` (``SKIP LOCKED``), so a fair claim never comes back empty while a due job
   is free; under that contention the fill is in plain order.

The cost grows with the number of orgs that have queued jobs (two index probes per org per
claim), not with the size of any org's backlog.
"""

from __future__ import annotations

from collections.abc import Sequence


def fair_due(
    types: Sequence[str] | None, *, name: str = "due", extra: str = "", psycopg: bool = False
) -> str:
    """The CTEs of a fair claim, ending in ``name`` (the ids of up to ``:limit`` due jobs,
    locked), in SQLAlchemy ``text`` syntax (``psycopg``: ``%(name)s`` syntax); the statement
    must start ``WITH RECURSIVE``. ``extra``: more conditions on a candidate ``j`` (the full
    keys and types of a claim under limits, :func:`jobs_postgres.flow.lock_candidates`)."""
    type_filter = "AND j.type = ANY(CAST(:types AS text[]))" if types is not None else ""
    text = _fair_due(type_filter + extra, name)
    if psycopg:
        for param in ("types", "now", "limit", "after"):
            text = text.replace(f":{param}", f"%({param})s")
    return text


def _fair_due(type_filter: str, name: str) -> str:
    return f"""fair_orgs AS (
    (SELECT j.org_id FROM jobs AS j WHERE j.status = 'queued' ORDER BY j.org_id LIMIT 1)
    UNION ALL
    SELECT (
        SELECT j.org_id FROM jobs AS j
        WHERE j.status = 'queued' AND j.org_id > o.org_id ORDER BY j.org_id LIMIT 1
    ) FROM fair_orgs AS o WHERE o.org_id IS NOT NULL
),
fair_heads AS (
    SELECT h.* FROM fair_orgs AS o CROSS JOIN LATERAL (
        SELECT j.id, j.org_id, j.priority, j.created_at FROM jobs AS j
        WHERE j.org_id = o.org_id AND j.status = 'queued' AND j.run_at <= :now {type_filter}
        ORDER BY j.priority DESC, j.created_at, j.id
        LIMIT 1
    ) AS h
    WHERE o.org_id IS NOT NULL
),
fair_fifo AS (
    SELECT j.id, j.priority, j.created_at FROM jobs AS j
    WHERE j.status = 'queued' AND j.run_at <= :now {type_filter}
    ORDER BY j.priority DESC, j.created_at, j.id
    LIMIT :limit
),
fair_ranked AS (
    SELECT h.id, h.priority, 0 AS tier,
           coalesce(h.org_id COLLATE "C" <= CAST(:after AS text) COLLATE "C", false) AS wrapped,
           h.org_id COLLATE "C" AS org, h.created_at
    FROM fair_heads AS h
    UNION ALL
    SELECT f.id, f.priority, 1, false, '' COLLATE "C", f.created_at FROM fair_fifo AS f
    WHERE f.id <> ALL(ARRAY(SELECT h.id FROM fair_heads AS h))
),
fair_pick AS (
    SELECT c.id FROM (
        SELECT r.* FROM fair_ranked AS r
        ORDER BY r.priority DESC, r.tier, r.wrapped, r.org, r.created_at, r.id
    ) AS r
    CROSS JOIN LATERAL (
        SELECT j.id FROM jobs AS j WHERE j.id = r.id AND j.status = 'queued'
        FOR UPDATE SKIP LOCKED
    ) AS c
    LIMIT :limit
),
fair_fill AS (
    SELECT j.id FROM jobs AS j
    WHERE j.status = 'queued' AND j.run_at <= :now {type_filter}
      AND j.id <> ALL(ARRAY(SELECT p.id FROM fair_pick AS p))
    ORDER BY j.priority DESC, j.created_at, j.id
    LIMIT (:limit - (SELECT count(*) FROM fair_pick))
    FOR UPDATE SKIP LOCKED
),
{name} AS (
    SELECT p.id FROM fair_pick AS p
    UNION ALL
    SELECT f.id FROM fair_fill AS f
)"""
