"""The chaos suite: one command, one results file, a non-zero exit when an invariant broke.

    uv run python -m bench.chaos                                  # 8 workers x 20,000 jobs
    uv run python -m bench.chaos --workers 3 --jobs 300 --small   # what CI runs (~1 min)

It starts its own PostgreSQL (the embedded server, in a temporary directory, deleted after),
migrates it, enqueues ``--jobs`` jobs of the chaos type (random durations, random retryable and
definitive failures, bugs, bad reports: :mod:`bench.chaos.plan`) and runs ``--workers`` real
``python -m jobs_worker`` processes, which load the type through ``JOBS_EXTRA_REGISTRIES``.
Worker 0 reaches the server through a TCP proxy (:mod:`bench.chaos.proxy`); the others through
the server's socket. Until every job has finished, faults come at random (exponential gaps of
the given means, each kind at least once in the first ``--first-faults-within`` seconds):

- **kill**: ``kill -9`` of a random worker; a replacement starts at once (a supervisor's job);
- **terminate**: ``pg_terminate_backend`` of ``--terminate-count`` random worker backends;
- **restart**: PostgreSQL stopped (``fast`` or ``immediate``: a crash), down for a moment,
  started again;
- **blackhole**: once worker 0 runs a job that will outlast the sweep threshold, its link stops
  forwarding without closing, for ``--blackhole-s`` (longer than the threshold), then heals;
- **cancel**: a cancellation requested for a random running job and a random queued one.

Then the workers get SIGTERM and :mod:`bench.chaos.check` checks the invariants against the
``chaos_executions`` rows the handlers wrote (``docs/chaos.md``). Results:
``bench/results/raw/chaos-<stamp>.json`` and ``.md`` (``--out`` elsewhere). Exit codes: 0 every
invariant held; 1 one broke (the results say which, with examples); 2 bad command line; 3 the
run could not be set up or did not finish (e.g. the server would not start).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.chaos import check, jobtype, plan
from bench.chaos.proxy import BlackholeProxy
from bench.chaos.server import ChaosPostgres
from bench.common import compile_bytecode

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "raw"  # git-ignored; summaries: bench/results/*.md
ORG = "chaos"
FAULTS = ("kill", "terminate", "restart", "blackhole", "cancel")
APP_PREFIX = "chaos-worker-"

EXIT_OK = 0
EXIT_BROKEN = 1
EXIT_USAGE = 2
EXIT_SETUP = 3


class SetupError(RuntimeError):
    """The run could not be set up or did not finish; the message says what to do."""


# -- the command line ------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m bench.chaos``."""
    p = argparse.ArgumentParser(
        prog="python -m bench.chaos",
        description="Run N real workers over M jobs under faults (kill -9, PostgreSQL restarts, "
        "terminated backends, a blackholed link), then check that no job was lost, none ran "
        "twice at once, none exceeded its attempts and every status matches what the handlers "
        "saw. Exit 0: every invariant held; 1: one broke; 3: the run could not be set up.",
        epilog="Rules and how to read the output: docs/chaos.md.",
    )
    g = p.add_argument_group("scale")
    g.add_argument("--workers", type=_positive_int, default=8, help="worker processes (8)")
    g.add_argument("--jobs", type=_positive_int, default=20_000, help="jobs enqueued (20000)")
    g.add_argument("--concurrency", type=_positive_int, default=4, help="slots per worker (4)")
    g.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    g.add_argument(
        "--small",
        action="store_true",
        help="CI pacing: a 3 s sweep threshold, faults packed into the first 10 s, "
        "more long jobs so the blackhole and the kills catch some running",
    )
    g = p.add_argument_group("jobs (see bench/chaos/plan.py)")
    g.add_argument("--mean-ms", type=float, default=40.0, help="mean duration of a job (40)")
    g.add_argument("--long-ratio", type=float, default=None, help="share of long jobs (0.01)")
    g.add_argument(
        "--long-ms",
        type=_range,
        default=None,
        help="long jobs: MIN-MAX ms (threshold+2 s to 2.5 x threshold+2 s)",
    )
    g.add_argument("--retry-p", type=float, default=0.08, help="retryable failure per attempt")
    g.add_argument("--fail-p", type=float, default=0.02, help="definitive failure per attempt")
    g.add_argument("--raise-p", type=float, default=0.02, help="handler bug per attempt")
    g.add_argument("--bad-return-p", type=float, default=0.01, help="non-mapping report")
    g = p.add_argument_group("worker pacing (the JOBS_ settings of every worker)")
    g.add_argument("--sweep-threshold", type=float, default=None, help="seconds (5; --small 3)")
    g.add_argument("--heartbeat", type=float, default=None, help="seconds (threshold / 10)")
    g.add_argument("--sweep-interval", type=float, default=None, help="seconds (threshold / 5)")
    g.add_argument("--worker-log-level", default="WARNING", help="JOBS_LOG_LEVEL (WARNING)")
    g = p.add_argument_group("faults (mean seconds between two of a kind; 0 turns it off)")
    g.add_argument("--kill-every", type=float, default=5.0, help="kill -9 a worker (5)")
    g.add_argument("--terminate-every", type=float, default=8.0, help="terminate backends (8)")
    g.add_argument("--terminate-count", type=_positive_int, default=5, help="backends each (5)")
    g.add_argument("--restart-every", type=float, default=60.0, help="restart PostgreSQL (60)")
    g.add_argument("--blackhole-every", type=float, default=60.0, help="blackhole worker 0 (60)")
    g.add_argument(
        "--no-blackhole",
        action="store_true",
        help="no blackhole fault, and worker 0 connects directly",
    )
    g.add_argument("--blackhole-s", type=float, default=None, help="how long (2x threshold + 2)")
    g.add_argument(
        "--blackhole-wait-s",
        type=float,
        default=30.0,
        help="how long to wait for worker 0 to hold a job that outlasts the threshold (30)",
    )
    g.add_argument("--cancel-every", type=float, default=3.0, help="request cancellations (3)")
    g.add_argument(
        "--first-faults-within",
        type=float,
        default=None,
        help="every fault kind happens once within this many seconds (20; --small 10)",
    )
    g = p.add_argument_group("run")
    g.add_argument("--timeout-s", type=float, default=1800.0, help="give up after (1800)")
    g.add_argument("--progress-s", type=float, default=5.0, help="a progress line every (5)")
    g.add_argument(
        "--out", type=Path, default=RESULTS, help="results directory (bench/results/raw)"
    )
    g.add_argument(
        "--keep-logs",
        action="store_true",
        help="keep the workers' logs (kept anyway when an invariant broke)",
    )
    return p


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _range(text: str) -> tuple[float, float]:
    low, _, high = text.partition("-")
    try:
        values = (float(low), float(high))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MIN-MAX, e.g. 3000-10000: {text!r}") from None
    if not 0 <= values[0] <= values[1]:
        raise argparse.ArgumentTypeError(f"expected 0 <= MIN <= MAX: {text!r}")
    return values


