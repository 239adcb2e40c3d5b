"""The Imports types for real worker processes in tests, loaded through the worker's documented
extension point: ``JOBS_EXTRA_REGISTRIES=tests.imports.worker_registry:registry``.

The worker builds its registry before its engine and only loads ``Registry`` attributes, while
the module's handlers need an engine (``jobs_imports.build_registry(engine, data_dir)``). So
this test glue builds the registry on first access, from the worker's own environment:
``JOBS_DATABASE_URL``, ``JOBS_DATA_DIR``, and ``JOBS_IMPORTS_BATCH_SIZE`` (small, so an import
spans many transactions a test can kill the worker in the middle of).
"""

from __future__ import annotations

import os
from pathlib import Path

from jobs_core import Registry


def _build() -> Registry:
    from jobs_imports.registry import build_registry
    from jobs_postgres.database import create_engine

    engine = create_engine(os.environ["JOBS_DATABASE_URL"], pool_size=2, max_overflow=2)
    batch_size = int(os.environ.get("JOBS_IMPORTS_BATCH_SIZE", "5000"))
    return build_registry(engine, Path(os.environ["JOBS_DATA_DIR"]), batch_size=batch_size)


def __getattr__(name: str) -> Registry:
    if name != "registry":
        raise AttributeError(name)
    built = _build()
    globals()["registry"] = built
    return built
