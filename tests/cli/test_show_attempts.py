"""``jobs show`` prints every attempt of a job, and a traceback as the lines it is (issue 24:
it used to be one escaped JSON string full of ``\\n``), against the session's PostgreSQL."""

from __future__ import annotations

import json

import pytest
from jobs_core import FakeClock, JobContext, JobService, JobType, Registry, RetryPolicy
from jobs_core.runner import execute
from jobs_postgres.store import PostgresJobStore

from tests.cli.helpers import InProcess, new_org

pytestmark = pytest.mark.postgres


class Flaky(Exception):
    """Retryable."""


def _crash(ctx: JobContext) -> None:
    raise Flaky(f"attempt {ctx.job.attempts} broke")


def test_show_prints_each_attempt_and_tracebacks_as_text(
    pg_store: PostgresJobStore, jobs_here: InProcess
) -> None:
    clock = FakeClock()
    registry = Registry("cli-attempts")
    job_type = JobType("crashy", _crash, max_attempts=2, retry=RetryPolicy(retry_on=(Flaky,)))
    registry.register(job_type)
    service = JobService(pg_store, registry, clock, worker="box:77")
    org = new_org()
    job = service.enqueue(org, "crashy").job
    for _ in range(2):
        clock.advance(60)
        [claimed] = service.claim(1)
        clock.advance(1.5)
        context = JobContext(claimed, progress_sink=lambda _doc: True, now=clock.now)
        service.complete(claimed.ref, execute(job_type, context, clock.now()))

    code, out, _ = jobs_here("show", str(job.id), "--org", org)
    assert code == 0
    assert "\\n" not in out
    assert "attempts:" in out
    assert "#1 retrying" in out
    assert "#2 failed" in out
    assert out.count("box:77") == 2
    [first] = [line for line in out.splitlines() if line.startswith("  #1 ")]
    assert "attempt 1 broke" in first
    traceback_lines = [line for line in out.splitlines() if line.startswith("      ")]
    assert any("Traceback (most recent call last):" in line for line in traceback_lines)
    assert any("_crash" in line for line in traceback_lines)

    code, out, _ = jobs_here("show", str(job.id), "--json")
    history = json.loads(out)["attempt_history"]
    assert [a["outcome"] for a in history] == ["retrying", "failed"]
    assert history[1]["duration_s"] == 1.5
    assert "\n" in history[1]["traceback"]
