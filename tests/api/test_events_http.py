"""The event stream on real HTTP (docs/events.md): a real uvicorn process on PostgreSQL, the
worker's part played by a ``JobService`` on the same database. Ordering per job, org isolation,
resume after a dropped connection and after an API restart, a slow client, the filters, the
keep-alive, and the session cookie."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from jobs_core import Done, JobService, SystemClock
from jobs_tokens import issue_token, revoke_token

from tests.api.helpers import make_registry
from tests.api.server import ApiProcess
from tests.api.sse import Stream

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

ORG_A = "org-stream-a"
ORG_B = "org-stream-b"


class World:
    """An API process on a database, tokens of two orgs, and the worker's use cases."""

    def __init__(self, pg_url: str, pg_engine: Any) -> None:
        from jobs_postgres.store import PostgresJobStore
        from jobs_postgres.tokens import PostgresTokenStore

        self.url = pg_url
        self.tokens = PostgresTokenStore(pg_engine)
        self.token_a, _ = issue_token(self.tokens, ORG_A, "stream", SystemClock().now())
        self.token_b, _ = issue_token(self.tokens, ORG_B, "stream", SystemClock().now())
        self.service = JobService(PostgresJobStore(pg_engine), make_registry(), SystemClock())
        self.apis: list[ApiProcess] = []
        self.streams: list[Stream] = []

    def start(self, **env: str) -> ApiProcess:
        api = ApiProcess(
            {
                "JOBS_DATABASE_URL": self.url,
                "JOBS_STORE": "postgres",
                "JOBS_API_TOKEN_CACHE_S": "1",
                **env,
            },
            ("tests.api.helpers:registry",),
        )
        self.apis.append(api)
        return api

    def stream(self, api: ApiProcess, token: str | None = None, **kwargs: Any) -> Stream:
        headers = dict(kwargs.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        stream = Stream(api.base_url, headers=headers, **kwargs)
        self.streams.append(stream)
        return stream

    def http(self, api: ApiProcess, token: str) -> httpx.Client:
        return httpx.Client(
            base_url=api.base_url, timeout=30, headers={"Authorization": f"Bearer {token}"}
        )

    def close(self) -> None:
        for stream in self.streams:
            stream.close()
        for api in self.apis:
            api.stop()


@pytest.fixture
def world(pg_url: str, pg_engine: Any) -> Iterator[World]:
    built = World(pg_url, pg_engine)
    yield built
    built.close()


def kinds(events: list[Any]) -> list[str]:
    return [e.json["kind"] for e in events]


def test_each_change_arrives_in_order_with_the_job_as_get_shows_it(world: World) -> None:
    api = world.start()
    stream = world.stream(api, world.token_a)
    assert stream.status == 200
    assert stream.headers is not None
    assert stream.headers["content-type"].startswith("text/event-stream")
    ready = stream.next()
    assert ready is not None
    assert ready.name == "ready"
    assert ready.json["resumed"] is False
    with world.http(api, world.token_a) as http:
        job_id = http.post("/jobs", json={"type": "noop"}).json()["id"]
        running = world.service.claim(1)[0]
        world.service.store.save_progress(running.ref, {"done": 1, "total": 2}, running.run_at)
        world.service.store.heartbeat([running.ref], SystemClock().now())  # no event
        world.service.store.save_progress(running.ref, {"done": 2, "total": 2}, running.run_at)
        world.service.complete(running.ref, Done({"ok": True}))
        events = stream.jobs(5)
        assert kinds(events) == ["enqueued", "claimed", "progress", "progress", "done"]
        assert [e.json["job"]["progress"] and e.json["job"]["progress"]["done"] for e in events][
            2:4
        ] == [1, 2]
        assert all(e.json["job"]["id"] == job_id for e in events)
        alone = http.get(f"/jobs/{job_id}").json()
        assert alone.pop("attempt_history")[0]["outcome"] == "done"  # only on a job read alone
        assert events[-1].json["job"] == {**alone, "attempt_history": None}
        assert len({e.id for e in events}) == 5
        assert all(e.json["at"] for e in events)
        http.delete(f"/jobs/{job_id}")
        deleted = stream.jobs(1)[0]
        assert deleted.json["kind"] == "deleted"
        assert deleted.json["job"]["status"] == "done"
    assert stream.quiet(1.0) == []  # nothing else: the heartbeat was no event


def test_another_orgs_changes_never_reach_a_client(world: World) -> None:
    api = world.start()
    a = world.stream(api, world.token_a)
    b = world.stream(api, world.token_b)
    a.until("ready")
    b.until("ready")
    with world.http(api, world.token_a) as http_a, world.http(api, world.token_b) as http_b:
        for _ in range(5):
            http_b.post("/jobs", json={"type": "noop"})
        mine = http_a.post("/jobs", json={"type": "noop"}).json()["id"]
        for _ in range(5):
            http_b.post("/jobs", json={"type": "noop"})
        mine_too = http_a.post("/jobs", json={"type": "noop"}).json()["id"]
    got = a.jobs(2)
    assert [e.json["job"]["id"] for e in got] == [mine, mine_too]
    assert a.quiet(1.0) == []
    assert len(b.jobs(10)) == 10
    # Ids are opaque: same length, random-looking, none derived from a counter a client sees.
    ids = [e.id for e in got]
    assert all(i is not None and len(i) == 48 for i in ids)
    assert ids[0] != ids[1]


def test_a_made_up_last_event_id_gets_resync(world: World) -> None:
    api = world.start()
    first = world.stream(api, world.token_a)
    ready = first.until("ready")
    assert ready.id is not None
    forged = ready.id[:-4] + ("AAAA" if not ready.id.endswith("AAAA") else "BBBB")
    second = world.stream(api, world.token_a, headers={"Last-Event-ID": forged})
    assert second.until("ready").json["resumed"] is False
    resync = second.next()
    assert resync is not None
    assert resync.name == "resync"
    assert resync.json["reason"] == "invalid_id"


def test_resume_after_a_dropped_connection_and_after_an_api_restart(world: World) -> None:
    api = world.start()
    stream = world.stream(api, world.token_a)
    stream.until("ready")
    with world.http(api, world.token_a) as http:
        first = http.post("/jobs", json={"type": "noop"}).json()["id"]
    seen = stream.jobs(1)[0]
    stream.close()  # the connection drops

    with world.http(api, world.token_a) as http:
        missed = [http.post("/jobs", json={"type": "noop"}).json()["id"] for _ in range(3)]
    http_cancel_target = missed[0]
    with world.http(api, world.token_a) as http:
        http.post(f"/jobs/{http_cancel_target}/cancel")
    again = world.stream(api, world.token_a, headers={"Last-Event-ID": seen.id or ""})
    ready = again.until("ready")
    assert ready.json["resumed"] is True
    replayed = again.jobs(4)
    assert [(e.json["kind"], e.json["job"]["id"]) for e in replayed] == [
        ("enqueued", missed[0]),
        ("enqueued", missed[1]),
        ("enqueued", missed[2]),
        ("cancelled", missed[0]),
    ]
    assert first not in {e.json["job"]["id"] for e in replayed}
    last = replayed[-1]
    again.close()

    api.stop()  # the API restarts; changes land meanwhile (the worker writes directly)
    later = world.service.enqueue(ORG_A, "noop").job
    world.service.enqueue(ORG_B, "noop")
    restarted = world.start()
    resumed = world.stream(restarted, world.token_a, headers={"Last-Event-ID": last.id or ""})
    assert resumed.until("ready").json["resumed"] is True
    after_restart = resumed.jobs(1)
    assert after_restart[0].json["job"]["id"] == str(later.id)
    assert resumed.quiet(1.0) == []
    # ... and the live events follow the replay without a gap or a repeat.
    with world.http(restarted, world.token_a) as http:
        live = http.post("/jobs", json={"type": "noop"}).json()["id"]
    assert resumed.jobs(1)[0].json["job"]["id"] == live


def test_the_filters(world: World) -> None:
    api = world.start()
    with world.http(api, world.token_a) as http:
        followed = http.post("/jobs", json={"type": "noop"}).json()["id"]
        by_job = world.stream(api, world.token_a, params={"job_id": followed})
        by_type = world.stream(api, world.token_a, params={"type": "greet"})
        by_status = world.stream(api, world.token_a, params={"status": "finished"})
        for s in (by_job, by_type, by_status):
            s.until("ready")
        other = http.post("/jobs", json={"type": "noop"}).json()["id"]
        greet = http.post("/jobs", json={"type": "greet", "payload": {"name": "Ada"}}).json()
        http.post(f"/jobs/{followed}/cancel")
        http.post(f"/jobs/{other}/cancel")
        bad = httpx.get(
            f"{api.base_url}/jobs/events",
            params={"statuss": "done"},
            headers={"Authorization": f"Bearer {world.token_a}"},
        )
        assert bad.status_code == 422
    assert [(e.json["kind"], e.json["job"]["id"]) for e in by_job.jobs(1)] == [
        ("cancelled", followed)
    ]
    assert [e.json["job"]["id"] for e in by_type.jobs(1)] == [greet["id"]]
    assert [e.json["job"]["id"] for e in by_status.jobs(2)] == [followed, other]
    for s in (by_job, by_type, by_status):
        assert s.quiet(0.5) == []


def test_keep_alive_comments_while_quiet(world: World) -> None:
    api = world.start(JOBS_EVENTS_KEEPALIVE_S="0.5")
    stream = world.stream(api, world.token_a)
    stream.until("ready")
    start = time.monotonic()
    comment = stream.until("comment", timeout=10)
    assert comment.data == "keep-alive"
    assert time.monotonic() - start < 5
    # They keep coming while the stream stays quiet, one per interval.
    later = [stream.until("comment", timeout=10) for _ in range(3)]
    assert later[-1].received_at - comment.received_at < 5


def test_a_slow_client_gets_resync_and_the_others_everything(world: World) -> None:
    api = world.start(JOBS_EVENTS_CLIENT_BUFFER="600")
    fast = world.stream(api, world.token_a)
    fast.until("ready")
    # A client that opens the stream and then reads nothing, with a tiny receive buffer.
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    host, port = api.base_url.removeprefix("http://").split(":")
    slow.connect((host, int(port)))
    slow.sendall(
        f"GET /jobs/events HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {world.token_a}\r\n\r\n".encode()
    )
    try:
        got = []
        # 20,000 events of ~500 bytes: 10 MB, more than the kernel's socket buffers (4 MB
        # here) and the slow client's own buffer can hold.
        for _ in range(40):
            batch = world.service.enqueue_many(ORG_A, "noop", [{}] * 500)
            got += fast.jobs(len(batch), timeout=120)  # the fast client keeps up
        assert len({e.json["job"]["id"] for e in got}) == 20_000  # everything, once
        # Now the slow client reads: a resync, never a silent gap.
        slow.settimeout(30)
        received = b""
        deadline = time.monotonic() + 60
        while b"event: resync" not in received and time.monotonic() < deadline:
            chunk = slow.recv(65536)
            if not chunk:
                break
            received += chunk
        assert b"event: resync" in received
        assert b'"reason": "slow_client"' in received
    finally:
        slow.close()


def test_the_session_cookie_opens_the_stream_and_sign_out_ends_it(world: World) -> None:
    api = world.start()
    with httpx.Client(base_url=api.base_url, timeout=30) as browser:
        signed = browser.post("/session", json={"token": world.token_a})
        assert signed.status_code == 200
        stream = world.stream(api, cookies=dict(browser.cookies))
        assert stream.status == 200
        stream.until("ready")
        with world.http(api, world.token_a) as http:
            http.post("/jobs", json={"type": "noop"})
        assert stream.jobs(1)[0].json["kind"] == "enqueued"
        assert revoke_token(world.tokens, world.token_a)
        # The stream ends within the cache time once the token is revoked.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            event = stream.next(timeout=30)
            if event is None:
                break
        else:
            raise AssertionError("the stream outlived the revoked token")
        anonymous = httpx.get(f"{api.base_url}/jobs/events", timeout=10)
        assert anonymous.status_code == 401


def test_the_api_stops_promptly_with_streams_open(world: World) -> None:
    api = world.start()
    stream = world.stream(api, world.token_a)
    stream.until("ready")
    began = time.monotonic()
    api.stop()
    assert time.monotonic() - began < 25  # 5 s of grace, then the stream is cancelled
    assert api.shut_down_cleanly
    deadline = time.monotonic() + 30
    while stream.next(timeout=30) is not None:
        assert time.monotonic() < deadline, "the stream outlived the API"


def test_one_database_listener_per_api_process_whatever_the_number_of_clients(
    world: World, pg_engine: Any
) -> None:
    from jobs_postgres.events import READER_NAME
    from sqlalchemy import text

    def listeners() -> int:
        # Every connection reading the whole log on this session's database: the feed is polled
        # (nothing LISTENs: decision 0013), through one named connection per API process.
        with pg_engine.connect() as conn:
            return int(
                conn.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND application_name = :name"
                    ),
                    {"name": READER_NAME},
                ).scalar_one()
            )

    def wait_listeners(expected: int) -> None:
        deadline = time.monotonic() + 30
        while listeners() != expected:
            assert time.monotonic() < deadline, f"{listeners()} listeners, not {expected}"
            time.sleep(0.2)

    # Short keep-alives only so that the streams close fast at the end (a reader thread notices
    # it is closed when a line arrives). Eleven streams per token: past the default cap.
    api = world.start(JOBS_EVENTS_KEEPALIVE_S="0.5", JOBS_EVENTS_MAX_STREAMS_PER_TOKEN="20")
    first = world.stream(api, world.token_a)
    first.until("ready")
    wait_listeners(1)
    # Twenty more clients, of both orgs and with every kind of filter: still one listener.
    for n in range(20):
        params = [{}, {"type": "noop"}, {"status": "active"}, {"job_id": str(uuid.uuid4())}][n % 4]
        token = world.token_a if n % 2 else world.token_b
        world.stream(api, token, params=params).until("ready")
    with world.http(api, world.token_a) as http:
        job_id = http.post("/jobs", json={"type": "noop"}).json()["id"]
    assert first.jobs(1)[0].json["job"]["id"] == job_id  # the one listener serves them all
    wait_listeners(1)
    # A second API process has its own, and only one too.
    other = world.start(JOBS_EVENTS_KEEPALIVE_S="0.5")
    world.stream(other, world.token_a).until("ready")
    wait_listeners(2)


