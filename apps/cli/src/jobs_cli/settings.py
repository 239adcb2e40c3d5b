"""What the CLI reads from the environment (prefix ``JOBS_``).

Only the variables the CLI itself decides on are read here; the API and the worker read their own
settings classes when the CLI starts them. Plain ``os.environ`` rather than pydantic-settings: the
CLI's one-shot commands (``jobs ls``) should not pay for importing pydantic.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class SettingsError(ValueError):
    """An environment variable holds a value the CLI cannot use."""


def parse_bool(name: str, raw: str) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` (any case), else :class:`SettingsError`."""
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise SettingsError(f"{name}={raw!r} is not a boolean (use 1 or 0)")


def project_root(start: Path | None = None) -> Path | None:
    """The nearest directory at or above ``start`` holding the uv workspace's ``pyproject.toml``."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        try:
            if candidate.is_file() and "[tool.uv.workspace]" in candidate.read_text("utf-8"):
                return directory
        except OSError:
            continue
    return None


def example_handlers_dir(start: Path | None = None) -> Path | None:
    """The example subprocess handlers shipped in the project (``examples/handlers``), if any."""
    root = project_root(start)
    candidate = root / "examples" / "handlers" if root is not None else None
    return candidate if candidate is not None and candidate.is_dir() else None


def default_data_dir(start: Path | None = None) -> Path:
    """``.data`` under the project (ignored by git), or under the current directory outside it."""
    root = project_root(start)
    return (root or (start or Path.cwd())) / ".data"


@dataclass(frozen=True, slots=True)
class CliSettings:
    """The CLI's view of the environment.

    - ``database_url`` (``JOBS_DATABASE_URL``): None means the embedded PostgreSQL server;
    - ``data_dir`` (``JOBS_DATA_DIR``): where the embedded server keeps its data;
    - ``demo_types`` (``JOBS_DEMO_TYPES``): register the demo types; when unset it is on for the
      embedded server (a development database) and off for a real one;
    - ``extra_registries`` (``JOBS_EXTRA_REGISTRIES``): comma-separated ``module:attribute``
      paths of a deployment's own registries, served besides the shipped modules;
    - ``debug`` (``JOBS_DEBUG``): print tracebacks on errors;
    - ``handlers_dir`` (``JOBS_HANDLERS_DIR``): manifest-declared subprocess types; when unset
      and the demo types are on, the project's ``examples/handlers`` (if there).
    """

    database_url: str | None
    data_dir: Path
    demo_types: bool
    debug: bool
    extra_registries: tuple[str, ...] = ()
    handlers_dir: Path | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CliSettings:
        """Read the ``JOBS_`` variables (``os.environ`` by default)."""
        env = os.environ if environ is None else environ
        url = env.get("JOBS_DATABASE_URL", "").strip() or None
        raw_dir = env.get("JOBS_DATA_DIR", "").strip()
        data_dir = Path(raw_dir).expanduser().resolve() if raw_dir else default_data_dir()
        raw_demo = env.get("JOBS_DEMO_TYPES")
        explicit = raw_demo is not None and raw_demo.strip() != ""
        demo = parse_bool("JOBS_DEMO_TYPES", raw_demo) if explicit and raw_demo else url is None
        debug = parse_bool("JOBS_DEBUG", env.get("JOBS_DEBUG", ""))
        extra = tuple(
            part.strip() for part in env.get("JOBS_EXTRA_REGISTRIES", "").split(",") if part.strip()
        )
        raw_handlers = env.get("JOBS_HANDLERS_DIR", "").strip()
        handlers = Path(raw_handlers).expanduser().resolve() if raw_handlers else None
        if handlers is None and demo:
            handlers = example_handlers_dir()
        return cls(
            handlers_dir=handlers,
            database_url=url,
            data_dir=data_dir,
            demo_types=demo,
            debug=debug,
            extra_registries=extra,
        )
