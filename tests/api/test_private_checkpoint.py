"""The private checkpoint is never shown over HTTP nor logged as an event (decision 0025)."""

from __future__ import annotations

import httpx
import pytest
from jobs_api.containers import Container
from jobs_core import Done, JobService

from tests.api.conftest import bearer
from tests.api.helpers import claim

SECRET = "frontier-https://private.example/only-for-the-handler"

pytestmark = pytest.mark.anyio


async def test_get_list_and_events_never_show_the_checkpoint(
    client: httpx.AsyncClient, container: Container, token_a: str
) -> None:
    service: JobService = container.service()
    created = await client.post("/jobs", json={"type": "noop"}, headers=bearer(token_a))
    assert created.status_code == 202
    job_id = created.json()["id"]
    running = claim(service, job_id)
    assert service.store.save_progress(
        running.ref, {"done": 1, "total": 2}, running.run_at, checkpoint={"frontier": [SECRET]}
    )
    assert service.store.checkpoint_of(running.id) == {"frontier": [SECRET]}
    shown = await client.get(f"/jobs/{job_id}", headers=bearer(token_a))
    assert shown.status_code == 200
    assert shown.json()["progress"]["done"] == 1
    assert "checkpoint" not in shown.json()
    listed = await client.get("/jobs", headers=bearer(token_a))
    assert listed.status_code == 200
    service.complete(running.ref, Done({"ok": True}))
    ended = await client.get(f"/jobs/{job_id}", headers=bearer(token_a))
    for answer in (shown, listed, ended):
        assert SECRET not in answer.text
    if container.config.store() == "postgres":
        from sqlalchemy import text

        with container.engine().connect() as conn:
            logged = conn.execute(
                text(
                    "SELECT kind, to_jsonb(e)::text FROM job_events e WHERE job_id = :id"
                    " ORDER BY seq"
                ),
                {"id": running.id},
            ).all()
        assert [kind for kind, _ in logged] == ["enqueued", "claimed", "progress", "done"]
        assert all(SECRET not in job and '"checkpoint"' not in job for _, job in logged)
