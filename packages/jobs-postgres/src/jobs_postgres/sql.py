"""Every statement the PostgreSQL store runs, by name, each with the index it relies on; the
reads of jobs an operator makes (a job, a page, its attempts, what it awaits, its children) are
:mod:`jobs_postgres.reads`', which the store runs too.

Conventions:
- every instant is a parameter (``:now``, ``:stale_before``) taken from the caller's clock, never
  the server's ``now()``, so a fake clock moves time on PostgreSQL as on memory (decision 0002);
- worker writes are fenced: ``WHERE id = … AND lease = … AND status = 'running'``;
- a statement that makes work available (insert, re-queue, retry) sends one
  ``pg_notify('jobs_new', '')`` (the ``wake`` CTE), once per statement whatever the number of
  rows, delivered when the transaction commits. Nothing else notifies: a transaction that
  NOTIFYs takes a lock that serialises the commits of every notifying transaction, so the
  claim and the finish of a job (the drain) never notify; the event stream reads the
  ``job_events`` log instead (docs/events.md).
- parameters are written ``CAST(:p AS type)``: SQLAlchemy's ``text()`` would read ``:p::type``
  as a parameter named ``p:``.
"""

from __future__ import annotations

from sqlalchemy import text

from jobs_postgres.job_rows import COLUMNS, columns
from jobs_postgres.schema import EVENT_JOB_COLUMNS, jobs

PRIVATE_COLUMNS: tuple[str, ...] = ("hook_due_at", "checkpoint", "wait_rule", "has_waiters")
"""Columns of ``jobs`` that are not fields of ``jobs_core.Job`` (decision 0025): no statement
returns them with a job, the event log leaves them out."""

if {c.name for c in jobs.columns} != {*COLUMNS, *PRIVATE_COLUMNS}:  # pragma: no cover
    raise RuntimeError(
        "the columns of jobs must be the fields of jobs_core.Job and the private ones"
    )


NEW_WORK_CHANNEL = "jobs_new"

# One wake-up per statement, only if ``source`` yielded a row that is queued. Identical
# notifications of one transaction are folded into one by the server anyway.
_WAKE = """
wake AS (
    SELECT pg_notify('jobs_new', '') FROM {source} WHERE status = 'queued' HAVING count(*) > 0
)"""


def wake(source: str) -> str:
    """The ``wake`` CTE of a statement whose rows ``source`` may make work available."""
    return _WAKE.format(source=source).strip()


# A CTE that nothing reads is never run: the final SELECT joins the notify CTE (one row at
# most) so it is evaluated, without changing the rows returned.
NOTIFIED = "LEFT JOIN wake ON true"

# When the attempt last showed life (domain.Job.last_seen_at): its heartbeat_at, which the claim
# sets to its start; its start for a row that never had one.
_LAST_SEEN = "coalesce(j.heartbeat_at, j.started_at)"


# -- enqueue ----------------------------------------------------------------------------------

# The conflict target of every insert: the unique index jobs_org_dedup_key_key (decision 0003).
ON_DEDUP_CONFLICT = "ON CONFLICT (org_id, dedup_key) DO NOTHING"


# Index: jobs_org_dedup_key_key resolves the conflict. The hottest call there is, so it runs
# on the psycopg connection itself (``%(name)s`` parameters; psycopg prepares it on a
# connection's fifth run): SQLAlchemy's execution and result machinery cost a third of the call
# (bench/NOTES.md §4). The id is the caller's (uuid7), so the caller builds the inserted job
# itself (domain.new_job) and only the id comes back, and a try repeated after a lost connection
# can tell whether the first one committed (EXISTS_ID).
def _insert(traced: bool) -> str:
    column, value = (
        (", trace_context", ", CAST(%(trace_context)s AS jsonb)") if traced else ("", "")
    )
    return f"""
WITH inserted AS (
    INSERT INTO jobs AS j (
        id, org_id, type, payload, dedup_key, requested_dedup_key, dedup_scope, max_attempts,
        created_at, run_at, priority, concurrency_key{column}
    )
    VALUES (
        %(id)s, %(org_id)s, %(type)s, CAST(%(payload)s AS jsonb), %(dedup_key)s, %(dedup_key)s,
        %(dedup_scope)s, %(max_attempts)s, %(now)s, %(run_at)s, %(priority)s,
        %(concurrency_key)s{value}
    )
    {ON_DEDUP_CONFLICT}
    RETURNING j.id
),
wake AS (SELECT pg_notify('jobs_new', '') FROM inserted)
SELECT inserted.id FROM inserted {NOTIFIED}
"""


