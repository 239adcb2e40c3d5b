"""The API as a real process: ``python -m jobs_api`` under uvicorn on a free port, called over
real HTTP with httpx, stopped with SIGTERM."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from jobs_core import SystemClock
from jobs_tokens import TokenStore, issue_token

from tests.api.server import ApiProcess

pytestmark = pytest.mark.slow


StartApi = Callable[..., ApiProcess]


@pytest.fixture
def start_api() -> Iterator[StartApi]:
    """Start API processes; each is stopped at the end of the test."""
    started: list[ApiProcess] = []

    def start(
        env: dict[str, str], registries: tuple[str, ...] = ("tests.api.helpers:registry",)
    ) -> ApiProcess:
        started.append(ApiProcess(env, registries))
        return started[-1]

    yield start
    for api in started:
        api.stop()


def test_a_real_server_answers_and_stops_cleanly_on_sigterm(
    start_api: StartApi,
) -> None:
    api = start_api({"JOBS_STORE": "memory", "JOBS_MAX_BODY_BYTES": "4096"})
    with httpx.Client(base_url=api.base_url, timeout=10) as http:
        assert http.get("/healthz").json() == {"status": "ok"}

        anonymous = http.get("/jobs")
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"] == "Bearer"
        assert anonymous.headers["content-type"] == "application/problem+json"

        too_large = http.post("/jobs", json={"type": "noop", "payload": {"pad": "x" * 8192}})
        assert too_large.status_code == 413
        assert too_large.json()["detail"] == "the request body is larger than 4096 bytes"

        schema = http.get("/openapi.json").json()
        assert "/jobs/{job_id}/retry" in schema["paths"]
    api.stop()
    assert api.shut_down_cleanly


def test_demo_types_are_served_with_jobs_demo_types(start_api: StartApi) -> None:
    # Issue 11: the demo types are enqueueable over HTTP only with the development flag.
    api = start_api(
        {"JOBS_STORE": "memory", "JOBS_DEMO_TYPES": "1", "JOBS_DEMO_OVER_HTTP": "1"},
        registries=(),
    )
    with httpx.Client(base_url=api.base_url, timeout=10) as http:
        schema = http.get("/openapi.json").json()
    body = schema["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]
    assert {"noop", "sleep", "fail", "crash"} <= set(body["schema"]["discriminator"]["mapping"])


@pytest.mark.postgres
def test_enqueue_and_poll_over_real_http_on_postgres(
    start_api: StartApi, pg_url: str, pg_engine: Any
) -> None:
    from jobs_postgres.tokens import PostgresTokenStore

    tokens: TokenStore = PostgresTokenStore(pg_engine)
    token, _ = issue_token(tokens, "org-http", "http test", SystemClock().now())
    other, _ = issue_token(tokens, "org-other", "http test", SystemClock().now())
    api = start_api({"JOBS_DATABASE_URL": pg_url, "JOBS_STORE": "postgres"})
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=api.base_url, timeout=10) as http:
        assert http.get("/healthz").status_code == 200
        created = http.post(
            "/jobs", json={"type": "greet", "payload": {"name": "Ada"}}, headers=auth
        )
        assert created.status_code == 202
        polled = http.get(created.headers["location"], headers=auth)
        assert polled.status_code == 200
        assert polled.json()["status"] == "queued"
        assert polled.json()["type"] == "greet"

        foreign = http.get(
            created.headers["location"], headers={"Authorization": f"Bearer {other}"}
        )
        assert foreign.status_code == 404

        cancelled = http.post(f"{created.headers['location']}/cancel", headers=auth)
        assert cancelled.json()["status"] == "cancelled"
        assert (
            http.get("/jobs?status=finished", headers=auth).json()["items"][0]["id"]
            == (created.json()["id"])
        )
    api.stop()
    assert api.shut_down_cleanly


def test_demo_types_are_not_enqueueable_over_http_without_the_development_flag(
    start_api: StartApi,
) -> None:
    api = start_api({"JOBS_STORE": "memory", "JOBS_DEMO_TYPES": "1"}, registries=())
    with httpx.Client(base_url=api.base_url, timeout=10) as http:
        schema = http.get("/openapi.json").json()
    body = schema["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]
    assert "discriminator" not in body["schema"]  # no public type at all


@pytest.mark.postgres
def test_the_connection_stays_usable_after_an_unexpected_error(
    start_api: StartApi, pg_url: str, pg_engine: Any
) -> None:
    import http.client

    from jobs_postgres.tokens import PostgresTokenStore

    token, _ = issue_token(PostgresTokenStore(pg_engine), "org-500", None, SystemClock().now())
    api = start_api(
        {"JOBS_DATABASE_URL": pg_url, "JOBS_STORE": "postgres"},
        registries=("tests.api.helpers:registry", "tests.api.helpers:broken_registry"),
    )
    host, port = api.base_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    connection.request("POST", "/jobs", body=b'{"type": "broken"}', headers=auth)
    failed = connection.getresponse()
    body = failed.read()
    first_socket = connection.sock
    assert failed.status == 500
    assert b"hunter2" not in body  # internals stay in the log
    connection.request("POST", "/jobs", body=b'{"type": "noop"}', headers=auth)
    after = connection.getresponse()
    after.read()
    assert after.status == 202
    assert connection.sock is first_socket, "the server dropped the connection after the 500"
    connection.close()
