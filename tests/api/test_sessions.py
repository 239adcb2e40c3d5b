"""Browser sessions (docs/sessions.md): sign in with a token in a JSON body, a hardened cookie,
CSRF on cookie-authenticated writes, sign-out, revocation and expiry, org scoping. On both
stores."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from jobs_api.containers import Container
from jobs_core import FakeClock
from jobs_tokens import revoke_token

from tests.api.conftest import ORG_A

pytestmark = pytest.mark.anyio


@pytest.fixture
async def browser(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client with its own cookie jar (the browser)."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        yield http


async def sign_in(browser: httpx.AsyncClient, token: str) -> str:
    answer = await browser.post("/session", json={"token": token})
    assert answer.status_code == 200, answer.text
    csrf: str = answer.json()["csrf_token"]
    return csrf


async def test_sign_in_sets_a_hardened_cookie_and_answers_the_csrf_token(
    browser: httpx.AsyncClient, token_a: str
) -> None:
    answer = await browser.post("/session", json={"token": token_a})
    assert answer.status_code == 200
    body = answer.json()
    assert body["org_id"] == ORG_A
    assert len(body["csrf_token"]) >= 40
    assert token_a not in answer.text
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("jobs_session=")
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "path", "max-age", "samesite"} <= attributes
    assert "samesite=strict" in cookie.lower()
    assert "secure" not in attributes  # plain HTTP here
    assert token_a not in cookie
    again = await browser.get("/session")
    assert again.status_code == 200
    assert again.json()["csrf_token"] == body["csrf_token"]
    assert again.json()["org_id"] == ORG_A


async def test_over_https_the_cookie_is_secure(app: FastAPI, token_a: str) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://api.test") as http:
        answer = await http.post("/session", json={"token": token_a})
    assert answer.status_code == 200
    assert "secure" in answer.headers["set-cookie"].lower().replace("samesite", "")


async def test_reads_with_the_cookie_are_scoped_to_the_tokens_org(
    browser: httpx.AsyncClient,
    client: httpx.AsyncClient,
    token_a: str,
    as_a: dict[str, str],
    as_b: dict[str, str],
) -> None:
    mine = (await client.post("/jobs", json={"type": "noop"}, headers=as_a)).json()["id"]
    theirs = (await client.post("/jobs", json={"type": "noop"}, headers=as_b)).json()["id"]
    await sign_in(browser, token_a)
    assert (await browser.get(f"/jobs/{mine}")).status_code == 200
    assert (await browser.get(f"/jobs/{theirs}")).status_code == 404
    listed = (await browser.get("/jobs")).json()["items"]
    assert [job["id"] for job in listed] == [mine]
    assert (await browser.get("/job-types")).status_code == 200


async def test_cookie_writes_need_the_csrf_header(browser: httpx.AsyncClient, token_a: str) -> None:
    csrf = await sign_in(browser, token_a)
    refused = await browser.post("/jobs", json={"type": "noop"})
    assert refused.status_code == 403
    assert refused.json()["type"] == "urn:jobs:problem:csrf"
    assert "X-CSRF-Token" in refused.json()["detail"]
    wrong = await browser.post("/jobs", json={"type": "noop"}, headers={"X-CSRF-Token": "x" * 43})
    assert wrong.status_code == 403
    made = await browser.post("/jobs", json={"type": "noop"}, headers={"X-CSRF-Token": csrf})
    assert made.status_code == 202
    job_id = made.json()["id"]
    cancel = await browser.post(f"/jobs/{job_id}/cancel")
    assert cancel.status_code == 403
    cancel = await browser.post(f"/jobs/{job_id}/cancel", headers={"X-CSRF-Token": csrf})
    assert cancel.status_code == 200
    assert cancel.json()["status"] == "cancelled"


async def test_a_bearer_token_wins_over_the_cookie_and_needs_no_csrf(
    browser: httpx.AsyncClient, token_a: str, as_b: dict[str, str]
) -> None:
    await sign_in(browser, token_a)
    made = await browser.post("/jobs", json={"type": "noop"}, headers=as_b)
    assert made.status_code == 202
    # ... and acted for org B, the bearer's: A's session does not see it.
    assert (await browser.get(f"/jobs/{made.json()['id']}")).status_code == 404


async def test_sign_out_ends_the_session_even_for_a_replayed_cookie(
    browser: httpx.AsyncClient, app: FastAPI, token_a: str
) -> None:
    csrf = await sign_in(browser, token_a)
    stolen = dict(browser.cookies)
    assert (await browser.delete("/session")).status_code == 403  # CSRF applies
    out = await browser.delete("/session", headers={"X-CSRF-Token": csrf})
    assert out.status_code == 204
    assert "jobs_session=" in out.headers["set-cookie"]
    assert "max-age=0" in out.headers["set-cookie"].lower()
    assert (await browser.get("/jobs")).status_code == 401
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://api.test", cookies=stolen
    ) as replay:
        assert (await replay.get("/jobs")).status_code == 401
        assert (await replay.get("/session")).status_code == 401
    assert (await browser.delete("/session")).status_code == 204  # idempotent


async def test_revoking_the_token_ends_its_sessions(
    browser: httpx.AsyncClient, container: Container, clock: FakeClock, token_a: str
) -> None:
    await sign_in(browser, token_a)
    assert (await browser.get("/jobs")).status_code == 200
    assert revoke_token(container.token_store(), token_a)
    clock.advance(float(container.config.api_token_cache_s()) + 1)  # past the cache
    assert (await browser.get("/jobs")).status_code == 401
    assert (await browser.get("/session")).status_code == 401
    again = await browser.post("/session", json={"token": token_a})
    assert again.status_code == 401


async def test_a_session_expires(
    browser: httpx.AsyncClient, container: Container, clock: FakeClock, token_a: str
) -> None:
    await sign_in(browser, token_a)
    clock.advance(float(container.config.session_ttl_s()) + 1)
    assert (await browser.get("/jobs")).status_code == 401


@pytest.mark.parametrize(
    "body",
    [{"token": "jobs_" + "x" * 43}, {"token": "not-a-token"}, {"token": ""}, {}, {"t": "x"}],
)
async def test_bad_sign_ins_are_refused(browser: httpx.AsyncClient, body: dict[str, str]) -> None:
    answer = await browser.post("/session", json=body)
    assert answer.status_code in (401, 422)
    assert "set-cookie" not in answer.headers


async def test_sign_in_takes_json_only(browser: httpx.AsyncClient, token_a: str) -> None:
    # A cross-site form can post text/plain: it must not sign anyone in.
    form = await browser.post(
        "/session",
        content=f'{{"token": "{token_a}"}}',
        headers={"Content-Type": "text/plain"},
    )
    assert form.status_code in (415, 422)
    assert "set-cookie" not in form.headers


async def test_without_cookie_or_token_it_is_401(browser: httpx.AsyncClient) -> None:
    assert (await browser.get("/session")).status_code == 401
    assert (await browser.get("/jobs")).status_code == 401
    browser.cookies.set("jobs_session", "made-up")
    assert (await browser.get("/jobs")).status_code == 401
    assert (await browser.post("/jobs", json={"type": "noop"})).status_code == 401
