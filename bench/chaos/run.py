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

import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.chaos import check, jobtype, plan
from bench.chaos.config import (
    EXIT_BROKEN,
    EXIT_OK,
    EXIT_SETUP,
    EXIT_USAGE,
    FAULTS,
    ORG,
    ROOT,
    Config,
    SetupError,
    build_parser,
    resolve,
)
from bench.chaos.faults import Faults
from bench.chaos.fleet import Db, Fleet
from bench.chaos.proxy import BlackholeProxy
from bench.chaos.results import db_name, environment, jsonable, write_results
from bench.chaos.server import ChaosPostgres
from bench.common import compile_bytecode


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
        self.faults = Faults(self)
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
        self.environment = environment()  # the commit that runs, read before it can change
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
            linked_url = f"postgresql://postgres@127.0.0.1:{self.proxy.port}/{db_name(url)}"
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
        if self.faults.thread is not None:
            self.faults.thread.join(cfg.blackhole_s + cfg.blackhole_wait_s + 10)
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
                self.faults.work_over.set()  # a blackhole still waiting for a job gives up
                if not self.faults.active.is_set():
                    return finished_in
            if now - began > cfg.timeout_s:
                print(f"timeout: {cfg.timeout_s:g} s elapsed with jobs unfinished", flush=True)
                return finished_in
            kind = min(due, key=due.__getitem__) if due else None
            if kind is not None and due[kind] <= now:
                if self.faults.inflict(kind):
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
            "config": jsonable(asdict(cfg)),
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
