"""A job's children over HTTP (decision 0045): ``GET /jobs?parent_id=`` lists them, every
listed row and ``GET /jobs/{id}`` say how many a job has and how many ended (``children``), on
both stores. An org never reads another org's children; a malformed id is a 422 that says so."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from jobs_api.containers import Container
from jobs_core import Done, JobContext, JobService

from tests.api.helpers import claim, finish
from tests.api.routes_kit import enqueue, service_of

pytestmark = pytest.mark.anyio


def _fan_out(service: JobService, parent_id: str, count: int) -> None:
    """Run the job ``parent_id`` as a worker would, its handler enqueuing ``count`` children
    (``ctx.enqueue_many``) written with its done outcome."""
    held = claim(service, parent_id)
    ctx = JobContext(
        held,
        progress_sink=lambda _doc: True,
        now=service.clock.now,
        registry=service.registry,
        enqueuer=service.enqueue_children,
    )
    ctx.enqueue_many("noop", [{} for _ in range(count)])
    assert service.complete(held.ref, Done(None, ctx.children)) is not None


async def _page(client: httpx.AsyncClient, headers: dict[str, str], query: str) -> Any:
    answer = await client.get(f"/jobs?{query}", headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


async def test_a_parent_lists_its_children_and_says_how_many_ended(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    service = service_of(container)
    parent = await enqueue(client, as_a, "noop")
    _fan_out(service, parent["id"], 3)
    plain = await enqueue(client, as_a, "noop")
    kids = (await _page(client, as_a, f"parent_id={parent['id']}"))["items"]
    assert len(kids) == 3
    assert {kid["parent_id"] for kid in kids} == {parent["id"]}
    assert plain["id"] not in {kid["id"] for kid in kids}
    finish(service, kids[0]["id"], Done({}))  # claims the others too: they run on

    rows = {job["id"]: job for job in (await _page(client, as_a, "limit=50"))["items"]}
    assert rows[parent["id"]]["children"] == {"total": 3, "ended": 1}
    assert rows[plain["id"]]["children"] is None
    assert all(rows[kid["id"]]["children"] is None for kid in kids)
    alone = (await client.get(f"/jobs/{parent['id']}", headers=as_a)).json()
    assert alone["children"] == {"total": 3, "ended": 1}

    # The other filters and the cursor apply to the children's list as to any list.
    done = (await _page(client, as_a, f"parent_id={parent['id']}&status=done"))["items"]
    assert [job["id"] for job in done] == [kids[0]["id"]]
    first = await _page(client, as_a, f"parent_id={parent['id']}&limit=2")
    assert [job["id"] for job in first["items"]] == [kid["id"] for kid in kids[:2]]
    rest = await _page(
        client, as_a, f"parent_id={parent['id']}&limit=2&cursor={first['next_cursor']}"
    )
    assert [job["id"] for job in rest["items"]] == [kids[2]["id"]]
    assert rest["next_cursor"] is None


async def test_an_org_never_reads_another_orgs_children(
    client: httpx.AsyncClient,
    as_a: dict[str, str],
    as_b: dict[str, str],
    container: Container,
) -> None:
    service = service_of(container)
    parent = await enqueue(client, as_a, "noop")
    _fan_out(service, parent["id"], 2)
    await enqueue(client, as_b, "noop")  # org b has jobs of its own
    foreign = await _page(client, as_b, f"parent_id={parent['id']}")
    assert foreign == {"items": [], "next_cursor": None}
    assert (await client.get(f"/jobs/{parent['id']}", headers=as_b)).status_code == 404
    own = (await _page(client, as_b, "limit=50"))["items"]
    assert all(job["children"] is None for job in own)


@pytest.mark.parametrize("bad", ["nope", "1234", "%00"])
async def test_a_malformed_parent_id_is_a_422_that_names_it(
    client: httpx.AsyncClient, as_a: dict[str, str], bad: str
) -> None:
    answer = await client.get(f"/jobs?parent_id={bad}", headers=as_a)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    [error] = problem["errors"]
    assert error["loc"] == ["query", "parent_id"]
    assert "UUID" in error["msg"]
