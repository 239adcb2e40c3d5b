"""``jobs api`` and ``jobs worker``: the two long-running deployables, started from the CLI."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

from jobs_cli import db
from jobs_cli.errors import UsageError
from jobs_cli.settings import CliSettings

if TYPE_CHECKING:
    from pydantic import ValidationError


def _configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _first_problem(exc: ValidationError) -> str:
    """``JOBS_CONCURRENCY: Input should be a valid integer`` from a settings error."""
    error = exc.errors(include_url=False)[0]
    name = "JOBS_" + "_".join(str(part) for part in error["loc"]).upper()
    return f"{name}: {error['msg']}"


def _reachable(settings: CliSettings) -> CliSettings:
    """Resolve the database and run one query, so a wrong URL fails now, in one line, rather
    than at the first request; the settings then carry the resolved URL."""
    from sqlalchemy import text

    url = db.database_url(settings)
    resolved = dataclasses.replace(settings, database_url=url)
    with db.engine(resolved) as engine, engine.connect() as connection:
        connection.execute(text("SELECT 1"))
    return resolved


class _Stopped(Exception):
    """SIGINT/SIGTERM arrived outside uvicorn's own handling."""


@contextmanager
def _stop_on_signals() -> Iterator[None]:
    """Make SIGINT/SIGTERM a clean stop (exit 0) for the whole of ``jobs api``.

    uvicorn handles both signals while it serves, shuts down gracefully, restores the handlers
    it found and raises the signal again for them. These are those handlers: without them, the
    re-raised SIGTERM would kill the process (exit -15) after a perfectly clean shutdown, and a
    signal during startup would leave a traceback.
    """

    def stop(signum: int, frame: FrameType | None) -> None:
        raise _Stopped

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except _Stopped:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def api(args: argparse.Namespace, settings: CliSettings) -> int:
    """Serve the HTTP API until SIGINT/SIGTERM; 0 after a clean stop."""
    _configure_logging()
    with _stop_on_signals():
        return _serve_api(args, settings)
    return 0  # stopped by a signal before or after serving: a clean stop


def _serve_api(args: argparse.Namespace, settings: CliSettings) -> int:
    from jobs_api.app import serve
    from jobs_api.containers import build_container
    from jobs_api.settings import ApiSettings
    from pydantic import ValidationError

    from jobs_cli.registries import build_registry

    try:
        api_settings = ApiSettings(data_dir=settings.data_dir, demo_types=settings.demo_types)
    except ValidationError as exc:
        raise UsageError(f"invalid API settings: {_first_problem(exc)}") from None
    if api_settings.store == "postgres":
        resolved = _reachable(settings)
        api_settings = api_settings.model_copy(update={"database_url": resolved.database_url})
    from jobs_cli.registries import modules

    # the modules' types and routes (decision 0024: the same modules as the worker; those that
    # own tables only on PostgreSQL), built by the API on its own engine; the demo types are a
    # development module: public over HTTP only with JOBS_DEMO_OVER_HTTP (jobs dev)
    registry = build_registry(settings, with_modules=False)
    container = build_container(api_settings, [registry], modules(settings))
    host = args.host if args.host is not None else api_settings.api_host
    port = args.port if args.port is not None else api_settings.api_port
    serve(container, host=host, port=port)
    return 0


def worker(args: argparse.Namespace, settings: CliSettings) -> int:
    """Run a worker until SIGINT/SIGTERM; its exit code."""
    from jobs_worker.main import ConfigurationError, run_worker, settings_from_args
    from jobs_worker.settings import WorkerSettings
    from pydantic import ValidationError

    try:
        base = WorkerSettings()
        worker_settings = settings_from_args(args, base)
    except ValidationError as exc:
        raise UsageError(f"invalid worker settings: {_first_problem(exc)}") from None
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None
    resolved = _reachable(settings)
    # The CLI's view wins where it differs from the worker's own defaults: the data directory
    # is the project's, and the demo types are on by default on the embedded server. An
    # explicit --demo-types/--no-demo-types option still decides.
    overrides: dict[str, object] = {
        "database_url": resolved.database_url,
        "data_dir": settings.data_dir,
    }
    if getattr(args, "demo_types", None) is None:
        overrides["demo_types"] = settings.demo_types
    worker_settings = worker_settings.model_copy(update=overrides)
    # The worker loads the modules itself (jobs_worker.registries.load_modules) and builds their
    # types on an engine of their own, as `python -m jobs_worker` does.
    try:
        return run_worker(settings=worker_settings)
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None
