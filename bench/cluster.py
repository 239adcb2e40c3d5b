"""Throwaway PostgreSQL clusters, streaming standbys and PgBouncers, for the tests and the fleet
benchmark (decision 0040): each made in a temporary directory on a port of its own, and removed
by whoever made it (``with`` blocks).

- :class:`Cluster` — ``initdb`` + ``pg_ctl start`` (PostgreSQL's binaries: ``pg_config
  --bindir``, else Debian's ``/usr/lib/postgresql/<major>/bin``); :meth:`Cluster.standby`
  makes a streaming standby of it with ``pg_basebackup -R``;
- :class:`Bouncer` — a PgBouncer in transaction pooling mode in front of a server URL (trust
  authentication, one ``auth_file`` naming the user).

Run as root (a container), the server and the pooler run as the ``postgres`` user (``initdb``
refuses root), and their directories are given to it.

``missing()`` says why nothing can be made here (no binaries), for a test's skip reason.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType

import psycopg

PORTS = range(5440, 5450)
"""The ports tried, in order, for a cluster or a pooler (the first free one is taken)."""

SERVER_USER = "postgres"
"""The user the server and the pooler run as when this process is root."""

START_TIMEOUT_S = 60.0


_TOOLS = ("initdb", "pg_ctl", "pg_basebackup", "postgres")


def bindir() -> Path | None:
    """The directory of PostgreSQL's server binaries (``initdb``, ``pg_ctl``, ``pg_basebackup``),
    if installed: the one of ``initdb`` on the PATH, ``pg_config --bindir``, or Debian's newest
    ``/usr/lib/postgresql/<major>/bin``; the first that holds them all."""
    candidates: list[Path] = []
    if (found := shutil.which("initdb")) is not None:
        candidates.append(Path(found).resolve().parent)
    if (config := shutil.which("pg_config")) is not None:
        out = subprocess.run([config, "--bindir"], capture_output=True, text=True, check=False)
        candidates.append(Path(out.stdout.strip()))
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_major, reverse=True)
    candidates += [Path(path) for path in debian]
    return next((c for c in candidates if all((c / t).exists() for t in _TOOLS)), None)


def _major(path: str) -> int:
    version = Path(path).parent.name
    return int(version) if version.isdigit() else 0


def pgbouncer() -> str | None:
    """The PgBouncer executable, if installed."""
    return shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.path.exists(p)), None
    )


def missing(*, pooler: bool = False, server: bool = False) -> str | None:
    """Why the asked-for parts cannot be made on this machine; None when they can."""
    if pooler and pgbouncer() is None:
        return "pgbouncer is not installed (apt-get install pgbouncer)"
    if server and bindir() is None:
        return "PostgreSQL's server binaries (initdb, pg_ctl, pg_basebackup) are not installed"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root and there is no {SERVER_USER!r} user to run the server as"
    return None


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", SERVER_USER, "--", *command]


def _give(path: Path) -> None:
    """Make ``path`` (and its content) the server user's when this process is root."""
    if os.geteuid() != 0:
        return
    user = pwd.getpwnam(SERVER_USER)
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.chown(name, user.pw_uid, user.pw_gid)


def _free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _run(command: list[str], **kwargs: object) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")


