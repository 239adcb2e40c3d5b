"""Manifest-declared job types: loading, validation errors naming the file and the field, the
payload schema at enqueue (over HTTP too), and an invalid manifest never hiding the others."""

from __future__ import annotations

import logging
import textwrap
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest
from jobs_api.app import create_app
from jobs_api.containers import build_container
from jobs_api.settings import ApiSettings
from jobs_core import (
    DedupScope,
    FakeClock,
    InMemoryJobStore,
    JobService,
    JobTimeout,
    KeyScope,
    PayloadInvalid,
)
from jobs_core.protocol import ChildRetryable
from jobs_tokens import issue_token
from jobs_worker.child import SubprocessHandler
from jobs_worker.manifest_fields import ManifestError
from jobs_worker.manifests import load_manifests, parse_manifest
from jobs_worker.registries import worker_registry

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "handlers"

VALID = """\
id: {id}
name: "Count"
description: "Counts."
applies_to: [Webpage, Url]
params:
  - {{ name: timeout_s, type: int, default: 15 }}
  - {{ name: use_browser, type: bool, default: false }}
  - {{ name: url, type: str }}
command: ./run.sh
timeout_s: 20
max_attempts: 4
public: true
dedup_scope: active
retry: {{ backoff: constant, base_s: 7, on_timeout: true }}
"""


def write(root: Path, type_id: str, body: str, script: bool = True) -> Path:
    directory = root / type_id
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "manifest.yaml"
    path.write_text(textwrap.dedent(body))
    if script:
        run = directory / "run.sh"
        run.write_text("#!/bin/sh\necho '{}'\n")
        run.chmod(0o755)
    return path


def test_the_shipped_examples_load() -> None:
    loaded = load_manifests(EXAMPLES)
    assert loaded.errors == []
    assert set(loaded.registry.names()) == {"child_noop", "shell_wordcount", "fetch_url"}
    fetch = loaded.registry.get("fetch_url")
    assert fetch.applies_to == ("Webpage", "Url")
    assert isinstance(fetch.handler, SubprocessHandler)
    schema = fetch.payload_schema
    assert schema is not None
    assert schema.json_schema() == {
        "type": "object",
        "properties": {
            "url": {"type": "string"},
            "timeout_s": {"type": "number", "default": 15},
        },
        "required": ["url"],
        "additionalProperties": False,
    }


def test_a_manifest_declares_the_job_type(tmp_path: Path) -> None:
    write(tmp_path, "count", VALID.format(id="count"))
    job_type = load_manifests(tmp_path).registry.get("count")
    assert job_type.timeout_s == 20
    assert job_type.max_attempts == 4
    assert job_type.public is True
    assert job_type.dedup_scope is DedupScope.ACTIVE
    assert job_type.description == "Counts."
    assert job_type.retry.is_retryable(ChildRetryable("exit 75"))
    assert job_type.retry.is_retryable(JobTimeout("late"))
    assert job_type.retry.delay_after(3) == 7
    assert job_type.validate_payload({"url": "https://a.example"}) == {
        "timeout_s": 15,
        "use_browser": False,
        "url": "https://a.example",
    }


def test_parameters_are_validated_naming_each_one(tmp_path: Path) -> None:
    write(tmp_path, "count", VALID.format(id="count"))
    job_type = load_manifests(tmp_path).registry.get("count")
    with pytest.raises(PayloadInvalid) as caught:
        job_type.validate_payload({"timeout_s": "15", "use_browser": 1, "colour": "red"})
    errors = {tuple(error["loc"]): error["msg"] for error in caught.value.errors}
    assert errors == {
        ("url",): "url is required",
        ("timeout_s",): "timeout_s must be of type int",
        ("use_browser",): "use_browser must be of type bool",
        ("colour",): "colour is not a parameter of this type",
    }
    with pytest.raises(PayloadInvalid, match="timeout_s must be of type int"):
        job_type.validate_payload({"url": "u", "timeout_s": True})  # a bool is not an int


