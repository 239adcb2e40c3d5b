"""Child handlers run by a real worker (in-memory store, real child processes and signals):
progress, reports, failure modes, cancellation, timeouts, checkpoints, the environment."""

from __future__ import annotations

import dataclasses
import os
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from jobs_core import FakeClock, InMemoryJobStore, Registry, Status
from jobs_worker.manifests import load_manifests

from tests.worker.helpers import FAST, ORG, build, job_of, running, wait_until

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "handlers"


def handler(root: Path, type_id: str, manifest: str, script: str, name: str = "run.sh") -> None:
    """Write ``<root>/<type_id>/manifest.yaml`` and its executable script."""
    directory = root / type_id
    directory.mkdir(parents=True)
    (directory / "manifest.yaml").write_text(f"id: {type_id}\n" + textwrap.dedent(manifest))
    path = directory / name
    path.write_text(textwrap.dedent(script).lstrip())
    path.chmod(0o755)


def registry_of(directory: Path) -> Registry:
    loaded = load_manifests(directory)
    assert not loaded.errors, loaded.errors
    return loaded.registry


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose: it runs nothing
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def pid_in(path: Path) -> int:
    wait_until(lambda: path.exists() and path.read_text().strip(), 20, f"{path}")
    return int(path.read_text().strip())


def finished(store: InMemoryJobStore, job_id: Any) -> bool:
    return job_of(store, job_id).status.is_finished


def test_the_noop_example_reports_progress_then_its_report() -> None:
    registry = registry_of(EXAMPLES)
    worker, service, store = build(registry)
    seen: list[dict[str, Any]] = []
    with running(worker):
        job = service.enqueue(ORG, "child_noop", {}).job  # seconds: 3 by default

        def progress_seen() -> bool:
            progress = job_of(store, job.id).progress
            if progress and progress not in seen:
                seen.append(dict(progress))
            return finished(store, job.id)

        wait_until(progress_seen, 30, "child_noop to finish")
    done = job_of(store, job.id)
    assert done.status is Status.DONE, done.error
    assert done.report == {"slept_s": 3.0, "entities": [], "relations": [], "notes": ""}
    assert any(p.get("stage") == "sleeping" and 0 < p["done"] < 1 for p in seen), seen
    assert done.payload == {"seconds": 3}
    assert done.progress is not None
    assert done.progress["done"] == 1.0


def test_the_shell_example_reports_and_saves_a_checkpoint_the_retry_receives() -> None:
    registry = registry_of(EXAMPLES)
    worker, service, store = build(registry)
    with running(worker):
        job = service.enqueue(ORG, "shell_wordcount", {"text": "a b c", "fail_with": 75}).job
        wait_until(lambda: finished(store, job.id), 30, "two attempts")
        ok = service.enqueue(ORG, "shell_wordcount", {"text": 'one "two" three'}).job
        wait_until(lambda: finished(store, ok.id), 30, "the word count")
    failed = job_of(store, job.id)
    # exit 75 is retryable: a second attempt ran (max_attempts 2), then the job failed
    assert failed.status is Status.FAILED
    assert failed.attempts == 2
    assert failed.error is not None
    assert "exited with code 75" in failed.error
    assert failed.progress is not None
    assert failed.progress["checkpoint"] == {
        "words": 3,
        "attempt": 2,
    }
    # the second attempt read the first one's checkpoint on its stdin
    assert "failing on purpose with exit code 75 (previous attempt: 1)" in str(failed.report)
    assert job_of(store, ok.id).report == {"words": 3, "attempt": 1, "previous_attempt": None}


@pytest.mark.parametrize(
    ("script", "error"),
    [
        ("echo boom >&2; exit 3", "exited with code 3"),
        ("echo 'not json'", "not one JSON object"),
        ("true", "exit 0 without a report"),
        ("kill -SEGV $$", "killed by signal SIGSEGV"),
        ('echo \'{"error": "disk full"}\'; exit 4', "disk full (exited with code 4)"),
    ],
)
def test_a_failing_child_fails_the_job_with_its_exit_and_stderr_tail(
    tmp_path: Path, script: str, error: str
) -> None:
    handler(tmp_path, "bad", "command: ./run.sh\nmax_attempts: 1\n", f"#!/bin/sh\n{script}\n")
    worker, service, store = build(registry_of(tmp_path))
    with running(worker):
        job = service.enqueue(ORG, "bad", {}).job
        wait_until(lambda: finished(store, job.id), 20, "the failure")
    failed = job_of(store, job.id)
    assert failed.status is Status.FAILED
    assert failed.error is not None
    assert error in failed.error
    if "boom" in script:
        assert "boom" in str(failed.report)


def test_cancel_terms_the_group_then_kills_it_after_the_grace(tmp_path: Path) -> None:
    # The child ignores SIGTERM; its grandchild (a sleep) must die with the group.
    handler(
        tmp_path,
        "stubborn",
        "command: ./run.sh\nkill_grace_s: 1\n",
        f"""
        #!/bin/sh
        trap '' TERM
        sleep 300 &
        echo $! > {tmp_path}/grandchild
        echo $$ > {tmp_path}/child
        while true; do sleep 0.1; done
        """,
    )
    worker, service, store = build(registry_of(tmp_path))
    with running(worker):
        job = service.enqueue(ORG, "stubborn", {}).job
        child, grandchild = pid_in(tmp_path / "child"), pid_in(tmp_path / "grandchild")
        assert alive(child)
        assert alive(grandchild)
        service.cancel(ORG, job.id)
        wait_until(lambda: finished(store, job.id), 20, "the cancellation")
    cancelled = job_of(store, job.id)
    assert cancelled.status is Status.CANCELLED
    wait_until(lambda: not alive(child) and not alive(grandchild), 10, "the group to be gone")


