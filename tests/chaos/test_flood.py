"""The hostile-tenant flood at CI scale (issue 23; docs/chaos.md, "The hostile tenant"): a real
API and a real worker, one org flooding with per-second schedules and enqueues over HTTP while
another org's probes wait. With quotas on, every bound below is the quotas' doing, and none is a
time: the hostile org gets no per-second schedule, its queue never passes its quota, its
refusals are 429s naming the quota with ``Retry-After``, and no probe of the other org waits
behind more jobs than that quota (plus its own probes and the slots).

The figures of the same flood at full scale, with and without quotas, are in
``bench/results/flood.md`` (``python -m bench.flood``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
MAX_QUEUED = 50
SLOTS = 2
FLOODERS = 4


def test_with_quotas_a_flooding_tenant_cannot_hold_another_orgs_job_back(pg_server: str) -> None:
    from jobs_postgres.database import with_database

    with tempfile.TemporaryDirectory(prefix="jobs-flood-test-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
        command = [
            sys.executable,
            "-m",
            "bench.flood",
            *("--small", "--schedules", "30", "--duration-s", "8", "--flooders", str(FLOODERS)),
            *("--max-queued", str(MAX_QUEUED), "--enqueue-rate", "20"),
            *("--job-ms", "300", "--slots", str(SLOTS), "--probe-wait-s", "90"),
            *("--pg-url", with_database(pg_server, "postgres"), "--out", tmp),
        ]
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False
        )
        said = f"exit {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert done.returncode == 0, said
        figures = json.loads(done.stdout.strip().splitlines()[-1])

    # no per-second schedule for a tenant: each refused naming the quota; per-minute ones pass
    assert figures["schedules"] == {
        "per-second 422 schedule_interval": 30,
        "per-minute 201": 30,
    }, said
    enqueues = figures["hostile_enqueues"]
    assert enqueues.get("202", 0) > 0, said
    # refused, and told which quota and when to come back; never anything else
    assert set(enqueues) <= {"202", "429 queued_jobs", "429 enqueue_rate"}, said
    assert enqueues.get("429 queued_jobs", 0) + enqueues.get("429 enqueue_rate", 0) > 0, said
    assert set(figures["retry_after"]) <= {"1", "2"}, said
    # the quota is counted once a second, so the enqueues in flight when it is counted may
    # pass it (at most one per hostile client); the scheduler's ticks stay within it
    assert figures["hostile_queued_max"] <= MAX_QUEUED + FLOODERS, said
    # every probe of the other org ran, behind at most the hostile quota's worth of jobs
    assert figures["probes"] > 0
    assert figures["probes_started"] == figures["probes"], said
    assert figures["ahead_max"] <= MAX_QUEUED + FLOODERS + figures["probes"] + SLOTS, said
