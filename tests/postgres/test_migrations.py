"""The migration chain: upgrade of an empty database, clean downgrade, agreement with the schema
module, the uuidv7() default on every server version."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from jobs_postgres import migrations
from jobs_postgres.database import create_engine
from jobs_postgres.schema import metadata
from sqlalchemy import Engine, inspect, text

pytestmark = pytest.mark.postgres


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _uuidv7_schemas(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                text(
                    "SELECT n.nspname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                    " WHERE p.proname = 'uuidv7' AND p.pronargs = 0"
                )
            ).scalars()
        )


def test_upgrade_of_an_empty_database_then_a_clean_downgrade(scratch_url: str) -> None:
    engine = create_engine(scratch_url)
    try:
        with engine.connect() as conn:
            version = int(conn.execute(text("SHOW server_version_num")).scalar_one())
        assert migrations.current(scratch_url) is None
        before = _uuidv7_schemas(engine)

        migrations.upgrade(scratch_url)
        assert migrations.current(scratch_url) == migrations.head()
        assert {"jobs", "api_tokens", "alembic_version_jobs"} <= _tables(scratch_url)
        if version < 180000:
            assert _uuidv7_schemas(engine) == ["public"]
        else:
            assert _uuidv7_schemas(engine) == ["pg_catalog"]  # the built-in is used as is

        migrations.upgrade(scratch_url)  # idempotent: nothing left to do
        assert migrations.current(scratch_url) == migrations.head()

        migrations.downgrade(scratch_url)
        assert migrations.current(scratch_url) is None
        assert _tables(scratch_url) <= {"alembic_version_jobs"}
        assert _uuidv7_schemas(engine) == before  # ours dropped, never the built-in

        migrations.upgrade(scratch_url)  # and back up again from a downgraded database
        assert migrations.current(scratch_url) == migrations.head()
    finally:
        engine.dispose()


def test_the_migrated_database_matches_the_schema_module(pg_engine: Engine) -> None:
    with pg_engine.connect() as conn:
        # Only the tables of this chain: other chains (a module's) may share the database.
        context = MigrationContext.configure(
            conn,
            opts={
                "compare_type": True,
                "include_name": lambda name, kind, parent: (
                    kind != "table" or name in metadata.tables
                ),
            },
        )
        diffs = compare_metadata(context, metadata)
        assert diffs == []
        indexes = {
            i["name"]: i for i in inspect(conn).get_indexes("jobs")
        }  # what the claim relies on
        queue = indexes["jobs_queue_idx"]
        # the claim's ORDER BY, priority first (decision 0015)
        assert queue["column_names"] == ["status", "priority", "created_at", "id"]
        assert queue.get("column_sorting", {}).get("priority") == ("desc",)
        where = queue.get("dialect_options", {}).get("postgresql_where", "")
        assert "queued" in where
        assert "running" in where
        options = conn.execute(
            text("SELECT reloptions FROM pg_class WHERE relname = 'jobs'")
        ).scalar_one()
        assert "fillfactor=70" in options


def test_migrations_run_from_any_working_directory(scratch_url: str, tmp_path: Path) -> None:
    """The chain is found from the installed package, not from the current directory."""
    code = (
        "import sys; from jobs_postgres import migrations; "
        "migrations.upgrade(sys.argv[1]); print(migrations.current(sys.argv[1]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, scratch_url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == migrations.head()


def _check_v7(values: list[uuid.UUID]) -> None:
    assert all(v.version == 7 for v in values)
    assert all(v.variant == uuid.RFC_4122 for v in values)
    assert len(set(values)) == len(values)


def _ms(value: uuid.UUID) -> int:
    return value.int >> 80


def _generate(engine: Engine, function: str) -> list[uuid.UUID]:
    """One value per statement, a few milliseconds apart, then a burst in one statement."""
    values = []
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for _ in range(5):
            values.append(conn.execute(text(f"SELECT {function}")).scalar_one())
            conn.execute(text("SELECT pg_sleep(0.003)"))
        unix_ms = conn.execute(
            text("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint")
        ).scalar_one()
        burst = list(
            conn.execute(text(f"SELECT {function} FROM generate_series(1, 500)")).scalars()
        )
    _check_v7(values + burst)
    assert values == sorted(values)  # time-ordered across milliseconds
    assert len({_ms(v) for v in values}) == len(values)
    assert abs(_ms(burst[0]) - unix_ms) < 5_000  # the leading 48 bits are Unix milliseconds
    return values + burst


def test_uuidv7_default_is_version_7_and_time_ordered(pg_engine: Engine) -> None:
    """The column default, whichever uuidv7() the server has (built in, or the migration's)."""
    _generate(pg_engine, "uuidv7()")
    with pg_engine.begin() as conn:
        ids = conn.execute(
            text(
                "INSERT INTO jobs (org_id, type) SELECT 'o', 't' FROM generate_series(1, 3) "
                "RETURNING id"
            )
        ).scalars()
        _check_v7(list(ids))


def _migration_module() -> Any:
    path = next(
        (Path(migrations.__file__).parent / "versions").glob("0001_*.py")
    )  # the frozen revision
    spec = importlib.util.spec_from_file_location("jobs_migration_0001", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_migrations_sql_uuidv7_on_any_server_version(pg_engine: Engine) -> None:
    """The function created on PostgreSQL < 18, checked even where the built-in exists: it is
    created in this connection's temporary schema."""
    create = _migration_module().UUIDV7.replace(
        "CREATE FUNCTION uuidv7()", "CREATE FUNCTION pg_temp.uuidv7()"
    )
    engine = create_engine(pg_engine.url.render_as_string(hide_password=False), pool_size=1)
    try:
        with engine.begin() as conn:
            conn.execute(text(create))
        _generate(engine, "pg_temp.uuidv7()")
    finally:
        engine.dispose()


def test_heartbeat_at_is_backfilled_with_what_the_sweep_read_before(scratch_url: str) -> None:
    """0006_heartbeat_at: a row's heartbeat_at is the later of its ``progress.updated_at`` (only
    an ISO instant with an offset) and its ``started_at``, the last sign of life the sweep read
    from the progress document before the column existed; a heartbeat is still no event."""
    migrations.upgrade(scratch_url, "0005_fair_claim")
    engine = create_engine(scratch_url)
    start = "2026-01-01T00:00:00+00:00"
    rows = {
        "beat": ({"updated_at": "2026-01-01T00:05:00.5+00:00"}, start),
        "old-beat": ({"updated_at": "2025-12-31T00:00:00Z"}, start),
        "odd": ({"updated_at": "yesterday"}, start),
        "naive": ({"updated_at": "2026-01-01T00:09:00"}, start),
        "none": (None, start),
        "queued": (None, None),
    }
    try:
        with engine.begin() as conn:
            for name, (progress, started) in rows.items():
                conn.execute(
                    text(
                        "INSERT INTO jobs (org_id, type, status, progress, started_at, lease)"
                        " VALUES ('o', :name, CASE WHEN CAST(:started AS timestamptz) IS NULL"
                        " THEN 'queued' ELSE 'running' END, CAST(:progress AS jsonb),"
                        " CAST(:started AS timestamptz), gen_random_uuid())"
                    ),
                    {
                        "name": name,
                        "progress": None if progress is None else json.dumps(progress),
                        "started": started,
                    },
                )
        migrations.upgrade(scratch_url)
        with engine.connect() as conn:
            got: dict[str, str | None] = dict(
                conn.execute(
                    text(
                        "SELECT type, to_char(heartbeat_at AT TIME ZONE 'UTC', "
                        "'YYYY-MM-DD\"T\"HH24:MI:SS.US') FROM jobs"
                    )
                ).all()
            )
        assert got == {
            "beat": "2026-01-01T00:05:00.500000",
            "old-beat": "2026-01-01T00:00:00.000000",
            "odd": "2026-01-01T00:00:00.000000",
            "naive": "2026-01-01T00:00:00.000000",
            "none": "2026-01-01T00:00:00.000000",
            "queued": None,
        }
        with engine.begin() as conn:
            before = conn.execute(text("SELECT count(*) FROM job_events")).scalar_one()
            conn.execute(
                text(
                    "UPDATE jobs SET heartbeat_at = now(), progress = coalesce(progress, '{}')"
                    " || jsonb_build_object('updated_at', now()::text) WHERE type = 'beat'"
                )
            )
            after = conn.execute(text("SELECT count(*) FROM job_events")).scalar_one()
        assert after == before  # a heartbeat is no event
        migrations.downgrade(scratch_url, "0005_fair_claim")
        with engine.connect() as conn:
            columns = {c["name"] for c in inspect(conn).get_columns("jobs")}
        assert "heartbeat_at" not in columns
    finally:
        engine.dispose()


def _events(conn: Any) -> list[tuple[str, dict[str, Any]]]:
    return [
        (kind, dict(job))
        for kind, job in conn.execute(text("SELECT kind, job FROM job_events ORDER BY seq")).all()
    ]


def test_the_private_columns_and_the_heartbeat_are_no_event_and_never_logged(
    scratch_url: str,
) -> None:
    """0007_private_checkpoint (after 0006_heartbeat_at): a change of only ``hook_due_at``,
    ``checkpoint`` or the heartbeat logs no event, and no logged job shows ``lease``,
    ``hook_due_at`` or ``checkpoint``; its downgrade puts back 0006's ``jobs_event_kind``, under
    which a heartbeat is still no event."""
    migrations.upgrade(scratch_url, "0009_hot_path_log")  # the log as 0007 left it
    engine = create_engine(scratch_url)
    silent = [
        "UPDATE jobs SET hook_due_at = now()",
        'UPDATE jobs SET checkpoint = \'{"frontier": ["secret"]}\'',
        "UPDATE jobs SET hook_due_at = NULL, checkpoint = NULL",
        "UPDATE jobs SET heartbeat_at = now(),"
        " progress = jsonb_build_object('updated_at', now()::text)",
    ]
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO jobs (org_id, type, status, progress, started_at, lease,"
                    " hook_due_at, checkpoint) VALUES ('o', 't', 'running', '{}', now(),"
                    " gen_random_uuid(), now(), '{\"s\": 1}')"
                )
            )
        for statement in silent:
            with engine.begin() as conn:
                conn.execute(text(statement))
        with engine.begin() as conn:
            conn.execute(text("UPDATE jobs SET priority = 5, checkpoint = '{\"s\": 2}'"))
            conn.execute(text("DELETE FROM jobs"))
            logged = _events(conn)
        assert [kind for kind, _ in logged] == ["enqueued", "updated", "deleted"]
        for _, job in logged:
            assert not {"lease", "hook_due_at", "checkpoint"} & set(job)
            assert "heartbeat_at" in job  # a field of the job, shown as before
        migrations.downgrade(scratch_url, "0006_heartbeat_at")
        with engine.connect() as conn:
            columns = {c["name"] for c in inspect(conn).get_columns("jobs")}
        assert not {"hook_due_at", "checkpoint"} & columns
        with engine.begin() as conn:
            conn.execute(text("TRUNCATE job_events"))
            conn.execute(
                text(
                    "INSERT INTO jobs (org_id, type, status, progress, started_at, lease)"
                    " VALUES ('o', 't', 'running', '{}', now(), gen_random_uuid())"
                )
            )
        with engine.begin() as conn:
            conn.execute(text(silent[-1]))
        with engine.begin() as conn:
            conn.execute(text("UPDATE jobs SET priority = 5"))
            logged = _events(conn)
        assert [kind for kind, _ in logged] == ["enqueued", "updated"]
        assert "lease" not in logged[-1][1]
    finally:
        engine.dispose()


def test_the_event_log_keeps_typed_columns_and_converts_what_it_held(scratch_url: str) -> None:
    """0010_typed_event_log: the rows already logged as documents become typed columns equal to
    what the documents said, new events are written as columns (never a private column), and
    the downgrade builds the documents back."""
    migrations.upgrade(scratch_url, "0009_hot_path_log")
    engine = create_engine(scratch_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO jobs (org_id, type, payload, dedup_key, requested_dedup_key)"
                    " VALUES ('o', 't', '{\"n\": 1}', 'k', 'k')"
                )
            )
            conn.execute(
                text(
                    "UPDATE jobs SET status = 'running', attempts = 1, started_at = now(),"
                    " progress = '{\"done\": 3}', lease = gen_random_uuid()"
                )
            )
            before = [
                dict(d) for (d,) in conn.execute(text("SELECT job FROM job_events ORDER BY seq"))
            ]
        assert [d["status"] for d in before] == ["queued", "running"]
        migrations.upgrade(scratch_url)
        columns = {c["name"] for c in inspect(engine).get_columns("job_events")}
        assert "job" not in columns
        assert not {"lease", "heartbeat_at", "hook_due_at", "checkpoint"} & columns
        with engine.begin() as conn:
            converted = conn.execute(
                text(
                    "SELECT kind, status, attempts, payload, progress, dedup_key,"
                    " requested_dedup_key, created_at = (SELECT created_at FROM jobs),"
                    " started_at IS NOT NULL FROM job_events ORDER BY seq"
                )
            ).all()
            assert [tuple(r) for r in converted] == [
                ("enqueued", "queued", 0, {"n": 1}, None, "k", "k", True, False),
                ("claimed", "running", 1, {"n": 1}, {"done": 3}, "k", "k", True, True),
            ]
            # the update trigger: a statement naming a column the claim and the finish leave out
            conn.execute(
                text(
                    "UPDATE jobs SET status = 'done', finished_at = now(), lease = NULL,"
                    " cancel_requested_at = NULL"
                )
            )
            conn.execute(text("DELETE FROM jobs"))
            kinds = conn.execute(text("SELECT kind, status FROM job_events ORDER BY seq")).all()
        assert [tuple(k) for k in kinds][2:] == [("done", "done"), ("deleted", "done")]
        migrations.downgrade(scratch_url, "0009_hot_path_log")
        with engine.begin() as conn:
            documents = [
                d for (d,) in conn.execute(text("SELECT job FROM job_events ORDER BY seq"))
            ]
            assert [d["status"] for d in documents] == ["queued", "running", "done", "done"]
            assert documents[1]["progress"] == {"done": 3}
            assert documents[0]["payload"] == {"n": 1}
            conn.execute(text("INSERT INTO jobs (org_id, type) VALUES ('o', 'again')"))
            last = conn.execute(
                text("SELECT job FROM job_events ORDER BY seq DESC LIMIT 1")
            ).scalar_one()
        assert last["type"] == "again"
        assert "lease" not in last
    finally:
        engine.dispose()