@dataclass(frozen=True, slots=True)
class Config:
    """A run's settings, resolved from the command line."""

    workers: int
    jobs: int
    concurrency: int
    seed: int
    plan: plan.PlanConfig
    sweep_threshold_s: float
    heartbeat_s: float
    sweep_interval_s: float
    worker_log_level: str
    every: dict[str, float]
    terminate_count: int
    blackhole: bool
    blackhole_s: float
    blackhole_wait_s: float
    first_faults_within_s: float
    timeout_s: float
    progress_s: float

    @property
    def worker_env(self) -> dict[str, str]:
        """The ``JOBS_`` settings every worker runs with."""
        return {
            "JOBS_CONCURRENCY": str(self.concurrency),
            "JOBS_HEARTBEAT_S": f"{self.heartbeat_s:g}",
            "JOBS_SWEEP_INTERVAL_S": f"{self.sweep_interval_s:g}",
            "JOBS_SWEEP_THRESHOLD_S": f"{self.sweep_threshold_s:g}",
            "JOBS_POLL_INTERVAL_S": "0.5",
            "JOBS_CANCEL_CHECK_S": "0.5",
            "JOBS_SHUTDOWN_GRACE_S": "10",
            "JOBS_LOG_LEVEL": self.worker_log_level,
            "JOBS_DEMO_TYPES": "0",
            "JOBS_EXTRA_REGISTRIES": "bench.chaos.jobtype:registry",
        }


def resolve(args: argparse.Namespace) -> Config:
    """The run's :class:`Config`; ``ValueError`` for inconsistent options."""
    threshold = args.sweep_threshold or (3.0 if args.small else 5.0)
    long_ratio = args.long_ratio if args.long_ratio is not None else (0.05 if args.small else 0.01)
    long_ms = args.long_ms or ((threshold + 2) * 1000, (2.5 * threshold + 2) * 1000)
    every = {
        "kill": args.kill_every,
        "terminate": args.terminate_every,
        "restart": args.restart_every,
        "blackhole": 0.0 if args.no_blackhole else args.blackhole_every,
        "cancel": args.cancel_every,
    }
    if any(v < 0 for v in every.values()):
        raise ValueError("a fault's mean interval must be >= 0 (0 turns it off)")
    return Config(
        workers=args.workers,
        jobs=args.jobs,
        concurrency=args.concurrency,
        seed=args.seed if args.seed is not None else random.SystemRandom().randrange(2**31),
        plan=plan.PlanConfig(
            mean_ms=args.mean_ms,
            long_p=long_ratio,
            long_min_ms=long_ms[0],
            long_max_ms=long_ms[1],
            retry_p=args.retry_p,
            fail_p=args.fail_p,
            raise_p=args.raise_p,
            bad_return_p=args.bad_return_p,
        ),
        sweep_threshold_s=threshold,
        heartbeat_s=args.heartbeat or threshold / 10,
        sweep_interval_s=args.sweep_interval or threshold / 5,
        worker_log_level=args.worker_log_level.upper(),
        every=every,
        terminate_count=args.terminate_count,
        blackhole=not args.no_blackhole,
        blackhole_s=args.blackhole_s or 2 * threshold + 2,
        blackhole_wait_s=args.blackhole_wait_s,
        first_faults_within_s=args.first_faults_within or (10.0 if args.small else 20.0),
        timeout_s=args.timeout_s,
        progress_s=args.progress_s,
    )