PARAMS = "params: [{name: site_id, type: int}, {name: tags, type: list, default: []}]\n"
FLOW = [  # flow control: each line after PARAMS, the field named, the words of the error
    ("dedup_key: 'crawl:{site}'", "dedup_key", "'site' is not a declared parameter"),
    ("dedup_key: 'crawl:{tags}'", "dedup_key", "'tags' is a list; a key needs a str or int"),
    ("dedup_key: 'crawl:{site_id:>3}'", "dedup_key", "use plain {field} references"),
    ("dedup_key: 'crawl'", "dedup_key", "names no payload field"),
    ("dedup_key: 7", "dedup_key", "non-empty text value"),
    ("concurrency_key: site_id", "concurrency_limit", "required with concurrency_key"),
    ("concurrency_limit: 2", "concurrency_key", "required with concurrency_limit"),
    ("concurrency_key: site\nconcurrency_limit: 2", "concurrency_key", "not a declared"),
    ("concurrency_key: tags\nconcurrency_limit: 2", "concurrency_key", "a key needs a str"),
    ("concurrency_key: site_id\nconcurrency_limit: 0", "concurrency_limit", "integer >= 1"),
    ("concurrency_key: site_id\nconcurrency_limit: two", "concurrency_limit", "integer >= 1"),
    ("max_running: 0", "max_running", "integer >= 1"),
    ("max_running: true", "max_running", "integer >= 1"),
    ("max_snoozes: -1", "max_snoozes", "integer >= 0"),
    ("rate_limit: [0, 1]", "rate_limit", "N must be between 1 and 1000"),
    ("rate_limit: [5, 0]", "rate_limit", "per_seconds must be > 0"),
    ("rate_limit: 5", "rate_limit", "must be a pair (N, per_seconds)"),
]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ("id: other\ncommand: ./run.sh\n", "id", "must equal its directory's name"),
        ("name: x\ncommand: ./run.sh\n", "id", "required"),
        ("id: bad\ncommand: ./run.sh\nbogus: 1\n", "bogus", "unknown field"),
        ("id: bad\ncommand: ./run.sh\ntimeout_s: -1\n", "timeout_s", "must be a number > 0"),
        ("id: bad\ncommand: ./run.sh\nmax_attempts: 0\n", "max_attempts", "integer >= 1"),
        ("id: bad\ncommand: ./run.sh\npublic: maybe\n", "public", "true or false"),
        ("id: bad\ncommand: ./run.sh\ndedup_scope: forever\n", "dedup_scope", "not one of"),
        ("id: bad\ncommand: ./run.sh\napplies_to: Url\n", "applies_to", "list of text"),
        ("id: bad\ncommand: ./run.sh\nparams: {a: 1}\n", "params", "must be a list"),
        (
            "id: bad\ncommand: ./run.sh\nparams: [{name: n, type: date}]\n",
            "params[0].type",
            "'date'",
        ),
        (
            "id: bad\ncommand: ./run.sh\nparams: [{name: n, type: int, default: x}]\n",
            "params[0].default",
            "not of type int",
        ),
        ("id: bad\ncommand: ./run.sh\nparams: [{name: 1x}]\n", "params[0].name", "identifier"),
        (
            "id: bad\ncommand: ./run.sh\nparams: [{name: a}, {name: a}]\n",
            "params[1].name",
            "declared twice",
        ),
        ("id: bad\n", "command", "no run.py"),
        ("id: bad\ncommand: ./missing.sh\n", "command", "does not exist"),
        ("id: bad\ncommand: [1, 2]\n", "command", "list of strings"),
        ("id: bad\ncommand: ./run.sh\nretry: {backoff: linear}\n", "retry.backoff", "'linear'"),
        ("id: bad\ncommand: ./run.sh\nretry: {tries: 3}\n", "retry.tries", "unknown"),
        ("id: bad\ncommand: ./run.sh\nenv: {A: [1]}\n", "env.A", "text or number"),
        ("id: bad\ncommand: ./run.sh\nkill_grace_s: x\n", "kill_grace_s", "number >= 0"),
        ("id: bad\ncommand: 'unterminated\n", "line 3", "not valid YAML"),
        ("- just\n- a list\n", "", "must be a mapping"),
        ("id: Bad_Name\ncommand: ./run.sh\n", "id", "must equal"),
        *[(f"id: bad\ncommand: ./run.sh\n{PARAMS}{line}\n", at, words) for line, at, words in FLOW],
    ],
)
def test_an_invalid_manifest_names_its_file_and_field(
    tmp_path: Path, body: str, field: str, words: str
) -> None:
    path = write(tmp_path, "bad", body)
    with pytest.raises(ManifestError) as caught:
        parse_manifest(path)
    assert caught.value.path == path
    assert caught.value.where == field
    assert str(caught.value).startswith(f"{path}: ")
    assert words in str(caught.value)