def test_a_timeout_kills_the_child_and_fails_the_attempt(tmp_path: Path) -> None:
    handler(
        tmp_path,
        "slow",
        "command: ./run.sh\ntimeout_s: 1\nkill_grace_s: 0.5\nmax_attempts: 1\n",
        f"#!/bin/sh\necho $$ > {tmp_path}/child\necho PROGRESS:0.2 waiting >&2\nexec sleep 300\n",
    )
    worker, service, store = build(registry_of(tmp_path))
    with running(worker):
        job = service.enqueue(ORG, "slow", {}).job
        child = pid_in(tmp_path / "child")
        wait_until(lambda: finished(store, job.id), 20, "the timeout")
    failed = job_of(store, job.id)
    assert failed.status is Status.FAILED
    assert failed.error is not None
    assert "timed out after 1 s" in failed.error
    assert not alive(child)


def test_what_a_child_leaves_running_is_killed_when_it_exits(tmp_path: Path) -> None:
    handler(
        tmp_path,
        "leaky",
        "command: ./run.sh\n",
        f"#!/bin/sh\nsleep 300 &\necho $! > {tmp_path}/left\necho '{{}}'\n",
    )
    worker, service, store = build(registry_of(tmp_path))
    with running(worker):
        job = service.enqueue(ORG, "leaky", {}).job
        wait_until(lambda: finished(store, job.id), 20, "the job")
    assert job_of(store, job.id).status is Status.DONE
    left = pid_in(tmp_path / "left")
    wait_until(lambda: not alive(left), 10, "the straggler to be killed")


def test_the_child_gets_a_clean_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBS_DATABASE_URL", "postgresql://secret@db/jobs")
    monkeypatch.setenv("ALLOWED_ONE", "yes")
    handler(
        tmp_path,
        "envdump",
        "command: ./run.sh\npass_env: [ALLOWED_ONE]\nenv: {GREETING: hello}\n",
        """
        #!/bin/sh
        printf '{"env": "%s"}\\n' "$(env | cut -d= -f1 | sort | tr '\\n' ' ')"
        """,
    )
    worker, service, store = build(registry_of(tmp_path))
    with running(worker):
        job = service.enqueue(ORG, "envdump", {}).job
        wait_until(lambda: finished(store, job.id), 20, "the job")
    done = job_of(store, job.id)
    assert done.status is Status.DONE, done.error
    names = set(str((done.report or {})["env"]).split())
    assert {"ALLOWED_ONE", "GREETING", "PATH", "TMPDIR"} <= names
    assert "JOBS_DATABASE_URL" not in names


def test_heartbeats_go_on_while_the_child_runs(tmp_path: Path) -> None:
    handler(tmp_path, "quiet", "command: ./run.sh\n", "#!/bin/sh\nsleep 1.5\necho '{}'\n")
    clock = FakeClock()
    config = dataclasses.replace(FAST, heartbeat_s=0.1)
    worker, service, store = build(registry_of(tmp_path), config, clock=clock)
    with running(worker):
        job = service.enqueue(ORG, "quiet", {}).job
        wait_until(lambda: job_of(store, job.id).status is Status.RUNNING, 10, "the start")
        first = job_of(store, job.id).last_seen_at
        clock.advance(5)
        wait_until(lambda: job_of(store, job.id).last_seen_at != first, 10, "a heartbeat")
        wait_until(lambda: finished(store, job.id), 20, "the job")
    assert job_of(store, job.id).status is Status.DONE


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/broken":
            self.send_response(503)
            self.end_headers()
            return
        body = b"<html><head><title>Local page</title></head><body>hi</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_httpx_example_fetches_a_local_page(http_server: str) -> None:
    worker, service, store = build(registry_of(EXAMPLES))
    with running(worker):
        ok = service.enqueue(ORG, "fetch_url", {"url": f"{http_server}/page"}).job
        broken = service.enqueue(ORG, "fetch_url", {"url": f"{http_server}/broken"}).job
        wait_until(lambda: finished(store, ok.id), 30, "the fetch")
        wait_until(
            lambda: (
                job_of(store, broken.id).attempts >= 1
                and job_of(store, broken.id).status is Status.QUEUED
            ),
            30,
            "the retry",
        )
    done = job_of(store, ok.id)
    assert done.status is Status.DONE, done.error
    assert done.report == {
        "url": f"{http_server}/page",
        "status_code": 200,
        "bytes": 66,
        "title": "Local page",
    }
    retried = job_of(store, broken.id)
    assert retried.error is not None
    assert "answered 503" in retried.error
    assert retried.run_at > done.created_at  # re-queued with the manifest's backoff


def test_many_children_at_once_all_finish(tmp_path: Path) -> None:
    handler(
        tmp_path, "quick", "command: ./run.sh\n", '#!/bin/sh\necho "PROGRESS:1 x" >&2\necho "{}"\n'
    )
    config = dataclasses.replace(FAST, concurrency=4)
    worker, service, store = build(registry_of(tmp_path), config)
    started = time.monotonic()
    with running(worker):
        jobs = [service.enqueue(ORG, "quick", {}).job for _ in range(20)]
        wait_until(lambda: all(finished(store, j.id) for j in jobs), 60, "20 jobs")
    assert all(job_of(store, j.id).status is Status.DONE for j in jobs)
    assert time.monotonic() - started < 60
