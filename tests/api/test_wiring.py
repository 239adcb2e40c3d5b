"""Settings, the container's choices and the registry composition."""

from __future__ import annotations

from pathlib import Path

import pytest
from jobs_api.__main__ import load_registry, served_registries
from jobs_api.containers import build_container, compose_registry
from jobs_api.settings import ApiSettings
from jobs_core import DuplicateJobType, InMemoryJobStore, JobType, Registry
from jobs_tokens import InMemoryTokenStore


def test_settings_come_from_jobs_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBS_DATABASE_URL", "postgresql+psycopg://db.example/jobs")
    monkeypatch.setenv("JOBS_DATA_DIR", "/srv/jobs")
    monkeypatch.setenv("JOBS_DEMO_TYPES", "1")
    monkeypatch.setenv("JOBS_MAX_BODY_BYTES", "2048")
    monkeypatch.setenv("JOBS_STORE", "memory")
    settings = ApiSettings()
    assert settings.database_url == "postgresql+psycopg://db.example/jobs"
    assert settings.data_dir == Path("/srv/jobs")
    assert settings.demo_types is True
    assert settings.max_body_bytes == 2048
    assert settings.store == "memory"


def test_settings_defaults_and_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DATABASE_URL", "DATA_DIR", "DEMO_TYPES", "MAX_BODY_BYTES", "STORE"):
        monkeypatch.delenv(f"JOBS_{name}", raising=False)
    settings = ApiSettings()
    assert settings.database_url is None
    assert settings.data_dir == Path(".data")
    assert settings.store == "postgres"
    assert settings.max_body_bytes == 1024 * 1024
    monkeypatch.setenv("JOBS_STORE", "sqlite")
    with pytest.raises(ValueError, match="store"):
        ApiSettings()


def test_the_memory_selection_builds_one_store_per_container() -> None:
    container = build_container(ApiSettings(store="memory"))
    assert isinstance(container.store(), InMemoryJobStore)
    assert isinstance(container.token_store(), InMemoryTokenStore)
    assert container.service().store is container.store()
    assert container.service() is container.service()
    other = build_container(ApiSettings(store="memory"))
    assert other.store() is not container.store()


def test_registries_compose_and_names_stay_unique() -> None:
    first, second = Registry("a"), Registry("b")
    first.register(JobType("one", lambda ctx: None, public=True))
    second.register(JobType("two", lambda ctx: None))
    assert compose_registry([first, second]).names() == ["one", "two"]
    clash = Registry("c")
    clash.register(JobType("one", lambda ctx: None))
    with pytest.raises(DuplicateJobType):
        compose_registry([first, clash])
    assert build_container(ApiSettings(store="memory"), [first]).registry().names() == ["one"]


def test_registry_specs_on_the_command_line() -> None:
    assert "greet" in load_registry("tests.api.helpers:registry")
    with pytest.raises(ValueError, match="module:attribute"):
        load_registry("tests.api.helpers")
    with pytest.raises(TypeError, match="not a Registry"):
        load_registry("tests.api.helpers:make_registry")
    with pytest.raises(ImportError):
        load_registry("no_such_module_here:registry")