INSERT = _insert(traced=False)
INSERT_TRACED = _insert(traced=True)
"""INSERT with the job's trace context (tracing on, decision 0039); INSERT is unchanged."""

# Index: the primary key. (psycopg parameters, as INSERT.)
EXISTS_ID = "SELECT 1 FROM jobs WHERE id = %(id)s"


def insert_many_from(source: str, *, parents: bool = False, traced: bool = False) -> str:
    """Insert the rows of ``source`` (columns id, org_id, type, payload, dedup_key,
    dedup_scope, max_attempts, run_at, priority, concurrency_key) in one statement.

    Index: jobs_org_dedup_key_key, as for INSERT. Rows are inserted in key order, then in input
    order (the caller's ids ascend in input order): a row waits on another transaction's
    uncommitted row of the same key, so two batches sharing keys wait on each other's keys in
    one order, never in a cycle (in input order, the same keys in opposite orders deadlocked);
    within the batch the first job with a key still wins it, as on memory. Only the ids of the
    inserted jobs that have a key come back: the caller already has the rest of each row.

    With ``parents``, ``source`` has a ``parent_id`` column too (children, decision 0038); with
    ``traced``, a ``trace_context`` (JSON text; tracing on, decision 0039): the other enqueues
    never write them (NULL by default), so their statements stay as they were.
    """
    extra = [("parent_id", "n.parent_id")] if parents else []
    extra += [("trace_context", "CAST(n.trace_context AS jsonb)")] if traced else []
    parent_column = "".join(f", {name}" for name, _ in extra)
    parent_value = "".join(f", {value}" for _, value in extra)
    return f"""
WITH inserted AS (
    INSERT INTO jobs AS j (
        id, org_id, type, payload, dedup_key, requested_dedup_key, dedup_scope, max_attempts,
        created_at, run_at, priority, concurrency_key{parent_column}
    )
    SELECT n.id, n.org_id, n.type, CAST(n.payload AS jsonb), n.dedup_key, n.dedup_key,
           n.dedup_scope, n.max_attempts, CAST(:now AS timestamptz),
           coalesce(n.run_at, CAST(:now AS timestamptz)), n.priority,
           n.concurrency_key{parent_value}
    FROM {source}
    ORDER BY n.org_id, n.dedup_key, n.id
    {ON_DEDUP_CONFLICT}
    RETURNING j.id, j.org_id, j.status, j.dedup_key
),
{_WAKE.format(source="inserted")}
-- One row: the ids of the inserted jobs that have a key (a job without one is always
-- inserted), and the notify CTE, read here whatever the filter.
SELECT array_agg(inserted.id) FILTER (WHERE inserted.dedup_key IS NOT NULL) AS keyed,
       (SELECT count(*) FROM wake) AS notified
FROM inserted
"""


# A batch as parallel arrays: one statement, one round trip (small and medium batches).
INSERT_MANY = text(
    insert_many_from(
        """unnest(
        CAST(:ids AS uuid[]), CAST(:org_ids AS text[]), CAST(:types AS text[]),
        CAST(:payloads AS text[]), CAST(:dedup_keys AS text[]), CAST(:dedup_scopes AS text[]),
        CAST(:max_attempts AS int[]), CAST(:run_ats AS timestamptz[]),
        CAST(:priorities AS int[]), CAST(:concurrency_keys AS text[])
    ) AS n(
        id, org_id, type, payload, dedup_key, dedup_scope, max_attempts, run_at, priority,
        concurrency_key
    )"""
    )
)

# Large batches (COPY): jobs_postgres.bulk.


# Index: jobs_org_dedup_key_key (equality on both columns).
FIND_BY_DEDUP_KEY = text(
    f"SELECT {columns('j')} FROM jobs AS j WHERE j.org_id = :org_id AND j.dedup_key = :dedup_key"
)


# -- worker -----------------------------------------------------------------------------------

# The fence on the status of a row found by its primary key, written so that it stays a filter
# of that row: as ``j.status = 'running'`` it is also an index condition, and the planner walks
# the whole ``running`` range of jobs_queue_idx instead, dead entries included: one per job
# finished since the last vacuum, so every finish of a drain was slower than the one before it
# (bench/NOTES.md §2).
RUNNING = "(j.status = 'running') IS TRUE"


