"""Invariant 11 with real processes: four ``python -m jobs_worker`` processes, each running its
scheduler thread, on one per-second schedule for at least 30 ticks: every tick enqueued once,
none doubled, none skipped."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jobs_core import Registry, SystemClock
from jobs_core.schedules import MissedPolicy, Schedule
from jobs_core.scheduling import ScheduleService
from jobs_postgres.cron import CronsimCron
from jobs_postgres.schedules import PostgresScheduleStore
from jobs_worker.demo import registry as demo_registry
from sqlalchemy import text

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TICKS = 32


def _runs(engine: Engine) -> list[tuple[object, object]]:
    with engine.connect() as conn:
        return [
            (row.tick, row.job_id)
            for row in conn.execute(
                text(
                    "SELECT r.tick, r.job_id FROM schedule_runs r JOIN schedules s "
                    "ON s.id = r.schedule_id WHERE s.name = 'every-second' ORDER BY r.tick"
                )
            )
        ]


def test_four_worker_processes_fire_each_tick_of_a_per_second_schedule_once(
    sched_engine: Engine, pg_url: str
) -> None:
    registry = Registry("t")
    registry.include(demo_registry)
    service = ScheduleService(
        PostgresScheduleStore(sched_engine), registry, CronsimCron(), SystemClock()
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
    env.update(
        JOBS_DATABASE_URL=pg_url,
        JOBS_DEMO_TYPES="1",
        # Schedulers looking 10 times per tick: they collide on every tick.
        JOBS_SCHEDULER_INTERVAL_S="0.1",
        JOBS_POLL_INTERVAL_S="0.5",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    with tempfile.TemporaryDirectory(prefix="jobs-sched-test-") as tmp:
        logs = [Path(tmp) / f"w{i}.log" for i in range(4)]
        handles = [path.open("wb") for path in logs]
        workers = [
            subprocess.Popen(
                [sys.executable, "-m", "jobs_worker"],
                cwd=ROOT,
                env=env,
                stdout=handle,
                stderr=subprocess.STDOUT,
            )
            for handle in handles
        ]
        try:
            # Every scheduler runs before the first tick (a loaded box starts a process in
            # 10-40 s): the ticks are then contended by all four.
            deadline = time.monotonic() + 240
            while not all("event=worker.started" in p.read_text(errors="replace") for p in logs):
                assert time.monotonic() < deadline, "timed out waiting for the workers to start"
                assert all(w.poll() is None for w in workers), "a worker exited early"
                time.sleep(0.2)
            service.create(
                Schedule(
                    "every-second", "org-sched", "noop", "* * * * * *", missed=MissedPolicy.EACH
                )
            )
            deadline = time.monotonic() + 180
            while len(_runs(sched_engine)) < TICKS:
                assert time.monotonic() < deadline, "timed out waiting for the ticks"
                assert all(w.poll() is None for w in workers), "a worker exited early"
                time.sleep(0.2)
            service.pause("org-sched", "every-second")
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.send_signal(signal.SIGTERM)
            for worker in workers:
                try:
                    worker.wait(30)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait(10)
            for handle in handles:
                handle.close()
        texts = [path.read_text(errors="replace") for path in logs]
    runs = _runs(sched_engine)
    ticks = [tick for tick, _ in runs]
    assert len(runs) >= TICKS
    assert len(set(ticks)) == len(ticks), "a tick was enqueued twice"
    gaps = {b - a for a, b in itertools.pairwise(ticks)}  # type: ignore[operator]
    assert gaps == {timedelta(seconds=1)}, f"a tick was skipped: {sorted(gaps)}"
    job_ids = {job_id for _, job_id in runs}
    with sched_engine.connect() as conn:
        enqueued = (
            conn.execute(text("SELECT id FROM jobs WHERE org_id = 'org-sched' AND type = 'noop'"))
            .scalars()
            .all()
        )
    assert set(enqueued) == job_ids
    assert len(enqueued) == len(runs)
    # The workers stored the built-in purge schedule, declared in code, once.
    builtin = service.get("system", "jobs.purge")
    assert builtin.source == "code"
    assert builtin.schedule.cron == "0 4 * * *"
    firing = [t.count("event=schedule.fired") for t in texts]
    assert sum(1 for n in firing if n) >= 2, f"only one process ever fired: {firing}"
