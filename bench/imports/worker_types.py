"""The Imports types for the benchmark's ``jobs worker``:
``JOBS_EXTRA_REGISTRIES=bench.imports.worker_types:registry``.

Until the worker builds module registries with its own engine
(``jobs_imports.build_registry(engine, data_dir)``), this is how a real ``jobs worker`` process
runs the module: the registry is built on first access from the worker's environment
(``JOBS_DATABASE_URL``, ``JOBS_DATA_DIR``), with the module's default batch size.
"""

from __future__ import annotations

import os
from pathlib import Path

from jobs_core import Registry


def __getattr__(name: str) -> Registry:
    if name != "registry":
        raise AttributeError(name)
    from jobs_imports.registry import build_registry
    from jobs_postgres.database import create_engine

    engine = create_engine(os.environ["JOBS_DATABASE_URL"], pool_size=2, max_overflow=2)
    built = build_registry(engine, Path(os.environ["JOBS_DATA_DIR"]))
    globals()["registry"] = built
    return built