def claim_set(now: str) -> str:
    """The SET list of every claim (:mod:`jobs_postgres.claims`), ``now`` the SQL parameter
    that holds the instant: domain.claim applied to rows the database picks, the one transition
    whose rows the core cannot see before it is written (decision 0020). The contract suite
    compares each claimed row with domain.claim of it."""
    return f"""SET status = 'running',
    attempts = j.attempts + 1,
    started_at = {now},
    heartbeat_at = {now},
    lease = gen_random_uuid(),
    dedup_key = CASE WHEN j.dedup_scope = 'queue' THEN NULL ELSE j.dedup_key END"""


# The events of the drain's own statements (docs/events.md; migration 0009_hot_path_log): a claim
# and a finish insert their rows of ``job_events`` in a CTE of the same statement, with the
# kind they are (jobs_core.events.change_kind of that transition) and the job as it is after
# it, its fields copied as typed columns (schema.EVENT_JOB_COLUMNS: no JSON is built here,
# migration 0010_typed_event_log); the update trigger does not fire for them (its column list
# leaves out every column they write). A data-modifying CTE runs whether or not anything reads
# it. The rows of one statement are logged in the order the statement wrote them (no sort in
# the claim's plan); the order that matters, a job's changes, follows the statements.
_KIND_CLAIMED = "'claimed'"
_KIND_FINISHED = "CASE WHEN r.status = 'queued' THEN 'requeued' ELSE r.status END"


def _logged(name: str, *sources: tuple[str, str]) -> str:
    """The CTE ``name`` that logs the rows of each ``(source, kind)`` with one INSERT (one
    executor node and one opening of the log and its index per statement, whatever the
    number of sources): the rows of the first source, then the next."""
    selects = "\n    UNION ALL\n".join(
        f"    SELECT r.org_id, r.id, {kind}, "
        + ", ".join(f"r.{column}" for column in EVENT_JOB_COLUMNS)
        + f"\n    FROM {source} AS r"
        for source, kind in sources
    )
    columns = ", ".join(EVENT_JOB_COLUMNS)
    return (
        f"{name} AS (\n    INSERT INTO job_events (org_id, job_id, kind, {columns})\n{selects}\n)"
    )


LOG_CLAIMED = _logged("claimed_logged", ("claimed", _KIND_CLAIMED))
LOG_FINISHED = _logged("finished_logged", ("finished", _KIND_FINISHED))
# The finish and the claim of one statement: the finished rows, then the claimed ones.
LOG_BOTH = _logged("both_logged", ("finished", _KIND_FINISHED), ("claimed", _KIND_CLAIMED))


# The rows of ``:ids`` locked in ascending id order before a batch writes them (the primary key
# read in order: no sort): every multi-row write on ``jobs`` that may wait for a row takes its
# locks in this one order, so two of them never wait on each other in a cycle (issue 22; the
# finish does the same, jobs_postgres.claims). The rest of the statement finds them again by key.
_LOCK_IDS = """locked AS (
    SELECT j.id FROM jobs AS j WHERE j.id = ANY(CAST(:ids AS uuid[])) ORDER BY j.id
    FOR NO KEY UPDATE
)"""

# Index: the primary key, probed with ``id = ANY(...)`` (never a join planned as a scan of the
# history). domain.heartbeat: sets heartbeat_at and merges ``updated_at`` into the progress
# document (the public mark of the heartbeat, docs/contract.md §5); the update touches no
# indexed column, so it is a HOT update. It waits for a row a finish holds (never skips it: a
# skipped row would read as a lost lease), in id order.
HEARTBEAT = text(
    f"""
WITH {_LOCK_IDS}
UPDATE jobs AS j
SET heartbeat_at = CAST(:now AS timestamptz),
    progress = coalesce(j.progress, '{{}}'::jsonb)
               || jsonb_build_object('updated_at', CAST(:beat AS text))
FROM unnest(CAST(:ids AS uuid[]), CAST(:leases AS uuid[])) AS r(id, lease)
WHERE j.id = ANY(ARRAY(SELECT id FROM locked)) AND j.id = r.id AND j.lease = r.lease
  AND {RUNNING}
RETURNING j.id
"""
)

# Index: the primary key. domain.save_progress: replaces the progress document, a heartbeat
# too (a HOT update, as HEARTBEAT).
SAVE_PROGRESS = text(
    """
UPDATE jobs
SET progress = CAST(:progress AS jsonb), heartbeat_at = CAST(:now AS timestamptz)
WHERE id = :id AND lease = :lease AND status = 'running'
"""
)

