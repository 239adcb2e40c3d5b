"""Which types run isolated: ``import_csv`` by default, the setting's list otherwise."""

from __future__ import annotations

from jobs_core import JobType, Registry, RetryPolicy
from jobs_core.protocol import ChildRetryable
from jobs_worker.child import SubprocessHandler
from jobs_worker.main import isolate_types
from jobs_worker.settings import WorkerSettings


def registry() -> Registry:
    types = Registry("t")
    types.register(
        JobType("import_csv", lambda ctx: None, retry=RetryPolicy(retry_on=(ConnectionError,)))
    )
    types.register(JobType("other", lambda ctx: None, timeout_s=5))
    return types


def test_import_csv_runs_in_a_child_by_default() -> None:
    isolated = isolate_types(registry(), WorkerSettings(), (), shipped_modules=True)
    handler = isolated.get("import_csv").handler
    assert isinstance(handler, SubprocessHandler)
    assert handler.spec.context_mode
    assert handler.spec.argv[1:] == ("-m", "jobs_worker.isolated")
    assert not isinstance(isolated.get("other").handler, SubprocessHandler)
    # its declared retryable errors stay retryable once they cross as exit code 75
    assert isolated.get("import_csv").retry.is_retryable(ChildRetryable("exit 75"))


def test_the_setting_chooses_the_isolated_types() -> None:
    settings = WorkerSettings.model_validate({"isolated_types": "other, missing"})
    isolated = isolate_types(registry(), settings, (), shipped_modules=False)
    other = isolated.get("other").handler
    assert isinstance(other, SubprocessHandler)
    assert other.spec.timeout_s == 5  # the child is killed at the type's timeout
    assert not isinstance(isolated.get("import_csv").handler, SubprocessHandler)


def test_a_dash_isolates_nothing() -> None:
    settings = WorkerSettings.model_validate({"isolated_types": "-"})
    assert settings.isolated_types == []
    isolated = isolate_types(registry(), settings, (), shipped_modules=False)
    assert not any(isinstance(t.handler, SubprocessHandler) for t in isolated)