# -- workers ---------------------------------------------------------------------------------------
@dataclass
class WorkerSlot:
    """One worker position: a ``python -m jobs_worker`` process, replaced when it dies."""

    index: int
    url: str
    linked: bool
    process: subprocess.Popen[bytes] | None = None
    generation: int = 0
    log_paths: list[Path] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Fleet:
    """The worker processes, their deaths and replacements."""

    def __init__(self, config: Config, direct_url: str, linked_url: str | None, logs: Path) -> None:
        self.config = config
        self.logs = logs
        self.direct_url = direct_url
        self.journals = logs / "journal"
        self.journals.mkdir(exist_ok=True)
        self.slots = [
            WorkerSlot(i, linked_url if (i == 0 and linked_url) else direct_url, i == 0)
            for i in range(config.workers)
        ]
        self.killed: dict[int, float] = {}
        self.exited: dict[int, float] = {}
        self.ended: dict[int, float] = {}  # pid -> when the reaper saw it end
        self.exit_codes: dict[int, int] = {}
        self.unexpected_exits: list[dict[str, Any]] = []
        self.replacements = 0
        self.lock = threading.Lock()

    def start(self, slot: WorkerSlot) -> None:
        slot.generation += 1
        log_path = self.logs / f"worker-{slot.index}-{slot.generation}.log"
        slot.log_paths.append(log_path)
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
        env.update(
            {
                **self.config.worker_env,
                "JOBS_DATABASE_URL": slot.url,
                "JOBS_DATA_DIR": str(self.logs / "data"),
                jobtype.RECORDER_URL_ENV: self.direct_url,
                jobtype.JOURNAL_DIR_ENV: str(self.journals),
                "PGAPPNAME": self.app_name(slot),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
            }
        )
        with log_path.open("wb") as log:
            slot.process = subprocess.Popen(
                [sys.executable, "-m", "jobs_worker"],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches the runner only; it stops them
            )
        threading.Thread(
            target=self._watch, args=(slot.process,), name="chaos-reaper", daemon=True
        ).start()

    def _watch(self, process: subprocess.Popen[bytes]) -> None:
        """Note the instant the process ends: an execution it left without an end row ran
        until then (never earlier, so no overlap is hidden)."""
        process.wait()
        self.ended[process.pid] = time.time()

    def start_all(self) -> None:
        for slot in self.slots:
            self.start(slot)

    def app_name(self, slot: WorkerSlot) -> str:
        """The ``application_name`` of the slot's current process's connections."""
        return f"{APP_PREFIX}{slot.index}-{slot.generation}"

    def wait_started(self, db: Db, timeout_s: float) -> None:
        """Wait until every worker has a session on the server (its worker log shows only
        warnings, so the server is where a start is seen)."""
        deadline = time.monotonic() + timeout_s
        for slot in self.slots:
            while not db.query(
                "SELECT 1 FROM pg_stat_activity WHERE application_name = %s",
                (self.app_name(slot),),
            ):
                if not slot.alive():
                    raise SetupError(
                        f"worker {slot.index} exited at start:\n{_read(slot.log_paths[-1])[-2000:]}"
                    )
                if time.monotonic() > deadline:
                    raise SetupError(f"worker {slot.index} did not start within {timeout_s:g} s")
                time.sleep(0.1)

    def kill(self, slot: WorkerSlot) -> int | None:
        """``kill -9`` the slot's process and start its replacement; the pid killed."""
        with self.lock:
            process = slot.process
            if process is None or process.poll() is not None:
                return None
            self.killed[process.pid] = time.time()
            os.kill(process.pid, signal.SIGKILL)
            process.wait(30)
            self.killed[process.pid] = self._end_of(process)
            self.exit_codes[process.pid] = process.returncode
            self.replacements += 1
            self.start(slot)
            return process.pid

    def supervise(self) -> None:
        """Restart a worker that exited without being killed (as systemd would), noting it."""
        with self.lock:
            for slot in self.slots:
                process = slot.process
                if process is None or process.poll() is None:
                    continue
                self.exited[process.pid] = self._end_of(process)
                self.exit_codes[process.pid] = process.returncode
                self.unexpected_exits.append(
                    {
                        "slot": slot.index,
                        "pid": process.pid,
                        "code": process.returncode,
                        "log": str(slot.log_paths[-1]),
                        "tail": _read(slot.log_paths[-1])[-1500:],
                    }
                )
                self.replacements += 1
                self.start(slot)

    def _end_of(self, process: subprocess.Popen[bytes]) -> float:
        deadline = time.monotonic() + 1.0  # the reaper notes it a moment after wait() returns
        while process.pid not in self.ended and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.ended.get(process.pid, time.time())

    def alive_count(self) -> int:
        return sum(slot.alive() for slot in self.slots)

    def stop_all(self, timeout_s: float) -> list[int]:
        """SIGTERM every worker, wait, SIGKILL what is left; the pids that had to be killed."""
        with self.lock:
            for slot in self.slots:
                if slot.alive():
                    assert slot.process is not None
                    slot.process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            stuck = []
            for slot in self.slots:
                process = slot.process
                if process is None:
                    continue
                try:
                    process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    stuck.append(process.pid)
                    process.kill()
                    process.wait(10)
                self.exited.setdefault(process.pid, self._end_of(process))
                self.exit_codes[process.pid] = process.returncode
            return stuck

    def kill_all(self) -> None:
        for slot in self.slots:
            if slot.alive():
                assert slot.process is not None
                slot.process.kill()
                slot.process.wait(10)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