# Index: the primary key. SAVE_PROGRESS and the private checkpoint in one statement (decision
# 0025; the checkpoint column is not indexed, so still a HOT update).
SAVE_PROGRESS_AND_CHECKPOINT = text(
    """
UPDATE jobs
SET progress = CAST(:progress AS jsonb), heartbeat_at = CAST(:now AS timestamptz),
    checkpoint = CAST(:checkpoint AS jsonb)
WHERE id = :id AND lease = :lease AND status = 'running'
"""
)

# Index: the primary key. Worker-side (no org): the checkpoint of the job it holds.
CHECKPOINT_OF = text("SELECT checkpoint FROM jobs WHERE id = :id")

# Index: the primary key, probed with ``id = ANY(:ids)``.
CANCEL_REQUESTED = text(
    f"""
SELECT j.id
FROM jobs AS j
JOIN unnest(CAST(:ids AS uuid[]), CAST(:leases AS uuid[])) AS r(id, lease)
  ON j.id = r.id AND j.lease = r.lease
WHERE j.id = ANY(CAST(:ids AS uuid[]))
  AND {RUNNING} AND j.cancel_requested_at IS NOT NULL
"""
)


# Index: jobs_queue_idx, its ``status = 'running'`` range (the running set is small).
FIND_STALE = text(
    f"""
SELECT {columns("j")} FROM jobs AS j
WHERE j.status = 'running' AND {_LAST_SEEN} < :stale_before
ORDER BY j.created_at, j.id
LIMIT :limit
"""
)


# -- org-scoped reads and admin actions ---------------------------------------------------------

# The reads of a job and of a page of jobs: jobs_postgres.reads (GET, GET_ANY_ORG, list_jobs).

# Index: the primary key. Admin actions lock the row, apply the pure transition in Python
# (jobs_core.domain) and write the result back with SAVE.
GET_FOR_UPDATE = text(
    f"SELECT {columns('j')} FROM jobs AS j WHERE j.id = :id AND j.org_id = :org_id FOR UPDATE"
)

# Index: the primary key. Writes back every column an admin transition may change, and the
# end hook's marker the core gives with it (domain.end_hook_due: a cancel of a queued job makes
# it due now, any worker runs it; a retry clears it).
SAVE = text(
    f"""
WITH saved AS (
    UPDATE jobs AS j
    SET status = :status, attempts = :attempts, dedup_key = :dedup_key, run_at = :run_at,
        error = :error, started_at = :started_at, finished_at = :finished_at,
        cancel_requested_at = :cancel_requested_at, lease = :lease, snoozes = :snoozes,
        hook_due_at = :hook_due_at
    WHERE j.id = :id
    RETURNING {columns("j")}
),
{_WAKE.format(source="saved")}
SELECT saved.* FROM saved {NOTIFIED}
"""
)

# Index: jobs_hook_due_idx. A worker's pass over the due end hooks (decision 0025): the rows
# are locked SKIP LOCKED (another worker's pass takes others) and made due again later, so a
# pass that dies before END_HOOKS_DONE leaves them to be taken again.
TAKE_END_HOOKS = text(
    f"""
UPDATE jobs AS j SET hook_due_at = :retry_at
WHERE j.id IN (
    SELECT id FROM jobs
    WHERE hook_due_at IS NOT NULL AND hook_due_at <= :now
      AND type = ANY(CAST(:types AS text[]))
    ORDER BY hook_due_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
RETURNING {columns("j")}
"""
)

# Index: the primary key. Only the ending the hook was run for (same finished_at); its rows
# locked in id order first (_LOCK_IDS).
END_HOOKS_DONE = text(
    f"""
WITH {_LOCK_IDS}
UPDATE jobs AS j SET hook_due_at = NULL
FROM unnest(CAST(:ids AS uuid[]), CAST(:ends AS timestamptz[])) AS r(id, finished_at)
WHERE j.id = ANY(ARRAY(SELECT id FROM locked)) AND j.id = r.id
  AND j.finished_at IS NOT DISTINCT FROM r.finished_at AND j.hook_due_at IS NOT NULL
"""
)

# Index: the primary key.
DELETE = text("DELETE FROM jobs WHERE id = :id AND org_id = :org_id")

# Index: jobs_org_created_idx (an index-only count would need status in it; the org's rows
# are what is read, never the whole table).
STATS = text("SELECT status, count(*) FROM jobs WHERE org_id = :org_id GROUP BY status")
