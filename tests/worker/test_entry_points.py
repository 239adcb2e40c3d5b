"""Settings, options, registries, the container and the demo types (no database needed)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jobs_core import (
    FakeClock,
    InMemoryJobStore,
    InMemoryWakeup,
    JobType,
    PayloadInvalid,
    Registry,
    Status,
)
from jobs_worker.composition import Composition
from jobs_worker.demo import registry as demo
from jobs_worker.logs import Event, Events, JsonFormatter, TextFormatter
from jobs_worker.main import (
    _OPTION_FIELDS,
    ConfigurationError,
    build_parser,
    run_worker,
    settings_from_args,
)
from jobs_worker.registries import (
    RegistryLoadError,
    load_modules,
    load_registry,
    worker_registry,
)
from jobs_worker.settings import WorkerSettings
from pydantic import ValidationError

from tests.worker.helpers import FAST, ORG, build, job_of, running, status_of, wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("JOBS_"):
            monkeypatch.delenv(name)


# -- settings and options -----------------------------------------------------------------------


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBS_CONCURRENCY", "4")
    monkeypatch.setenv("JOBS_DEMO_TYPES", "1")
    monkeypatch.setenv("JOBS_EXTRA_REGISTRIES", "a.b:registry, c:types")
    monkeypatch.setenv("JOBS_LOG_LEVEL", "warning")
    settings = WorkerSettings()
    assert settings.concurrency == 4
    assert settings.demo_types is True
    assert settings.extra_registries == ["a.b:registry", "c:types"]
    assert settings.log_level == "WARNING"
    assert settings.database_url is None


def test_settings_defaults_follow_the_spec() -> None:
    settings = WorkerSettings()
    assert settings.concurrency == 1  # docs/contract.md §4: one job at a time
    assert settings.heartbeat_s == 30
    assert settings.sweep_threshold_s == 600
    assert settings.sweep_interval_s == 60
    assert 1 <= settings.poll_interval_s <= 2
    assert settings.demo_types is False


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("JOBS_CONCURRENCY", "0"),
        ("JOBS_HEARTBEAT_S", "-1"),
        ("JOBS_EXTRA_REGISTRIES", "no_colon"),
        ("JOBS_LOG_FORMAT", "xml"),
    ],
)
def test_bad_settings_are_refused(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        WorkerSettings()


def test_the_heartbeat_never_comes_later_than_a_third_of_the_threshold() -> None:
    assert WorkerSettings().effective_heartbeat_s == 30
    short = WorkerSettings(sweep_threshold_s=30, heartbeat_s=30)
    assert short.effective_heartbeat_s == 10


def test_options_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBS_CONCURRENCY", "2")
    monkeypatch.setenv("JOBS_DEMO_TYPES", "1")
    monkeypatch.setenv("JOBS_SWEEP_THRESHOLD_S", "120")
    args = build_parser().parse_args(
        ["--concurrency", "8", "--no-demo-types", "--extra-registry", "x:y", "--heartbeat", "5"]
    )
    settings = settings_from_args(args)
    assert settings.concurrency == 8
    assert settings.demo_types is False
    assert settings.extra_registries == ["x:y"]
    assert settings.heartbeat_s == 5
    assert settings.sweep_threshold_s == 120  # not given: the environment's


@pytest.mark.parametrize(
    "argv",
    [["--concurrency", "0"], ["--heartbeat", "nan"], ["--shutdown-grace", "-1"], ["--bogus"]],
)
def test_bad_options_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2


def test_help_documents_every_option_and_setting() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jobs_worker", "--help"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=60,
    )
    parser = build_parser()
    documented = {
        action.dest: action for action in parser._actions if action.dest in _OPTION_FIELDS
    }
    assert set(documented) == set(_OPTION_FIELDS)
    for action in documented.values():
        assert action.help
        assert any(option in result.stdout for option in action.option_strings)
    for field in WorkerSettings.model_fields:
        assert f"JOBS_{field.upper()}" in result.stdout


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"JOBS_CONCURRENCY": "0"}, "invalid worker settings: JOBS_CONCURRENCY"),
        ({"JOBS_EXTRA_REGISTRIES": "no_such_module_xyz:registry"}, "cannot import"),
    ],
)
def test_the_process_reports_a_bad_configuration_in_one_line(
    env: dict[str, str], message: str
) -> None:
    child = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
    result = subprocess.run(
        [sys.executable, "-m", "jobs_worker"],
        check=False,
        capture_output=True,
        text=True,
        env={**child, **env},
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


# -- registries ---------------------------------------------------------------------------------


def test_the_demo_types_are_served_only_when_asked() -> None:
    assert {"noop", "sleep", "fail", "crash"} <= set(worker_registry(True).names())
    assert "noop" not in worker_registry(False).names()
    assert "demo" in [module.name for module in load_modules(True)]
    assert "demo" not in [module.name for module in load_modules(False)]
    assert all(job_type.public for job_type in demo)
    assert demo.get("crash").max_attempts == 3


def test_extra_registries_are_loaded_by_path() -> None:
    loaded = load_registry("tests.worker.exec_registry:registry")
    assert loaded.names() == ["record"]
    assert "record" in worker_registry(False, ["tests.worker.exec_registry:registry"])
    for bad, message in [
        ("nope", "not a 'module:attribute' path"),
        ("no_such_module_xyz:registry", "cannot import"),
        ("jobs_worker.demo:CRASH_EXIT_CODE", "is int, not a jobs_core.Registry"),
        ("jobs_worker.demo:missing", "is nothing"),
    ]:
        with pytest.raises(RegistryLoadError, match=message):
            load_registry(bad)


def test_a_type_registered_twice_is_a_configuration_error() -> None:
    twin = Registry("twin")
    twin.register(JobType("noop", lambda ctx: None))
    with pytest.raises(ConfigurationError, match="already registered"):
        run_worker(
            extra_registries=[twin],
            settings=WorkerSettings(demo_types=True),
            handle_signals=False,
            configure_logs=False,
        )


def test_the_composition_runs_a_worker_over_a_given_store() -> None:
    settings = WorkerSettings(
        demo_types=True, poll_interval_s=0.05, sweep_threshold_s=30, heartbeat_s=30
    )
    store = InMemoryJobStore()
    parts = Composition(
        settings,
        worker_registry(True),
        store=store,
        wakeup=lambda: InMemoryWakeup(store),
        clock=FakeClock(),
    )
    worker = parts.worker()
    assert worker.config.heartbeat_s == 10  # a third of the 30 s threshold
    assert worker.config.concurrency == 1
    assert parts.service() is parts.service()  # built once
    job = parts.service().enqueue(ORG, "noop").job
    with running(worker):
        wait_until(lambda: status_of(store, job.id) is Status.DONE)


# -- the demo types -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_name", "payload"),
    [
        ("sleep", {}),
        ("sleep", {"seconds": -1}),
        ("sleep", {"seconds": 3601}),
        ("sleep", {"seconds": "2"}),
        ("sleep", {"seconds": True}),
        ("sleep", {"seconds": 1, "extra": 1}),
        ("fail", {"message": ""}),
        ("crash", {"why": "not"}),
    ],
)
def test_demo_payloads_are_checked(type_name: str, payload: dict[str, object]) -> None:
    with pytest.raises(PayloadInvalid):
        demo.new_job(ORG, type_name, payload)


def test_demo_payloads_are_normalized_and_documented() -> None:
    assert demo.new_job(ORG, "sleep", {"seconds": 2}).payload == {"seconds": 2.0}
    assert demo.new_job(ORG, "fail").payload == {"message": "demo failure"}
    assert demo.new_job(ORG, "noop", {"anything": [1]}).payload == {"anything": [1]}
    schema = demo.get("sleep").payload_schema
    assert schema is not None
    assert schema.json_schema()["properties"]["seconds"]["maximum"] == 3600


def test_demo_sleep_reports_progress_and_fail_fails() -> None:
    worker, service, store = build(demo, FAST)
    nap = service.enqueue(ORG, "sleep", {"seconds": 1.2}).job
    boom = service.enqueue(ORG, "fail", {"message": "boom"}).job
    with running(worker):
        wait_until(lambda: status_of(store, boom.id) is Status.FAILED, 20)
    slept = job_of(store, nap.id)
    assert slept.status is Status.DONE
    assert slept.report == {"slept_s": 1.2}
    assert slept.progress is not None
    assert (slept.progress["done"], slept.progress["total"]) == (1.2, 1.2)
    assert job_of(store, boom.id).error == "DemoFailure: boom"


def test_demo_sleep_stops_on_cancellation() -> None:
    worker, service, store = build(demo, FAST)
    job = service.enqueue(ORG, "sleep", {"seconds": 600}).job
    with running(worker):
        wait_until(lambda: status_of(store, job.id) is Status.RUNNING)
        service.cancel(ORG, job.id)
        wait_until(lambda: status_of(store, job.id) is Status.CANCELLED, 5)
    progress = job_of(store, job.id).progress
    assert progress is not None
    assert progress["total"] == 600


# -- log lines ----------------------------------------------------------------------------------


def test_log_lines_render_as_key_value_text_or_json() -> None:
    event = Event("job.finished", {"job_id": "abc", "error": 'Bad "x" y', "run_at": None})
    assert str(event) == 'event=job.finished job_id=abc error="Bad \\"x\\" y" run_at=-'
    record = logging.LogRecord("jobs.worker", logging.INFO, __file__, 1, event, None, None)
    document = json.loads(JsonFormatter().format(record))
    assert document["event"] == "job.finished"
    assert document["error"] == 'Bad "x" y'
    assert document["level"] == "info"


def test_a_batch_of_events_is_one_record_written_one_line_per_job() -> None:
    batch = Events(
        [Event("job.finished", {"job_id": f"j{i}", "outcome": "done"}) for i in range(3)]
    )
    record = logging.LogRecord("jobs.worker", logging.INFO, __file__, 1, batch, None, None)
    documents = [json.loads(line) for line in JsonFormatter().format(record).splitlines()]
    assert [d["job_id"] for d in documents] == ["j0", "j1", "j2"]
    assert all(d["event"] == "job.finished" and d["level"] == "info" for d in documents)
    lines = TextFormatter().format(record).splitlines()
    assert len(lines) == 3
    assert all(" INFO jobs.worker event=job.finished job_id=j" in line for line in lines)
    assert lines[2].endswith("job_id=j2 outcome=done")


@pytest.mark.parametrize(("raw", "fair"), [(None, True), ("1", True), ("0", False)])
def test_jobs_fair_claim_sets_the_worker_claim_fair_by_default(
    monkeypatch: pytest.MonkeyPatch, raw: str | None, fair: bool
) -> None:
    if raw is None:
        monkeypatch.delenv("JOBS_FAIR_CLAIM", raising=False)
    else:
        monkeypatch.setenv("JOBS_FAIR_CLAIM", raw)
    parts = Composition(
        WorkerSettings(demo_types=True),
        worker_registry(True),
        store=InMemoryJobStore(),
        clock=FakeClock(),
    )
    assert parts.service().fair_claim is fair


def test_a_bad_jobs_fair_claim_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBS_FAIR_CLAIM", "perhaps")
    with pytest.raises(ValueError, match="fair_claim"):
        WorkerSettings()