def test_keep_alive_comments_by_default_at_most_every_15_seconds(world: World) -> None:
    api = world.start()  # JOBS_EVENTS_KEEPALIVE_S left at its default
    stream = world.stream(api, world.token_a)
    ready = stream.until("ready")
    comment = stream.until("comment", timeout=30)
    assert comment.data == "keep-alive"
    assert comment.received_at - ready.received_at <= 15.5
    # That they keep coming at the interval is test_keep_alive_comments_while_quiet's (0.5 s):
    # a second default interval here would add 15 s of waiting to the suite and prove no more.
    # A longer interval cannot be configured: the API refuses to start with one.
    with pytest.raises(AssertionError, match="events_keepalive_s"):
        world.start(JOBS_EVENTS_KEEPALIVE_S="20")


def test_ids_tell_nothing_of_other_orgs_changes(world: World) -> None:
    """Org isolation "not even as a gap in ids": two ids of org A read the same whether org B
    changed nothing or a thousand jobs in between; and one position read twice gives two
    unrelated ids, so no id can be compared with another."""
    api = world.start()
    a = world.stream(api, world.token_a)
    again = world.stream(api, world.token_a)
    ready_a, ready_again = a.until("ready"), again.until("ready")
    assert ready_a.id != ready_again.id
    with world.http(api, world.token_a) as http:
        http.post("/jobs", json={"type": "noop"})
        http.post("/jobs", json={"type": "noop"})
        quiet_pair = [e.id for e in a.jobs(2)]
        http.post("/jobs", json={"type": "noop"})
        world.service.enqueue_many(ORG_B, "noop", [{}] * 1000)
        http.post("/jobs", json={"type": "noop"})
        busy_pair = [e.id for e in a.jobs(2)]
    assert a.quiet(1.0) == []  # nothing of B's thousand changes
    # Same length, no shared prefix beyond chance, whatever happened in between.
    for first, second in (quiet_pair, busy_pair):
        assert first is not None
        assert second is not None
        assert len(first) == len(second) == len(ready_a.id or "")
        assert first[:6] != second[:6]