# -- the database, as the runner sees it -----------------------------------------------------------
class Db:
    """The runner's own connection, reopened after a restart or a terminated backend."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None

    def query(self, sql: str, params: Any = None, *, patience_s: float = 60.0) -> list[Any]:
        """Rows of ``sql``; retried through an outage for up to ``patience_s``."""
        import psycopg

        deadline = time.monotonic() + patience_s
        while True:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(
                        self.url, autocommit=True, application_name="chaos-runner"
                    )
                cursor = self._conn.execute(sql, params)
                return list(cursor.fetchall()) if cursor.description else []
            except (psycopg.OperationalError, psycopg.InterfaceError):
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


# -- the run ---------------------------------------------------------------------------------------
class ChaosRun:
    """Everything one run holds; :meth:`run` returns the results document."""

    def __init__(self, config: Config, workdir: Path) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.workdir = workdir
        self.events: list[dict[str, Any]] = []
        self.counts = {
            "kills": 0,
            "pg_restarts": 0,
            "pg_restarts_fast": 0,
            "pg_restarts_immediate": 0,
            "terminated_backends": 0,
            "terminate_rounds": 0,
            "blackholes": 0,
            "blackholes_holding_long_job": 0,
            "cancels_requested": 0,
            "cancels_refused": 0,
        }
        self.pg_down_s = 0.0
        self.cancel_requested: set[uuid.UUID] = set()
        self.began = time.time()
        self._stop = threading.Event()
        self._blackhole_thread: threading.Thread | None = None
        self._blackhole_active = threading.Event()
        self._work_over = threading.Event()
        self._lock = threading.Lock()

    # -- helpers --
    def event(self, kind: str, **detail: Any) -> None:
        entry = {"t": round(time.time() - self.began, 2), "kind": kind, **detail}
        with self._lock:
            self.events.append(entry)
        shown = " ".join(f"{k}={v}" for k, v in detail.items())
        print(f"[{entry['t']:7.1f}s] fault {kind} {shown}", flush=True)

    def statuses(self) -> dict[str, int]:
        rows = self.db.query("SELECT status, count(*) FROM jobs GROUP BY status")
        return {str(status): int(count) for status, count in rows}

    # -- phases --
    def run(self) -> dict[str, Any]:
        cfg = self.config
        print(
            f"chaos: {cfg.workers} workers x {cfg.concurrency} slots, {cfg.jobs} jobs, "
            f"seed {cfg.seed}, sweep threshold {cfg.sweep_threshold_s:g} s, "
            f"blackhole {'on' if cfg.blackhole else 'off'}; logs in {self.workdir}",
            flush=True,
        )
        self.environment = _environment()  # the commit that runs, read before it can change
        setup_began = time.monotonic()
        # Each replacement of a killed worker imports the whole stack: from .pyc, as deployed.
        compile_bytecode(ROOT)
        self.setup_steps = {"compile_s": round(time.monotonic() - setup_began, 1)}
        step = time.monotonic()
        self.server = ChaosPostgres()
        self.setup_steps["server_s"] = round(time.monotonic() - step, 1)
        self.proxy: BlackholeProxy | None = None
        self.db = Db(self.server.url())
        try:
            return self._run(setup_began)
        finally:
            self._stop.set()
            if self.proxy is not None:
                self.proxy.restore()
            fleet = getattr(self, "fleet", None)
            if fleet is not None:
                fleet.kill_all()
            if self.proxy is not None:
                self.proxy.close()
            self.db.close()
            self.server.close()

    def _run(self, setup_began: float) -> dict[str, Any]:
        cfg = self.config
        url = self.server.url()
        from jobs_cli.commands.admin import migrate_url

        step = time.monotonic()
        migrate_url(url)
        self.db.query(jobtype.RECORDER_DDL)
        self.db.query("CREATE INDEX IF NOT EXISTS chaos_executions_pid ON chaos_executions (pid)")
        self.setup_steps["migrate_s"] = round(time.monotonic() - step, 1)
        step = time.monotonic()
        self.enqueued = self._enqueue(url)
        self.setup_steps["enqueue_s"] = round(time.monotonic() - step, 1)
        step = time.monotonic()
        linked_url = None
        if cfg.blackhole:
            self.proxy = BlackholeProxy(self.server.socket_path)
            linked_url = f"postgresql://postgres@127.0.0.1:{self.proxy.port}/{_db_name(url)}"
        self.fleet = Fleet(cfg, url, linked_url, self.workdir)
        self.fleet.start_all()
        self.fleet.wait_started(self.db, 120)
        self.setup_steps["workers_s"] = round(time.monotonic() - step, 1)
        setup_s = time.monotonic() - setup_began
        steps = ", ".join(f"{k[:-2]} {v:g} s" for k, v in self.setup_steps.items())
        print(f"setup: {setup_s:.1f} s ({steps})", flush=True)
        chaos_began = time.monotonic()
        self.began = time.time()
        finished_in = self._chaos_loop(chaos_began)
        chaos_s = time.monotonic() - chaos_began
        self._stop.set()
        if self._blackhole_thread is not None:
            self._blackhole_thread.join(cfg.blackhole_s + cfg.blackhole_wait_s + 10)
        stuck = self.fleet.stop_all(30.0)
        lifetimes = check.Lifetimes(
            killed=dict(self.fleet.killed), exited=dict(self.fleet.exited), run_end=time.time()
        )
        self._load_journals()
        verdict = self._check(lifetimes)
        return self._results(verdict, setup_s, chaos_s, finished_in, stuck)

    def _enqueue(self, url: str) -> set[uuid.UUID]:
        from jobs_core import JobService, SystemClock
        from jobs_postgres.database import create_engine
        from jobs_postgres.store import PostgresJobStore

        engine = create_engine(url)
        self.service = JobService(PostgresJobStore(engine), jobtype.registry, SystemClock())
        ids: set[uuid.UUID] = set()
        documents = plan.payloads(self.rng, self.config.jobs, self.config.plan)
        for start in range(0, len(documents), 2000):
            batch = documents[start : start + 2000]
            jobs = self.service.enqueue_many(ORG, jobtype.TYPE_NAME, batch)
            ids.update(job.id for job in jobs)
        if len(ids) != self.config.jobs:
            raise SetupError(f"enqueued {len(ids)} jobs instead of {self.config.jobs}")
        return ids

    def _chaos_loop(self, began: float) -> float | None:
        """Faults until every job finished (and every kind happened once); the seconds it took
        every job to finish, or None on timeout."""
        cfg = self.config
        now = time.monotonic()
        kinds = [k for k in FAULTS if cfg.every[k] > 0]
        first = sorted(self.rng.uniform(1.0, cfg.first_faults_within_s) for _ in kinds)
        self.rng.shuffle(kinds)
        due = {kind: now + at for kind, at in zip(kinds, first, strict=True)}
        if "blackhole" in due:
            # The only fault that needs work left (a long job held by worker 0), so it comes
            # first: the others still happen once after the queue drained, but a small run can
            # drain within the window (300 jobs in ~7 s), and a late blackhole found none.
            first_kind = min(due, key=due.__getitem__)
            due[first_kind], due["blackhole"] = due["blackhole"], due[first_kind]
        pending_first = set(kinds)
        next_progress = next_done_check = now
        last_finished, last_t = 0, now
        finished_in: float | None = None
        while True:
            now = time.monotonic()
            self.fleet.supervise()
            if now >= next_progress:
                counts = self._progress(now - began, last_finished, now - last_t)
                last_finished, last_t = counts["finished"], now
                next_progress = now + cfg.progress_s
            if finished_in is None and now >= next_done_check:
                # Every half second (the queue index makes it cheap), so the duration is exact
                # to that, not to the progress period.
                next_done_check = now + 0.5
                if self._all_finished():
                    finished_in = now - began
                    # The work is over: only the kinds that have not happened yet are due.
                    due = {k: at for k, at in due.items() if k in pending_first}
                    self._progress(now - began, last_finished, now - last_t)
            if finished_in is not None and not pending_first:
                self._work_over.set()  # a blackhole still waiting for a job gives up
                if not self._blackhole_active.is_set():
                    return finished_in
            if now - began > cfg.timeout_s:
                print(f"timeout: {cfg.timeout_s:g} s elapsed with jobs unfinished", flush=True)
                return finished_in
            kind = min(due, key=due.__getitem__) if due else None
            if kind is not None and due[kind] <= now:
                if self._fault(kind):
                    pending_first.discard(kind)
                due[kind] = time.monotonic() + self.rng.expovariate(1 / cfg.every[kind])
                if finished_in is not None:
                    # The work is over: only the kinds that have not happened yet are due.
                    due = {k: at for k, at in due.items() if k in pending_first}
                continue
            wake = min([next_progress, *due.values()]) if due else next_progress
            time.sleep(max(0.0, min(0.2, wake - time.monotonic())))

    def _all_finished(self) -> bool:
        try:
            rows = self.db.query(
                "SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')", patience_s=1
            )
        except Exception:
            return False  # the server is down: not finished as far as anyone can tell
        return bool(rows) and int(rows[0][0]) == 0

    def _progress(self, elapsed: float, last_finished: int, interval: float) -> dict[str, int]:
        try:
            statuses = self.statuses()
        except Exception as error:
            print(f"[{elapsed:7.1f}s] database unreachable from the runner: {error}", flush=True)
            return {"finished": last_finished}
        finished = sum(statuses.get(s, 0) for s in check.FINISHED)
        rate = f"{(finished - last_finished) / interval:.0f}" if interval > 0.5 else "-"
        c = self.counts
        hole = " (on)" if self.proxy is not None and self.proxy.silent else ""
        print(
            f"[{elapsed:7.1f}s] finished {finished}/{self.config.jobs} "
            f"(done {statuses.get('done', 0)} failed {statuses.get('failed', 0)} "
            f"cancelled {statuses.get('cancelled', 0)}) running {statuses.get('running', 0)} "
            f"queued {statuses.get('queued', 0)} | {rate} jobs/s | kills {c['kills']} "
            f"restarts {c['pg_restarts']} terminated {c['terminated_backends']} "
            f"blackholes {c['blackholes']}{hole} | workers {self.fleet.alive_count()}"
            f"/{self.config.workers}",
            flush=True,
        )
        return {"finished": finished}

    # -- faults --
    def _fault(self, kind: str) -> bool:
        """Inflict one fault; False when it could not happen now (it is tried again later)."""
        try:
            return bool(getattr(self, f"_fault_{kind}")())
        except Exception as error:
            self.event(f"{kind}.error", error=repr(error)[:200])
            return False

    def _fault_kill(self) -> bool:
        candidates = [
            s
            for s in self.fleet.slots
            if s.alive() and not (s.linked and self._blackhole_active.is_set())
        ]
        if not candidates:
            return False
        slot = self.rng.choice(candidates)
        pid = self.fleet.kill(slot)
        if pid is None:
            return False
        self.counts["kills"] += 1
        self.event("kill", worker=slot.index, pid=pid, replacement=slot.pid)
        return True

    def _fault_terminate(self) -> bool:
        rows = self.db.query(
            "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s "
            "ORDER BY random() LIMIT %s",
            (f"{APP_PREFIX}%", self.config.terminate_count),
            patience_s=10,
        )
        killed = 0
        for (pid,) in rows:
            done = self.db.query("SELECT pg_terminate_backend(%s)", (pid,), patience_s=10)
            killed += bool(done and done[0][0])
        self.counts["terminated_backends"] += killed
        self.counts["terminate_rounds"] += 1
        self.event("terminate", backends=killed)
        return killed > 0

    def _fault_restart(self) -> bool:
        mode = self.rng.choice(("fast", "immediate"))
        # Down well within the sweep threshold: a restart is an outage workers ride out, not
        # a silence long enough for their lease fence (a longer one is the blackhole's case).
        downtime = self.rng.uniform(0.1, 0.35) * self.config.sweep_threshold_s
        self.db.close()
        down_s = self.server.restart(mode, downtime)
        self.pg_down_s += down_s
        self.counts["pg_restarts"] += 1
        self.counts[f"pg_restarts_{mode}"] += 1
        self.event("restart", mode=mode, down_s=round(down_s, 2))
        return True

    def _fault_blackhole(self) -> bool:
        if self.proxy is None or self._blackhole_active.is_set():
            return False
        self._blackhole_active.set()
        self._blackhole_thread = threading.Thread(
            target=self._blackhole, name="chaos-blackhole", daemon=True
        )
        self._blackhole_thread.start()
        return True

    def _blackhole(self) -> None:
        cfg = self.config
        assert self.proxy is not None
        try:
            linked = self.fleet.slots[0]
            deadline = time.monotonic() + cfg.blackhole_wait_s
            held = 0
            while time.monotonic() < deadline and not self._work_over.is_set():
                held = self._long_jobs_held(linked.pid)
                if held:
                    break
                self._work_over.wait(0.25)
            if self._work_over.is_set() and not held:
                self.event("blackhole.skipped", reason="every job had finished")
                return
            self.proxy.blackhole()
            self.counts["blackholes"] += 1
            self.counts["blackholes_holding_long_job"] += bool(held)
            self.event(
                "blackhole.on", worker=0, pid=linked.pid, long_jobs_held=held, s=cfg.blackhole_s
            )
            time.sleep(cfg.blackhole_s)  # not cut short by the end of the work: it must heal
            self.proxy.restore()
            self.event("blackhole.off", worker=0, pid=linked.pid)
        except Exception as error:
            self.proxy.restore()
            self.event("blackhole.error", error=repr(error)[:200])
        finally:
            self._blackhole_active.clear()

    def _long_jobs_held(self, pid: int | None) -> int:
        """Executions running on ``pid`` planned to last past the sweep threshold from now."""
        if pid is None:
            return 0
        rows = self.db.query(
            "SELECT count(*) FROM chaos_executions s WHERE s.kind = 'start' AND s.pid = %s "
            "AND s.at + s.planned_ms / 1000.0 > %s AND NOT EXISTS ("
            "SELECT 1 FROM chaos_executions e WHERE e.exec_id = s.exec_id AND e.kind = 'end')",
            (pid, time.time() + self.config.sweep_threshold_s + 1),
            patience_s=5,
        )
        return int(rows[0][0]) if rows else 0

    def _fault_cancel(self) -> bool:
        rows = self.db.query(
            "(SELECT id FROM jobs WHERE status = 'running' ORDER BY random() LIMIT 1) UNION ALL "
            "(SELECT id FROM jobs WHERE status = 'queued' ORDER BY random() LIMIT 1)",
            patience_s=5,
        )
        asked = 0
        for (job_id,) in rows:
            self.cancel_requested.add(job_id)  # before the call: its answer may be lost
            try:
                self.service.cancel(ORG, job_id)
            except Exception:  # finished meanwhile (InvalidTransition), or an outage
                self.counts["cancels_refused"] += 1
                continue
            asked += 1
        self.counts["cancels_requested"] += asked
        return asked > 0

    # -- the verdict --
    def _load_journals(self) -> None:
        """Complete the recorder table from the workers' journals (a row whose insert a kill
        cut short is in the journal); count what only the journals had."""
        before = self.db.query("SELECT count(*) FROM chaos_executions")[0][0]
        rows, unreadable = jobtype.read_journals(self.fleet.journals)
        import psycopg

        with psycopg.connect(self.server.url(), autocommit=True) as conn, conn.cursor() as cur:
            cur.executemany(jobtype.INSERT_ROW, rows)
        after = self.db.query("SELECT count(*) FROM chaos_executions")[0][0]
        self.witness = {
            "journal_rows": len(rows),
            "journal_lines_unreadable": unreadable,
            "rows_only_in_journals": int(after) - int(before),
            "table_rows": int(after),
        }

    def _check(self, lifetimes: check.Lifetimes) -> check.Verdict:
        jobs = [
            check.JobRow(
                id=row[0],
                status=row[1],
                attempts=row[2],
                max_attempts=row[3],
                error=row[4],
                finished_at=row[5],
                plan=row[6],
            )
            for row in self.db.query(
                "SELECT id, status, attempts, max_attempts, error, "
                "extract(epoch FROM finished_at)::float8, payload->>'plan' FROM jobs"
            )
        ]
        records = [
            check.RecordRow(*row)
            for row in self.db.query(
                "SELECT exec_id, kind, job_id, attempt, pid, at, planned_ms, outcome "
                "FROM chaos_executions"
            )
        ]
        return check.check(
            jobs,
            records,
            enqueued=self.enqueued,
            cancel_requested=self.cancel_requested,
            lifetimes=lifetimes,
        )

    def _results(
        self,
        verdict: check.Verdict,
        setup_s: float,
        chaos_s: float,
        finished_in: float | None,
        stuck: list[int],
    ) -> dict[str, Any]:
        cfg = self.config
        counts = verdict.counts()
        figures = {
            "jobs": cfg.jobs,
            "workers": cfg.workers,
            "concurrency": cfg.concurrency,
            **self.counts,
            "pg_down_s": round(self.pg_down_s, 2),
            "blackhole_s": round(self.proxy.blackholed_s, 2) if self.proxy else 0.0,
            "replacements": self.fleet.replacements,
            "unexpected_worker_exits": len(self.fleet.unexpected_exits),
            "workers_not_stopping_on_sigterm": len(stuck),
            "executions": verdict.executions,
            "witness": self.witness,
            "overlaps": counts["overlaps"],
            "overlap_s": round(verdict.overlap_seconds, 3),
            "lost": counts["lost"] + counts["missing"],
            "over_attempts": counts["over_attempts"],
            "inconsistent": counts["inconsistent"],
            "late_starts": counts["late_starts"],
            "statuses": verdict.statuses,
            "setup_s": round(setup_s, 1),
            "setup_steps": self.setup_steps,
            "duration_s": round(finished_in if finished_in is not None else chaos_s, 1),
            "chaos_s": round(chaos_s, 1),
            "throughput_jobs_per_s": (round(cfg.jobs / finished_in, 1) if finished_in else None),
            "finished": finished_in is not None,
        }
        return {
            "suite": "chaos",
            "ok": verdict.ok
            and finished_in is not None
            and not self.witness["journal_lines_unreadable"],
            "command": " ".join(["python -m bench.chaos", *sys.argv[1:]]),
            "config": _jsonable(asdict(cfg)),
            "environment": {
                **self.environment,
                "postgres": self.server.version,
                "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
            },
            "figures": figures,
            "verdict": verdict.as_dict(),
            "unexpected_worker_exits": self.fleet.unexpected_exits,
            "events": self.events,
        }


def _db_name(url: str) -> str:
    from sqlalchemy import make_url

    return str(make_url(url).database)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _environment() -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if commit and changed:
        commit += "+uncommitted changes"
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit or None,
        "note": "shared machine: other processes compete for the CPUs; read rates as rough",
    }


# -- results files ---------------------------------------------------------------------------------
def write_results(document: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """``chaos-<stamp>.json`` and ``.md`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    json_path = out / f"chaos-{stamp}.json"
    md_path = out / f"chaos-{stamp}.md"
    document["stamp"] = stamp
    json_path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    md_path.write_text(markdown(document))
    return json_path, md_path


def markdown(document: dict[str, Any]) -> str:
    """The short human summary of a results document."""
    f = document["figures"]
    v = document["verdict"]
    env = document["environment"]
    verdict = "every invariant held" if document["ok"] else "AN INVARIANT BROKE"
    lines = [
        f"# Chaos run {document.get('stamp', '')}: {verdict}",
        "",
        f"`{document['command']}` (seed {document['config']['seed']}; commit "
        f"{env['commit']}; PostgreSQL {env['postgres']}; {env['cpus']} CPUs, shared machine, "
        f"load {env['load_avg_at_end'][0]} at the end)",
        "",
        "| jobs | workers x slots | kills -9 | PG restarts (fast/immediate) | terminated backends "
        "| blackholes (s) | cancels | duration | throughput |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {f['jobs']:,} | {f['workers']} x {f['concurrency']} | {f['kills']} "
        f"| {f['pg_restarts']} ({f['pg_restarts_fast']}/{f['pg_restarts_immediate']}) "
        f"| {f['terminated_backends']} | {f['blackholes']} ({f['blackhole_s']}) "
        f"| {f['cancels_requested']} | {f['duration_s']} s "
        f"| {f['throughput_jobs_per_s'] or '-'} jobs/s |",
        "",
        "| invariant | violations |",
        "| --- | --- |",
        f"| lost (not done/failed/cancelled, or missing) | {f['lost']} |",
        f"| overlapping executions of one job | {f['overlaps']} ({f['overlap_s']} s) |",
        f"| attempts over max_attempts | {f['over_attempts']} |",
        f"| status inconsistent with the handlers | {f['inconsistent']} |",
        f"| execution started after the job finished | {f['late_starts']} |",
        f"| end rows without a start row | {v['violations']['orphan_ends']} |",
        "",
        f"Statuses: {', '.join(f'{k} {n:,}' for k, n in sorted(f['statuses'].items()))}. "
        f"Executions recorded: {f['executions']:,} ({v['open_executions_killed']} cut by a kill, "
        f"{v['open_executions_unexplained']} without an end otherwise; "
        f"{v['reruns_after_success']} re-runs after a success whose outcome was lost). "
        f"Worker replacements: {f['replacements']} "
        f"({f['unexpected_worker_exits']} exits nobody asked for). "
        f"Blackholes with a long job held: {f['blackholes_holding_long_job']}.",
    ]
    if not f["finished"]:
        lines += ["", "**The jobs did not all finish before the timeout.**"]
    for name, samples in v.get("samples", {}).items():
        lines += ["", f"## {name} (first {len(samples)})", "", "```"]
        lines += [json.dumps(sample, default=str) for sample in samples[:5]]
        lines += ["```"]
    return "\n".join(lines) + "\n"