def test_the_bare_entry_point_serves_the_manifest_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``python -m jobs_api`` reads JOBS_HANDLERS_DIR like ``jobs api`` and the worker: the same
    loader, so a valid manifest is served, an invalid one and one reusing a type's name are
    logged and skipped."""
    for type_id, body in {
        "count": "id: count\ncommand: ./run.sh\npublic: true\nmax_running: 2\n",
        "broken": "id: broken\ncommand: ./run.sh\nmax_running: 0\n",
        "greet": "id: greet\ncommand: ./run.sh\n",  # tests.api.helpers' type
    }.items():
        directory = tmp_path / type_id
        directory.mkdir()
        (directory / "manifest.yaml").write_text(body)
        (directory / "run.sh").write_text("#!/bin/sh\necho '{}'\n")
        (directory / "run.sh").chmod(0o755)
    monkeypatch.setenv("JOBS_HANDLERS_DIR", str(tmp_path))
    monkeypatch.setenv("JOBS_DEMO_TYPES", "0")
    monkeypatch.setenv("JOBS_STORE", "memory")
    settings = ApiSettings()
    assert settings.handlers_dir == tmp_path
    with caplog.at_level("ERROR", logger="jobs.manifests"):
        registries, modules = served_registries(settings, ["tests.api.helpers:registry"])
    assert [module.name for module in modules if module.development] == []  # no demo types
    registry = build_container(settings, registries).registry()
    assert "count" in registry
    assert registry.get("count").max_running == 2
    assert registry.get("count").public
    assert "broken" not in registry
    assert "field=max_running" in caplog.text
    assert "'greet' is already a registered job type" in caplog.text
    monkeypatch.setenv("JOBS_HANDLERS_DIR", "")
    assert ApiSettings().handlers_dir is None
    assert served_registries(ApiSettings(), [])[0] == []


@pytest.mark.anyio
async def test_an_unreachable_database_is_a_503_on_health_and_on_every_route() -> None:
    # The real PostgreSQL wiring (URL → engine Resource → stores) on a port nothing listens on.
    import httpx
    from jobs_api.app import create_app

    settings = ApiSettings(store="postgres", database_url="postgresql://postgres@127.0.0.1:1/none")
    container = build_container(settings)
    transport = httpx.ASGITransport(app=create_app(container), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        health = await http.get("/healthz")
        assert health.status_code == 503
        assert health.headers["content-type"] == "application/problem+json"
        assert health.json()["detail"] == "the job store is unreachable"

        listed = await http.get("/jobs", headers={"Authorization": "Bearer jobs_" + "A" * 43})
        assert listed.status_code == 503
        assert listed.headers["retry-after"] == "1"
        assert listed.json() == {
            "type": "urn:jobs:problem:store-unavailable",
            "title": "Service Unavailable",
            "status": 503,
            "detail": "the job store is unavailable; retry later",
        }
    container.shutdown_resources()


@pytest.mark.anyio
async def test_the_pool_holds_a_connection_for_every_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No connection is opened and closed per request under load: every thread that runs a
    # blocking call finds a pooled connection (bench/NOTES.md §5).
    from anyio import to_thread
    from jobs_api.app import create_app

    monkeypatch.setenv("JOBS_API_THREADS", "7")
    settings = ApiSettings(store="postgres", database_url="postgresql://postgres@127.0.0.1:1/none")
    assert settings.api_threads == 7
    container = build_container(settings)
    engine = container.engine()  # nothing connects until a query runs
    assert engine.pool.size() == 7  # type: ignore[attr-defined]
    app = create_app(container)
    async with app.router.lifespan_context(app):
        assert to_thread.current_default_thread_limiter().total_tokens == 7


# ---- the demo types over HTTP (issue 11, finding 7) -------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("over_http", [False, True])
async def test_demo_types_are_enqueueable_over_http_only_with_the_development_flag(
    monkeypatch: pytest.MonkeyPatch, over_http: bool
) -> None:
    import httpx
    from jobs_api.app import create_app
    from jobs_tokens import issue_token
    from jobs_worker.demo import registry as demo

    monkeypatch.delenv("JOBS_DEMO_OVER_HTTP", raising=False)
    settings = ApiSettings(store="memory", demo_types=True, demo_over_http=over_http)
    container = build_container(settings, [], development=[demo])
    token, _ = issue_token(container.token_store(), "org", None, container.clock().now())
    transport = httpx.ASGITransport(app=create_app(container))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        auth = {"Authorization": f"Bearer {token}"}
        answers = {}
        for name, payload in (("crash", {}), ("noop", {}), ("sleep", {"seconds": 0}), ("fail", {})):
            response = await http.post(
                "/jobs", json={"type": name, "payload": payload}, headers=auth
            )
            answers[name] = response.status_code, response.json().get("type")
    if over_http:
        assert {name: code for name, (code, _) in answers.items()} == dict.fromkeys(answers, 202)
    else:
        assert answers == dict.fromkeys(answers, (422, "urn:jobs:problem:unknown-job-type"))
    # the CLI and the workers still know them: only HTTP is closed
    assert "crash" in container.service().registry
    assert ApiSettings.model_fields["demo_over_http"].default is False


def test_the_development_flag_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JOBS_DEMO_OVER_HTTP", "1")
    monkeypatch.setenv("JOBS_ALLOW_PRIVATE_URLS", "1")
    settings = ApiSettings()
    assert (settings.demo_over_http, settings.allow_private_urls) == (True, True)


def test_a_development_module_is_internal_unless_the_development_flag() -> None:
    """The demo types declared as a development module (decision 0024) follow the same rule as
    development registries: served to the service, public over HTTP only with the flag."""
    from jobs_imports.module import module as imports_module
    from jobs_worker.demo import module as demo_module

    for over_http in (False, True):
        settings = ApiSettings(store="memory", demo_types=True, demo_over_http=over_http)
        container = build_container(settings, [], [demo_module, imports_module])
        registry = container.registry()
        assert "crash" in registry
        assert registry.get("crash").public is over_http
        # a module that owns tables is not served on the memory store
        assert "import_csv" not in registry
        assert container.service().registry is registry