def test_a_script_that_is_not_executable_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = write(tmp_path, "bad", "id: bad\ncommand: ./run.sh\n")
    (tmp_path / "bad" / "run.sh").chmod(0o644)
    with pytest.raises(ManifestError, match=r"not executable \(chmod \+x it"):
        parse_manifest(path)


def test_an_invalid_manifest_never_takes_the_other_types_down(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, "good", VALID.format(id="good"))
    write(tmp_path, "broken", "id: broken\ncommand: ./run.sh\ntimeout_s: soon\n")
    write(tmp_path, "noop", "id: noop\ncommand: ./run.sh\n")  # the demo type's name
    (tmp_path / "no_manifest_here").mkdir()
    with caplog.at_level(logging.ERROR, logger="jobs.manifests"):
        registry = worker_registry(True, handlers_dir=tmp_path)
    assert "good" in registry
    assert "broken" not in registry
    assert registry.get("noop").handler is not None
    assert not isinstance(registry.get("noop").handler, SubprocessHandler)  # the demo's, kept
    logged = caplog.text
    assert "manifest.invalid" in logged
    assert f"{tmp_path / 'broken' / 'manifest.yaml'}" in logged
    assert "field=timeout_s" in logged
    assert "already a registered job type" in logged


def test_a_missing_handlers_directory_is_reported_not_fatal(tmp_path: Path) -> None:
    loaded = load_manifests(tmp_path / "nope")
    assert len(loaded.registry) == 0
    assert "does not exist" in str(loaded.errors[0])


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_enqueue_over_http_fills_defaults_and_422s_naming_the_parameter(
    tmp_path: Path,
) -> None:
    write(tmp_path, "count", VALID.format(id="count"))
    registry = worker_registry(False, handlers_dir=tmp_path)
    container = build_container(ApiSettings(store="memory"), [registry])
    token, _ = issue_token(container.token_store(), "org-a", "tests", container.clock().now())
    headers = {"Authorization": f"Bearer {token}"}
    transport = httpx.ASGITransport(app=create_app(container))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as client:
        bad = await client.post(
            "/jobs", json={"type": "count", "payload": {"timeout_s": "x"}}, headers=headers
        )
        ok = await client.post(
            "/jobs",
            json={"type": "count", "payload": {"url": "https://a.example"}},
            headers=headers,
        )
    assert bad.status_code == 422
    locs = {tuple(error["loc"]) for error in bad.json()["errors"]}
    assert locs == {("body", "payload", "url"), ("body", "payload", "timeout_s")}
    assert ok.status_code == 202, ok.text
    job = container.service().get("org-a", uuid.UUID(ok.json()["id"]))
    assert job.payload == {"timeout_s": 15, "use_browser": False, "url": "https://a.example"}


