"""Fixtures shared by the worker tests that start real processes."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory of this test's own for its processes' logs and files. Not pytest's
    ``tmp_path``: other pytest sessions running at the same time on this machine prune and
    re-chmod the shared ``pytest-of-<user>``."""
    with tempfile.TemporaryDirectory(prefix="jobs-worker-test-") as path:
        yield Path(path)
