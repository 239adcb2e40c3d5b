"""The module's registry as a worker builds it: its types, and its one setting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from jobs_imports.registry import (
    DEFAULT_BATCH_SIZE,
    batch_size_from_environment,
    build_registry,
)
from jobs_postgres.modules import opened_context
from jobs_worker.registries import worker_registry
from sqlalchemy import Engine


def test_the_batch_size_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOBS_IMPORTS_BATCH_SIZE", raising=False)
    assert batch_size_from_environment() == DEFAULT_BATCH_SIZE
    monkeypatch.setenv("JOBS_IMPORTS_BATCH_SIZE", " 250 ")
    assert batch_size_from_environment() == 250


@pytest.mark.parametrize("bad", ["0", "-3", "ten", "1.5"])
def test_a_bad_batch_size_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("JOBS_IMPORTS_BATCH_SIZE", bad)
    with pytest.raises(ValueError, match="JOBS_IMPORTS_BATCH_SIZE: not a positive integer"):
        batch_size_from_environment()


def test_build_registry_declares_the_three_types(pg_engine: Engine, tmp_path: Path) -> None:
    registry = build_registry(pg_engine, tmp_path, batch_size=10)
    assert set(registry.names()) == {"import_csv", "import_api", "map_reconcile"}
    api = registry.get("import_api")
    assert (api.concurrency_key, api.concurrency_limit) == ("site_target_id", 1)
    assert api.dedup_key == "import_api:{import_id}"


def test_the_worker_builds_the_shipped_module_on_an_engine_of_its_own(
    pg_url: str, tmp_path: Path
) -> None:
    with opened_context(pg_url, tmp_path) as context:
        names = set(worker_registry(False, context=context).names())
    assert {"import_csv", "import_api", "map_reconcile"} <= names
    # without a database the module that owns tables is not served
    assert "import_csv" not in worker_registry(False).names()


@pytest.mark.slow  # a worker process
def test_python_m_jobs_worker_refuses_a_bad_module_setting_in_one_line(pg_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
    env.update({"JOBS_DATABASE_URL": pg_url, "JOBS_IMPORTS_BATCH_SIZE": "zero"})
    done = subprocess.run(
        [sys.executable, "-m", "jobs_worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "jobs worker: JOBS_IMPORTS_BATCH_SIZE: not a positive integer: 'zero'"
    )
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "variable",
    [
        "JOBS_IMPORTS_API_TIMEOUT_S",
        "JOBS_IMPORTS_API_PAGE_DEADLINE_S",
        "JOBS_IMPORTS_API_MAX_PAGE_BYTES",
        "JOBS_IMPORTS_API_MAX_RETRY_AFTER_S",
    ],
)
def test_the_api_import_settings_are_read_and_a_bad_one_refused_by_name(variable: str) -> None:
    from jobs_imports.api_client import ApiSettings

    assert ApiSettings.from_settings({}) == ApiSettings()
    assert ApiSettings.from_settings(
        {"JOBS_IMPORTS_API_MAX_PAGE_BYTES": "1024"}
    ).max_page_bytes == (1024)
    for bad in ("0", "-1", "soon"):
        with pytest.raises(ValueError, match=f"{variable}: not a positive number: '{bad}'"):
            ApiSettings.from_settings({variable: bad})