def _interrupt_on_sigterm() -> None:
    """SIGTERM stops a run as Ctrl-C does: the workers are killed and the server deleted (a run
    started in the background has SIGINT ignored, so SIGTERM is how it is stopped)."""

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


@contextmanager
def _workdir(keep: Callable[[], bool]) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="jobs-chaos-"))
    try:
        yield path
    finally:
        if keep():
            print(f"worker logs kept in {path}", flush=True)
        else:
            shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.chaos``: run, write the results, exit 0/1/3."""
    args = build_parser().parse_args(argv)
    try:
        config = resolve(args)
    except ValueError as error:
        print(f"bench.chaos: {error}", file=sys.stderr)
        return EXIT_USAGE
    _interrupt_on_sigterm()
    outcome: dict[str, Any] = {}
    with _workdir(lambda: args.keep_logs or not outcome.get("ok", False)) as workdir:
        try:
            document = ChaosRun(config, workdir).run()
        except SetupError as error:
            print(f"bench.chaos: {error}", file=sys.stderr)
            return EXIT_SETUP
        except KeyboardInterrupt:
            print("bench.chaos: interrupted; the workers and the server are stopped", flush=True)
            return 130
        outcome["ok"] = document["ok"]
        json_path, md_path = write_results(document, args.out)
    print(md_path.read_text(), flush=True)
    print(f"results: {json_path} and {md_path}", flush=True)
    if not document["figures"]["finished"]:
        return EXIT_BROKEN
    return EXIT_OK if document["ok"] else EXIT_BROKEN
