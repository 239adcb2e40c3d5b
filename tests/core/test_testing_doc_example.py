"""The worked example of docs/testing.md, kept runnable: the three parts of that page (the
module, its conftest, its tests) in one file."""

# -- mymodule/jobs.py -----------------------------------------------------------------------
from collections.abc import Mapping
from typing import Any

import pytest
from jobs_core import CancelReason, Job, JobContext, JobType, Registry, Status
from jobs_core.testing import JobsHarness

registry = Registry("mymodule")
marked: dict[str, str] = {}  # stands for your module's own table


def crawl_site(ctx: JobContext) -> Mapping[str, Any]:
    state = dict(ctx.resume or {"next": 0})  # the private checkpoint of an earlier attempt
    pages = int(ctx.payload["pages"])
    while state["next"] < pages:
        ctx.raise_if_cancelled()
        state["next"] += 1
        ctx.save_progress(state["next"], pages, checkpoint=state)  # public + private, atomically
        if state["next"] % 10 == 0:
            ctx.report_progress(state["next"], pages, stage="fetching")  # throttled
    return {"pages": pages}


def mark_cancelled(job: Job) -> None:  # runs at least once: idempotent
    marked[str(job.id)] = "cancelled"


registry.register(JobType("crawl_site", crawl_site, on_cancel=mark_cancelled))


# -- tests/conftest.py ----------------------------------------------------------------------
@pytest.fixture
def jobs_registry() -> Registry:
    return registry  # the plugin's jobs_harness now runs your types


# -- tests/test_crawl.py --------------------------------------------------------------------
def test_a_crawl_runs_to_the_end(jobs_harness: JobsHarness) -> None:
    jobs_harness.enqueue("crawl_site", {"pages": 3})
    job = jobs_harness.run_next()  # claim, run with the real runner, record the outcome
    assert job is not None
    assert job.status is Status.DONE
    assert job.report == {"pages": 3}


def test_a_shutdown_hands_back_and_the_next_attempt_resumes(jobs_harness: JobsHarness) -> None:
    job = jobs_harness.enqueue("crawl_site", {"pages": 5})
    back = jobs_harness.run_next(cancel=CancelReason.SHUTDOWN, at_progress=2)
    assert back is not None
    assert back.status is Status.QUEUED  # handed back, its attempt refunded
    assert jobs_harness.checkpoint_of(job) == {"next": 2}  # private: never in GET /jobs/{id}
    done = jobs_harness.run_next()
    assert done is not None
    assert (done.status, done.attempts) == (Status.DONE, 1)


def test_a_job_cancelled_while_queued_is_marked(jobs_harness: JobsHarness) -> None:
    job = jobs_harness.enqueue("crawl_site", {"pages": 5})
    jobs_harness.cancel(job)  # as the API does: no worker involved
    jobs_harness.drain()  # a worker's hook pass runs the due on_cancel
    assert marked[str(job.id)] == "cancelled"
    jobs_harness.assert_enqueued("crawl_site", {"pages": 5}, status=Status.CANCELLED)