LIMITED = """\
id: {id}
params:
  - {{ name: site_id, type: int }}
  - {{ name: page, type: str, default: "/" }}
command: ./run.sh
dedup_key: "crawl:{{site_id}}:{{page}}"
dedup_scope: active
concurrency_key: site_id
concurrency_limit: 2
max_running: 3
max_snoozes: 4
"""


def test_a_manifest_declares_its_flow_control(tmp_path: Path) -> None:
    write(tmp_path, "crawl", LIMITED.format(id="crawl"))
    job_type = load_manifests(tmp_path).registry.get("crawl")
    assert job_type.dedup_key == "crawl:{site_id}:{page}"
    assert (job_type.concurrency_key, job_type.concurrency_limit) == ("site_id", 2)
    assert job_type.max_running == 3
    assert job_type.max_snoozes == 4
    plain = parse_manifest(write(tmp_path, "plain", "id: plain\ncommand: ./run.sh\n"))
    unlimited = plain.job_type()
    assert (unlimited.dedup_key, unlimited.concurrency_key, unlimited.max_running) == (
        None,
        None,
        None,
    )
    assert unlimited.max_snoozes == 20  # JobType's default
    assert job_type.concurrency_scope is KeyScope.ORG  # the default: per org
    shared = LIMITED.format(id="shared") + "concurrency_scope: global\n"
    write(tmp_path, "shared", shared)
    assert load_manifests(tmp_path).registry.get("shared").concurrency_scope is KeyScope.GLOBAL


def test_a_manifest_declares_a_rate_limit(tmp_path: Path) -> None:
    """``rate_limit: [N, per_seconds]`` over the type's key (decision 0042); the key may go
    with a rate limit alone."""
    body = "id: fetch\ncommand: ./run.sh\n" + PARAMS
    write(tmp_path, "fetch", body + "concurrency_key: site_id\nrate_limit: [5, 1]\n")
    job_type = load_manifests(tmp_path).registry.get("fetch")
    assert (job_type.concurrency_key, job_type.rate_limit) == ("site_id", (5, 1.0))
    assert job_type.concurrency_limit is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("concurrency_scope: world\n", "concurrency_scope: 'world' is not one of org, global"),
        ("concurrency_scope: global\n", "concurrency_scope: only with concurrency_key"),
    ],
)
def test_a_bad_concurrency_scope_is_refused_naming_the_field(
    tmp_path: Path, extra: str, message: str
) -> None:
    text = LIMITED.format(id="crawl") + extra
    if "global" in extra:  # a scope without a key to scope
        text = text.replace("concurrency_key: site_id\n", "").replace("concurrency_limit: 2\n", "")
    with pytest.raises(ManifestError, match=message):
        parse_manifest(write(tmp_path, "crawl", text))


def test_a_manifest_types_limits_and_dedup_key_are_enforced(tmp_path: Path) -> None:
    """The in-memory store is enough here: the contract suite proves the same limits on
    PostgreSQL for any JobType, and a manifest type is one."""
    write(tmp_path, "crawl", LIMITED.format(id="crawl"))
    service = JobService(InMemoryJobStore(), load_manifests(tmp_path).registry, FakeClock())
    first = service.enqueue("org-a", "crawl", {"site_id": 1})
    assert first.job.dedup_key == "crawl:1:/"  # derived from the payload, defaults filled
    assert not service.enqueue("org-a", "crawl", {"site_id": 1, "page": "/"}).created
    for page in ("/a", "/b", "/c"):
        service.enqueue("org-a", "crawl", {"site_id": 1, "page": page})
    for page in ("/a", "/b"):
        service.enqueue("org-a", "crawl", {"site_id": 2, "page": page})
    claimed = service.claim(10)
    per_site = Counter(job.payload["site_id"] for job in claimed)
    assert len(claimed) == 3  # max_running
    assert max(per_site.values()) == 2  # concurrency_limit per site_id
    assert service.claim(10) == []  # full: nothing more, whatever is queued
