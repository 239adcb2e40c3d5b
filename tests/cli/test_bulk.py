"""``jobs bulk``: retry, cancel or delete many jobs of an org from a terminal, with a dry run and
a table of what became of them, against the session's PostgreSQL."""

from __future__ import annotations

import json
import uuid

import pytest
from jobs_core import Failed, FakeClock, JobService, JobType, Registry
from jobs_postgres.store import PostgresJobStore

from tests.cli.helpers import InProcess, new_org

pytestmark = pytest.mark.postgres


def _failed_jobs(store: PostgresJobStore, org: str, count: int) -> list[uuid.UUID]:
    registry = Registry("cli-bulk")
    registry.register(JobType("noop", lambda ctx: None))
    service = JobService(store, registry, FakeClock())
    ids = [service.enqueue(org, "noop").job.id for _ in range(count)]
    for job in service.claim(count):
        service.complete(job.ref, Failed(error="broke"))
    return ids


def test_bulk_retry_of_the_failed_jobs_with_a_dry_run_first(
    pg_store: PostgresJobStore, jobs_here: InProcess
) -> None:
    org = new_org()
    ids = _failed_jobs(pg_store, org, 3)
    other = _failed_jobs(pg_store, new_org(), 1)
    code, out, err = jobs_here("bulk", "retry", "--org", org, "--status", "failed", "--dry-run")
    assert (code, err) == (0, "")
    assert "retried  3" in out
    assert "3 of 3 matched jobs would be changed." in out
    assert "Dry run: nothing changed." in out
    assert all(pg_store.get(org, i).status.value == "failed" for i in ids)  # type: ignore[union-attr]
    code, out, _ = jobs_here("bulk", "retry", str(ids[0]), str(other[0]), "--org", org, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["done"] == {"retried": 1}
    assert report["skipped"] == [
        {"id": str(other[0]), "reason": "not_found", "detail": "no such job"}
    ]
    code, out, _ = jobs_here("bulk", "delete", "--org", org, "--status", "queued", "--limit", "1")
    assert code == 0
    assert "skipped: wrong_status  1" in out  # the retried job is queued: not deletable


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "name the jobs"),
        ((str(uuid.uuid4()), "--status", "failed"), "not both"),
        (("--status", "failed", "--limit", "5000"), "limit is 1 to 1000"),
        (("--status", "lost"), "--status 'lost' is not one of"),
        (("nope",), "is not a job id"),
    ],
)
def test_bad_bulk_commands_say_what_to_do(
    jobs_here: InProcess, args: tuple[str, ...], message: str
) -> None:
    code, out, err = jobs_here("bulk", "cancel", *args, "--org", new_org())
    assert code == 2
    assert out == ""
    assert message in err