def wait_until_accepting(url: str, timeout_s: float = START_TIMEOUT_S) -> None:
    """Return once ``url`` answers a query (a starting server or pooler)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2, autocommit=True) as conn:
                conn.execute("SELECT 1")
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


class Cluster:
    """A PostgreSQL cluster of its own in a temporary directory (removed by :meth:`remove`)."""

    def __init__(
        self,
        *,
        settings: Mapping[str, str] | None = None,
        ports: Iterable[int] = PORTS,
        _data: Path | None = None,
    ) -> None:
        binaries = bindir()
        if binaries is None:
            raise RuntimeError(missing(server=True))
        self.bin = binaries
        self.root = Path(tempfile.mkdtemp(prefix="jobs-cluster-"))
        os.chmod(self.root, 0o755)
        self.data = self.root / "data"
        self.port = 0
        self._settings = {
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.root}'",
            "fsync": "off",
            "wal_level": "replica",
            "max_wal_senders": "4",
            "hot_standby": "on",
            **(settings or {}),
        }
        self._ports = list(ports)
        if _data is None:
            _give(self.root)
            _run(
                _as_server_user(
                    [
                        str(self.bin / "initdb"),
                        "-D",
                        str(self.data),
                        "-U",
                        "postgres",
                        "-A",
                        "trust",
                    ]
                )
            )
            with (self.data / "pg_hba.conf").open("a") as hba:
                hba.write("host replication all 127.0.0.1/32 trust\n")

    def url(self, database: str = "postgres") -> str:
        """The URL of ``database`` on this cluster (TCP, user postgres)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> Cluster:
        """Start on the first free port of its range (waits until it accepts connections)."""
        with (self.data / "postgresql.auto.conf").open("a") as conf:
            for name, value in self._settings.items():
                conf.write(f"{name} = {value}\n")
        for port in self._ports:
            if not _free(port):
                continue
            command = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-l"]
            command += [str(self.root / "log"), "-o", f"-p {port}", "-w", "start"]
            done = subprocess.run(_as_server_user(command), capture_output=True, check=False)
            if done.returncode == 0:
                self.port = port
                wait_until_accepting(self.url())
                return self
        raise RuntimeError(f"no free port for a cluster in {self._ports} (see {self.root}/log)")

    def standby(self, *, ports: Iterable[int] = PORTS) -> Cluster:
        """A streaming standby of this (started) cluster: ``pg_basebackup -R``, then started."""
        replica = Cluster(settings=self._settings, ports=ports, _data=Path("-"))
        replica.data = replica.root / "data"
        replica._settings["unix_socket_directories"] = f"'{replica.root}'"
        _give(replica.root)
        _run(
            _as_server_user(
                [
                    str(self.bin / "pg_basebackup"),
                    *("-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"),
                    *("-D", str(replica.data), "-R", "-X", "stream", "-c", "fast"),
                ]
            )
        )
        return replica.start()

    def stop(self) -> None:
        """Stop the server (fast shutdown); nothing when it is not running."""
        if self.port and (self.data / "postmaster.pid").exists():
            command = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]
            subprocess.run(_as_server_user(command), capture_output=True, check=False)

    def remove(self) -> None:
        """Stop the server and delete its directory."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.remove()


class Bouncer:
    """A PgBouncer in transaction pooling mode in front of ``server_url``'s host and port, for
    every database of it (trust authentication; ``pool_size`` server connections per database
    and user, each closed after ``server_idle_timeout`` seconds unused), on the first free port
    of ``ports``. :meth:`close` stops it."""

    def __init__(
        self,
        server_url: str,
        *,
        pool_size: int = 20,
        ports: Iterable[int] = PORTS,
        server_idle_timeout: int = 600,
    ) -> None:
        executable = pgbouncer()
        if executable is None:
            raise RuntimeError(missing(pooler=True))
        info = psycopg.conninfo.conninfo_to_dict(server_url)
        self.user = str(info.get("user") or "postgres")
        self.root = Path(tempfile.mkdtemp(prefix="jobs-pgbouncer-"))
        os.chmod(self.root, 0o755)
        (self.root / "users.txt").write_text(f'"{self.user}" ""\n')
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        for port in ports:
            if not _free(port):
                continue
            config = self.root / "pgbouncer.ini"
            config.write_text(
                "[databases]\n"
                f"* = host={info.get('host') or '127.0.0.1'} port={info.get('port') or 5432}\n"
                "[pgbouncer]\n"
                f"listen_addr = 127.0.0.1\nlisten_port = {port}\n"
                f"unix_socket_dir = {self.root}\n"
                "auth_type = trust\n"
                f"admin_users = {self.user}\n"
                f"auth_file = {self.root / 'users.txt'}\n"
                "pool_mode = transaction\n"
                f"default_pool_size = {pool_size}\nmax_client_conn = 2000\n"
                "reserve_pool_size = 0\nserver_reset_query =\n"
                f"server_idle_timeout = {server_idle_timeout}\n"
                "ignore_startup_parameters = extra_float_digits\n"
                f"logfile = {self.root / 'pgbouncer.log'}\n"
                "log_connections = 0\nlog_disconnections = 0\n"
                + (f"user = {SERVER_USER}\n" if os.geteuid() == 0 else "")
            )
            _give(self.root)
            # Run as root, pgbouncer drops to ``user`` itself (same process: killing it by its
            # id ends it; a ``runuser`` in between would leave it orphaned on a kill).
            process = subprocess.Popen(
                [executable, str(config)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self.port = port
            if self._serving(process):
                self._process = process
                return
            if process.poll() is None:
                process.kill()
            process.wait()
        raise RuntimeError(f"no free port for pgbouncer in {list(PORTS)} (see {self.root})")

    def _serving(self, process: subprocess.Popen[bytes]) -> bool:
        """True once ``process`` answers on ``self.port``; False if it exited (the port was
        taken meanwhile). A pooler that cannot bind its TCP port does not exit (it serves its
        unix socket), and another session's pooler may answer on that port: the admin console
        names the socket directory of the pooler that answered."""
        deadline = time.monotonic() + 10
        while process.poll() is None and time.monotonic() < deadline:
            try:
                with psycopg.connect(self.url("pgbouncer"), autocommit=True) as conn:
                    cursor = psycopg.ClientCursor(conn)
                    cursor.execute("SHOW CONFIG")
                    settings = {row[0]: row[1] for row in cursor.fetchall()}
                return settings.get("unix_socket_dir") == str(self.root)
            except psycopg.OperationalError:
                time.sleep(0.1)
        return False

    def url(self, database: str = "postgres") -> str:
        """The URL of ``database`` through the pooler."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def server_connections(self, database: str | None = None) -> int:
        """The server connections the pooler holds now (``SHOW SERVERS``), of ``database`` or
        all."""
        # the admin console speaks the simple query protocol only: a client-side cursor
        with psycopg.connect(self.url("pgbouncer"), autocommit=True) as conn:
            cursor = psycopg.ClientCursor(conn)
            cursor.execute("SHOW SERVERS")
            names = [column.name for column in cursor.description or ()]
            rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        return sum(1 for row in rows if database is None or row.get("database") == database)

    def close(self) -> None:
        """Stop the pooler and delete its directory."""
        if self._process is not None:
            self._process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=10)
            if self._process.poll() is None:
                self._process.kill()
                self._process.wait()
            self._process = None
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Bouncer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@contextlib.contextmanager
def primary_and_standby(**settings: str) -> Iterator[tuple[Cluster, Cluster]]:
    """A started cluster and a streaming standby of it, both removed at the end."""
    with Cluster(settings=settings) as primary:
        primary.start()
        with primary.standby() as standby:
            yield primary, standby
