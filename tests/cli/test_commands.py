"""The ``jobs`` console script, run in subprocesses against the session's PostgreSQL."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import urllib.error
import urllib.request

import pytest

from tests.cli.helpers import (
    JOBS,
    InProcess,
    assert_one_line_error,
    clean_env,
    free_port,
    last_line,
    new_org,
    ok,
    run_jobs,
    start,
    wait_until,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_the_console_script_documents_every_command() -> None:
    # Every subcommand's --help is checked in process by test_parsing; here the installed
    # script itself, and the worker's options, which are loaded only for that command.
    env = clean_env()
    top = ok(run_jobs(env, "--help"))
    for command in ("migrate", "api", "worker", "dev", "token", "enqueue", "ls", "show"):
        assert f"    {command} " in top
    worker = ok(run_jobs(env, "worker", "--help"))
    assert worker.startswith("usage: jobs worker")
    for option in ("--concurrency", "--sweep-threshold", "--shutdown-grace", "--demo-types"):
        assert option in worker
    create = ok(run_jobs(env, "token", "create", "--help"))
    assert "--org" in create
    assert "--label" in create


def test_migrate_is_idempotent(fresh_db_url: str, tmp_path: object) -> None:
    from jobs_postgres import migrations

    env = clean_env(JOBS_DATABASE_URL=fresh_db_url)
    assert migrations.current(fresh_db_url) is None
    first = ok(run_jobs(env, "migrate"))
    assert "up to date" in first
    assert migrations.current(fresh_db_url) == migrations.head()
    second = ok(run_jobs(env, "migrate"))
    assert second == first
    assert migrations.current(fresh_db_url) == migrations.head()


def _get(url: str, token: str) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:  # not listening yet
        return 0


def test_token_create_authenticates_against_the_api_and_revoke_ends_it(
    cli_env: dict[str, str],
) -> None:
    org = new_org()
    created = ok(run_jobs(cli_env, "token", "create", "--org", org, "--label", "ci"))
    token = last_line(created)
    assert token.startswith("jobs_")
    assert len(created.strip().splitlines()) == 2  # a summary, then the token alone
    token_id = created.split()[1]

    port = free_port()
    # The API trusts a token it found live for JOBS_API_TOKEN_CACHE_S (tests/api covers that
    # delay with a fake clock); 0 makes it ask the store on every request, so the revocation
    # below must take effect at the very next one.
    api_env = {**cli_env, "JOBS_API_TOKEN_CACHE_S": "0"}
    api, output = start([str(JOBS), "api", "--port", str(port)], api_env)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until("the API to answer", lambda: _get(f"{base}/healthz", "") == 200, timeout=30)
        assert _get(f"{base}/jobs", token) == 200
        assert _get(f"{base}/jobs", "jobs_" + "x" * 43) == 401
        ok(run_jobs(cli_env, "token", "revoke", token_id))
        assert _get(f"{base}/jobs", token) == 401
        again = run_jobs(cli_env, "token", "revoke", "--token", token)
        assert_one_line_error(again, 1, "no live token")
    finally:
        api.send_signal(signal.SIGTERM)
        assert api.wait(30) == 0, output.text()


def test_enqueue_ls_show_cancel_retry(cli_env: dict[str, str], jobs_here: InProcess) -> None:
    org = new_org()
    # No worker runs here: the job stays where the commands put it.
    out = ok(
        run_jobs(
            cli_env, "enqueue", "sleep", "--org", org, "--new-org", "--payload", '{"seconds": 5}'
        )
    )
    job_id = last_line(out)
    assert f"enqueued sleep job for org {org}: queued" in out

    table = ok(run_jobs(cli_env, "ls", "--org", org))
    header, row = table.splitlines()
    assert header.split()[:3] == ["ID", "TYPE", "STATUS"]
    assert row.split()[:3] == [job_id, "sleep", "queued"]

    shown = ok(run_jobs(cli_env, "show", job_id, "--org", org))
    assert re.search(r"^status +queued$", shown, re.M)
    assert '"seconds": 5' in shown

    assert f"cancelled job {job_id}" in ok(run_jobs(cli_env, "cancel", job_id, "--org", org))
    assert "queued job" in ok(run_jobs(cli_env, "retry", job_id, "--org", org))

    # The variants, in process (the same code, without paying a process start each).
    code, everyone, _ = jobs_here("ls", "--status", "active", "--limit", "500")
    assert code == 0
    assert "ORG" in everyone.splitlines()[0]
    assert any(line.startswith(f"{job_id}  {org}") for line in everyone.splitlines())
    code, out, _ = jobs_here("show", job_id, "--json")  # without --org: whichever org
    assert json.loads(out)["org_id"] == org
    assert json.loads(out)["status"] == "queued"
    assert jobs_here("cancel", job_id, "--org", org)[0] == 0  # leave nothing for a later worker
    assert job_id in jobs_here("ls", "--org", org, "--status", "finished")[1]
    assert jobs_here("ls", "--org", org, "--status", "queued")[1].startswith("no jobs")

    dedup = ["enqueue", "noop", "--org", org, "--new-org", "--dedup-key", "k1", "--json"]
    first = json.loads(jobs_here(*dedup)[1])
    second = json.loads(jobs_here(*dedup)[1])
    assert first["created"] is True
    assert second["created"] is False
    assert second["id"] == first["id"]


def test_the_first_job_of_an_unseen_org_needs_new_org(
    cli_env: dict[str, str], jobs_here: InProcess
) -> None:
    org = new_org()
    # A typo of an org name is refused, saying why and how to confirm; nothing is created.
    assert_one_line_error(
        run_jobs(cli_env, "enqueue", "noop", "--org", org), 1, f"org {org!r} has no job"
    )
    assert "--new-org" in run_jobs(cli_env, "enqueue", "noop", "--org", org).stderr
    assert ok(run_jobs(cli_env, "ls", "--org", org)).count("noop") == 0
    # Confirmed, the first job is created; then the org is known and needs no confirmation.
    first = last_line(ok(run_jobs(cli_env, "enqueue", "noop", "--org", org, "--new-org")))
    second = last_line(ok(run_jobs(cli_env, "enqueue", "noop", "--org", org)))
    assert first != second
    # An org with an API token (and no job yet) is known as well.
    tokened = new_org()
    ok(run_jobs(cli_env, "token", "create", "--org", tokened))
    ok(run_jobs(cli_env, "enqueue", "noop", "--org", tokened))


def test_errors_are_one_line_with_an_exit_code(
    cli_env: dict[str, str], jobs_here: InProcess
) -> None:
    org = new_org()
    enqueue = ["enqueue", "sleep", "--org", org, "--new-org"]
    # The contract's cases through the console script...
    assert_one_line_error(
        run_jobs(cli_env, *enqueue, "--payload", "{seconds: 1}"), 2, "not valid JSON"
    )
    assert_one_line_error(
        run_jobs(cli_env, "enqueue", "reticulate", "--org", org, "--new-org"), 1, "unknown job type"
    )
    missing = "01900000-0000-7000-8000-000000000000"
    assert_one_line_error(run_jobs(cli_env, "show", missing, "--org", org), 1, "no such job")

    # ...and the rest in process.
    def fails(code: int, *args: str) -> str:
        exit_code, _, err = jobs_here(*args)
        assert exit_code == code, (args, err)
        assert len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err
        return err

    assert "JSON object" in fails(2, *enqueue, "--payload", "[1]")
    err = fails(1, *enqueue, "--payload", '{"seconds": "soon"}')
    assert "invalid payload" in err
    assert "seconds" in err
    assert "ISO 8601" in fails(2, *enqueue, "--run-at", "tomorrow")
    # The Imports module's types are known to the CLI too, with their own schema.
    assert "import_id: import_id must be a UUID" in fails(
        1, "enqueue", "import_csv", "--org", org, "--new-org", "--payload", "{}"
    )
    assert "no such job" in fails(1, "cancel", missing, "--org", org)
    assert "not a job id" in fails(2, "show", "42")
    assert "--org" in fails(2, "retry", missing)
    job_id = last_line(jobs_here("enqueue", "noop", "--org", org, "--new-org")[1])
    assert "cannot retry" in fails(1, "retry", job_id, "--org", org)
    # Another org cannot see it: the same answer as for a job that does not exist.
    assert "no such job" in fails(1, "cancel", job_id, "--org", new_org())
    assert jobs_here("cancel", job_id, "--org", org)[0] == 0

    # The demo types are off by default against a real server, and the error says so.
    plain = {k: v for k, v in cli_env.items() if k != "JOBS_DEMO_TYPES"}
    assert_one_line_error(run_jobs(plain, *enqueue), 1, "unknown job type", "JOBS_DEMO_TYPES=1")


def test_an_unreachable_database_is_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    closed = free_port()  # nothing listens there
    url = f"postgresql://postgres:pw@127.0.0.1:{closed}/jobs"
    env = clean_env(JOBS_DATABASE_URL=url, JOBS_DEMO_TYPES="1")
    for command in (["ls"], ["worker"]):
        result = run_jobs(env, *command)
        assert_one_line_error(result, 3, "cannot reach the database", f"127.0.0.1:{closed}")
        assert "pw" not in result.stderr  # the password is never printed
    monkeypatch.setenv("JOBS_DATABASE_URL", url)
    monkeypatch.setenv("JOBS_DEMO_TYPES", "1")
    jobs_here = InProcess(capsys)
    for command in (
        ["migrate"],
        ["enqueue", "noop", "--org", "x"],
        ["token", "create", "--org", "x"],
        ["api", "--port", "1"],
        ["show", "01900000-0000-7000-8000-000000000000"],
    ):
        code, _, err = jobs_here(*command)
        assert code == 3, (command, err)
        assert err.startswith("jobs: cannot reach the database (postgresql://postgres:***@")
        assert len(err.strip().splitlines()) == 1


def test_an_unmigrated_database_says_to_run_migrate(fresh_db_url: str) -> None:
    env = clean_env(JOBS_DATABASE_URL=fresh_db_url, JOBS_DEMO_TYPES="1")
    for command in (["ls"], ["show", "01900000-0000-7000-8000-000000000000"]):
        result = run_jobs(env, *command)
        assert_one_line_error(result, 3, "has no jobs schema", "run `jobs migrate`")
    assert run_jobs(env, "migrate").returncode == 0
    listed = run_jobs(env, "ls")
    assert listed.returncode == 0, listed.stderr


def test_debug_shows_the_traceback() -> None:
    env = clean_env(JOBS_DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/jobs")
    result = run_jobs(env, "--debug", "ls")
    assert result.returncode == 3
    assert "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("jobs: cannot reach the database")


def test_worker_runs_a_job_and_stops_on_sigterm(
    cli_env: dict[str, str], jobs_here: InProcess
) -> None:
    org = new_org()
    job_id = last_line(jobs_here("enqueue", "noop", "--org", org, "--new-org")[1])
    worker, output = start([str(JOBS), "worker", "--concurrency", "2"], cli_env)
    try:
        wait_until(
            "the noop job to be done",
            lambda: json.loads(jobs_here("show", job_id, "--json")[1])["status"] == "done",
            timeout=30,
            every=0.5,
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            code = worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            raise
    assert code == 0, output.text()
    # The worker runs the shipped module's types besides the demo ones.
    assert re.search(r'types="[^"]*import_csv[^"]*map_reconcile', output.text())
