"""``jobs dev`` end to end: a real process tree, real HTTP, real signals."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from tests.cli.helpers import (
    JOBS,
    assert_all_gone,
    clean_env,
    descendants,
    free_port,
    last_line,
    ok,
    run_jobs,
    show_json,
    start,
    token_of,
    wait_until,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _post_job(base: str, token: str, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        f"{base}/jobs",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        status: int = response.status
        return status, json.loads(response.read())


def test_dev_serves_runs_restarts_its_worker_and_stops_on_sigint(
    fresh_db_url: str, tmp_path: object
) -> None:
    port = free_port()
    # A database of its own: dev migrates it, and its worker sees no other test's jobs.
    env = clean_env(JOBS_DATABASE_URL=fresh_db_url, JOBS_DATA_DIR=f"{tmp_path}/data")
    dev, output = start([str(JOBS), "dev", "--port", str(port)], env)
    try:
        token = token_of(output, timeout=90)
        banner = output.text()
        base = f"http://127.0.0.1:{port}"
        assert f"API       {base}" in banner
        assert f"panel     {base}/" in banner
        with urllib.request.urlopen(f"{base}/", timeout=10) as panel:
            assert b'src="/panel/app.js"' in panel.read()
        curl = next(line for line in output.lines if line.strip().startswith("curl -s -X POST"))
        assert f"Bearer {token}" in curl

        # The curl of the banner, over real HTTP.
        status, queued = _post_job(base, token, {"type": "noop", "payload": {}})
        assert status == 202

        # The CLI from another terminal (the demo types need saying so on a real server).
        client = {**env, "JOBS_DEMO_TYPES": "1"}
        enqueued = ok(
            run_jobs(client, "enqueue", "sleep", "--org", "demo", "--payload", '{"seconds": 1}')
        )
        job_id = last_line(enqueued)
        wait_until(
            "the sleep job to be done",
            lambda: show_json(client, job_id)["status"] == "done",
            timeout=30,
            every=0.5,
        )
        shown = ok(run_jobs(client, "show", job_id, "--org", "demo"))
        assert re.search(r"^status +done$", shown, re.M)
        assert "100%" in shown
        assert show_json(client, str(queued["id"]))["status"] == "done"

        # The crash demo kills its worker; the supervisor starts another, which runs the next job.
        tree_before = {p.pid for p in descendants(dev.pid)}
        ok(run_jobs(client, "enqueue", "crash", "--org", "demo"))
        output.wait_for(lambda line: "starting a new one" in line, timeout=30)
        noop = last_line(ok(run_jobs(client, "enqueue", "noop", "--org", "demo")))
        wait_until(
            "a job done by the new worker",
            lambda: show_json(client, noop)["status"] == "done",
            timeout=30,
            every=0.5,
        )
        tree = descendants(dev.pid)
        assert len(tree) == 2, [p.cmdline() for p in tree]  # the API and one worker
        assert {p.pid for p in tree} != tree_before

        # The example child-process handlers (examples/handlers) are served too, over HTTP.
        assert "examples/handlers" in banner
        status, child = _post_job(base, token, {"type": "child_noop", "payload": {"seconds": 0.5}})
        assert status == 202
        wait_until(
            "the child_noop job to be done",
            lambda: show_json(client, str(child["id"]))["status"] == "done",
            timeout=60,
            every=0.5,
        )
        tree = descendants(dev.pid)  # now with the worker's reaper: it must go too

        dev.send_signal(signal.SIGINT)
        assert dev.wait(60) == 0, output.text()
        assert_all_gone(tree)
    finally:
        if dev.poll() is None:
            dev.kill()
            dev.wait()


def test_dev_refuses_a_port_in_use(cli_env: dict[str, str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [str(JOBS), "dev", "--port", str(port)],
            env=cli_env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_killed_supervisor_leaves_no_orphan(cli_env: dict[str, str]) -> None:
    # kill -9 gives jobs dev no chance to stop its children: the kernel's parent-death signal
    # (PR_SET_PDEATHSIG) must.
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux-only")
    dev, output = start([str(JOBS), "dev", "--port", str(free_port())], cli_env)
    try:
        token_of(output, timeout=90)
        tree = descendants(dev.pid)
        assert len(tree) == 2, [p.cmdline() for p in tree]
    finally:
        dev.kill()
        dev.wait()
    assert_all_gone(tree, timeout=30)
