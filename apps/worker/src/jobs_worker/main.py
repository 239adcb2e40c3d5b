"""Entry points of the worker: ``python -m jobs_worker`` and what ``jobs worker`` calls.

- :func:`run_worker` composes a worker (:mod:`jobs_worker.composition`) and runs it until
  SIGTERM/SIGINT; it returns the process exit code. ``jobs worker`` calls it.
- :func:`add_worker_arguments` puts every option on an argparse parser (the CLI's ``worker``
  subcommand uses it, so ``jobs worker --help`` documents them all); :func:`settings_from_args`
  reads them back over the environment.

Signals: the first SIGTERM/SIGINT stops claiming and lets running jobs finish (exit 0); a second
one, or ``JOBS_SHUTDOWN_GRACE_S`` elapsing, cancels what still runs and hands those jobs back to
the queue without consuming their attempt.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from contextlib import ExitStack
from types import FrameType

from jobs_core import DuplicateJobType, Registry
from jobs_core.modules import selection_from
from pydantic import ValidationError

from jobs_worker import startup
from jobs_worker import worker as worker_module
from jobs_worker.composition import Composition
from jobs_worker.logs import configure_logging, log_event
from jobs_worker.options import (
    ENVIRONMENT_HELP,
    default,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from jobs_worker.registries import (
    ModuleError,
    RegistryLoadError,
    compose,
    load_modules,
    load_registry,
    worker_registry,
)
from jobs_worker.scheduler import Maintenance, running_scheduler
from jobs_worker.settings import WorkerSettings
from jobs_worker.worker import Worker

log = logging.getLogger("jobs.worker")

EXIT_OK = 0
EXIT_CRASHED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_WEDGED = worker_module.EXIT_WEDGED
"""A handler overran its timeout and did not stop within ``JOBS_TIMEOUT_GRACE_S``."""
EXIT_FENCED = worker_module.EXIT_FENCED
"""The worker could not prove its leases and a fenced handler did not stop in time."""


class ConfigurationError(ValueError):
    """The worker's settings or options are invalid (exit code 2)."""


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every worker option to ``parser``. Each defaults to None, meaning "the environment's
    value" (see :func:`settings_from_args`)."""
    group = parser.add_argument_group("worker options")
    group.add_argument(
        "--concurrency",
        type=positive_int,
        metavar="N",
        help="jobs run at once by this process "
        f"(JOBS_CONCURRENCY, default {default('concurrency')})",
    )
    group.add_argument(
        "--heartbeat",
        dest="heartbeat_s",
        type=positive_float,
        metavar="S",
        help="seconds between heartbeats of every running job; at most a third of the sweep "
        f"threshold is used (JOBS_HEARTBEAT_S, default {default('heartbeat_s'):g})",
    )
    group.add_argument(
        "--sweep-interval",
        dest="sweep_interval_s",
        type=positive_float,
        metavar="S",
        help="seconds between two looks for zombie jobs; one at start too "
        f"(JOBS_SWEEP_INTERVAL_S, default {default('sweep_interval_s'):g})",
    )
    group.add_argument(
        "--sweep-threshold",
        dest="sweep_threshold_s",
        type=positive_float,
        metavar="S",
        help="seconds of silence after which a running job is a zombie: re-queued, or failed "
        "after max_attempts "
        f"(JOBS_SWEEP_THRESHOLD_S, default {default('sweep_threshold_s'):g})",
    )
    group.add_argument(
        "--poll-interval",
        dest="poll_interval_s",
        type=positive_float,
        metavar="S",
        help="fallback poll when no notification arrives, and the pace of the end hooks' pass "
        f"(JOBS_POLL_INTERVAL_S, default {default('poll_interval_s'):g})",
    )
    group.add_argument(
        "--cancel-check",
        dest="cancel_check_s",
        type=positive_float,
        metavar="S",
        help="seconds between checks of running jobs for a cancellation request "
        f"(JOBS_CANCEL_CHECK_S, default {default('cancel_check_s'):g})",
    )
    group.add_argument(
        "--shutdown-grace",
        dest="shutdown_grace_s",
        type=non_negative_float,
        metavar="S",
        help="after SIGTERM/SIGINT, seconds running jobs get to finish before they are cancelled "
        f"and handed back (JOBS_SHUTDOWN_GRACE_S, default {default('shutdown_grace_s'):g})",
    )
    group.add_argument(
        "--lease-margin",
        dest="lease_margin_s",
        type=positive_float,
        metavar="S",
        help="a handler whose lease could not be proven for (sweep threshold - S) seconds is "
        "cancelled and claiming stops; the process exits (code 5) if it has not stopped S/2 "
        "later (JOBS_LEASE_MARGIN_S, default a fifth of the sweep threshold)",
    )
    group.add_argument(
        "--store-timeout",
        dest="store_timeout_s",
        type=positive_float,
        metavar="S",
        help="the longest any database call of the worker may wait: statement/lock timeouts, "
        "TCP keepalives, a watchdog for a silent link "
        f"(JOBS_STORE_TIMEOUT_S, default {default('store_timeout_s'):g})",
    )
    group.add_argument(
        "--timeout-grace",
        dest="timeout_grace_s",
        type=positive_float,
        metavar="S",
        help="how long a handler past its type's timeout may keep its slot before the worker "
        "hands its other jobs back and exits with code 4 "
        f"(JOBS_TIMEOUT_GRACE_S, default {default('timeout_grace_s'):g})",
    )
    group.add_argument(
        "--prefetch",
        type=non_negative_int,
        metavar="N",
        help="jobs claimed beyond the free slots while handlers are short, at most (0: off) "
        f"(JOBS_PREFETCH, default {default('prefetch')})",
    )
    group.add_argument(
        "--prefetch-window",
        dest="prefetch_window_s",
        type=non_negative_float,
        metavar="S",
        help="how long a prefetched job may expect to wait for a slot "
        f"(JOBS_PREFETCH_WINDOW_S, default {default('prefetch_window_s'):g})",
    )
    group.add_argument(
        "--demo-types",
        dest="demo_types",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="register the demo types noop, sleep, fail, crash (JOBS_DEMO_TYPES, default off)",
    )
    group.add_argument(
        "--extra-registry",
        dest="extra_registries",
        action="append",
        metavar="MODULE:ATTR",
        help="also run the job types of this jobs_core.Registry; repeatable "
        "(JOBS_EXTRA_REGISTRIES, comma-separated)",
    )
    group.add_argument(
        "--log-level",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        type=str.upper,
        help="DEBUG (a job's start too), INFO (one line per job, when it ends), WARNING or ERROR "
        f"(JOBS_LOG_LEVEL, default {default('log_level')})",
    )
    group.add_argument(
        "--synchronous-commit",
        dest="synchronous_commit",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="wait for the WAL flush of every claim and outcome (default): a PostgreSQL crash "
        "never makes a running job claimable again; --no-synchronous-commit drains ~1.3x "
        "faster but such a crash may then run a job twice (JOBS_SYNCHRONOUS_COMMIT, default on)",
    )
    group.add_argument(
        "--handlers-dir",
        dest="handlers_dir",
        metavar="DIR",
        help="also run the subprocess handlers declared by DIR/<id>/manifest.yaml "
        "(JOBS_HANDLERS_DIR, default none)",
    )
    group.add_argument(
        "--metrics-port",
        dest="metrics_port",
        type=non_negative_int,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (0: any free port, logged); "
        "HOST is JOBS_METRICS_HOST, default 127.0.0.1 (JOBS_METRICS_PORT, default off; "
        "docs/operations.md)",
    )
    group.add_argument(
        "--log-format",
        choices=["text", "json"],
        help="text (key=value) or json lines (JOBS_LOG_FORMAT, default text)",
    )


_OPTION_FIELDS = (
    "concurrency",
    "heartbeat_s",
    "sweep_interval_s",
    "sweep_threshold_s",
    "poll_interval_s",
    "cancel_check_s",
    "shutdown_grace_s",
    "lease_margin_s",
    "store_timeout_s",
    "timeout_grace_s",
    "prefetch",
    "prefetch_window_s",
    "demo_types",
    "extra_registries",
    "log_level",
    "log_format",
    "synchronous_commit",
    "handlers_dir",
    "metrics_port",
)


def settings_from_args(
    args: argparse.Namespace, base: WorkerSettings | None = None
) -> WorkerSettings:
    """``base`` (else the environment's settings) with the options given in ``args`` applied."""
    try:
        settings = base or WorkerSettings()
        given = {
            name: getattr(args, name)
            for name in _OPTION_FIELDS
            if getattr(args, name, None) is not None
        }
        return WorkerSettings.model_validate({**settings.model_dump(), **given})
    except ValidationError as error:
        raise ConfigurationError(_validation_message(error)) from None


def build_parser(prog: str = "python -m jobs_worker") -> argparse.ArgumentParser:
    """The parser of ``python -m jobs_worker``."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Claim and run jobs until SIGTERM/SIGINT. N identical processes on one or "
        "many machines share the queue with nothing else to configure.",
        epilog=ENVIRONMENT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_worker_arguments(parser)
    return parser


def run_worker(
    concurrency: int | None = None,
    extra_registries: Sequence[Registry | str] = (),
    *,
    settings: WorkerSettings | None = None,
    handle_signals: bool = True,
    configure_logs: bool = True,
    shipped_modules: bool = True,
) -> int:
    """Run a worker until it is stopped; the process exit code.

    ``settings`` default to the environment's; ``concurrency`` overrides theirs;
    ``extra_registries`` (registries or ``module:attribute`` paths) add job types to the
    modules' (:func:`~jobs_worker.registries.load_modules`: the ``jobs.modules`` entry points,
    or ``JOBS_MODULES``; the demo types with ``demo_types``). With ``shipped_modules`` the
    modules' registries are built on an engine of their own on the worker's database
    (:func:`jobs_postgres.modules.opened_context`), so ``python -m jobs_worker`` and
    ``jobs worker`` run the same types; without it, only the modules that own no tables.
    Raises :class:`ConfigurationError` for invalid settings, a module or a registry that
    cannot be loaded, or a type declared twice.
    """
    try:
        settings = settings or WorkerSettings()
        if concurrency is not None:
            settings = WorkerSettings.model_validate(
                {**settings.model_dump(), "concurrency": concurrency}
            )
    except ValidationError as error:
        raise ConfigurationError(_validation_message(error)) from None
    if configure_logs:
        configure_logging(settings.log_level, settings.log_format)
    try:  # before any database: a wrong name is a usage error, whatever the database
        modules = load_modules(settings.demo_types)
        extra: list[Registry | str] = [
            item if isinstance(item, Registry) else load_registry(item)
            for item in [*settings.extra_registries, *extra_registries]
        ]
        # a type declared twice among what needs no database is refused before any database
        worker_registry(settings.demo_types, extra, modules=modules)
    except (ModuleError, RegistryLoadError, DuplicateJobType) as error:
        raise ConfigurationError(str(error)) from None
    if settings.effective_heartbeat_s < settings.heartbeat_s:
        log_event(
            log,
            logging.WARNING,
            "worker.heartbeat_shortened",
            heartbeat_s=settings.effective_heartbeat_s,
            asked=settings.heartbeat_s,
            reason="a heartbeat must come well within the sweep threshold",
        )
    with ExitStack() as stack:
        from jobs_postgres.modules import opened_context

        url: str | None = None
        if shipped_modules:
            from jobs_postgres.database import resolve_database_url

            # Resolved once here (the embedded server starts now when no URL is set), so the
            # modules' engine and the worker's reach the same database.
            url = resolve_database_url(settings.database_url, settings.data_dir)
            settings = settings.model_copy(update={"database_url": url})
        context = stack.enter_context(opened_context(url, settings.data_dir))
        try:
            registry = worker_registry(
                settings.demo_types,
                extra,
                handlers_dir=settings.handlers_dir,
                context=context,
                modules=modules,
            )
        except (RegistryLoadError, ModuleError, ValueError, DuplicateJobType) as error:
            raise ConfigurationError(str(error)) from None
        registry = isolate_types(registry, settings, extra_registries, shipped_modules)
        maintenance = Maintenance()  # the built-in jobs.purge type (issue 17)
        registry = compose([registry, maintenance.registry])
        parts = Composition(settings, registry)
        try:
            worker = parts.worker()
            if settings.metrics_port is not None:
                serve_metrics(worker, settings.metrics_host, settings.metrics_port)
            with running_scheduler(parts.engine, registry, maintenance, parts.clock()):
                if handle_signals and threading.current_thread() is threading.main_thread():
                    startup.over()  # decision 0047
                    return _run_with_signals(worker)
                return worker.run()
        finally:
            parts.close()


def serve_metrics(worker: Worker, host: str, port: int) -> None:
    """Serve the worker's metrics on ``host:port`` (a daemon thread of ``prometheus_client``)."""
    import jobs_metrics

    shared = worker.shared
    jobs_metrics.watch_slots(lambda: shared.executing, shared.config.concurrency)
    bound = jobs_metrics.serve(port, host)
    log_event(log, logging.INFO, "worker.metrics", url=f"http://{host}:{bound}/metrics")


def isolate_types(
    registry: Registry,
    settings: WorkerSettings,
    extra_registries: Sequence[Registry | str],
    shipped_modules: bool,
) -> Registry:
    """``registry`` with the types of ``JOBS_ISOLATED_TYPES`` run in a child process
    (:mod:`jobs_worker.isolation`)."""
    if not settings.isolated_types:
        return registry
    from jobs_worker.isolation import child_registries_from, isolate

    recipe = child_registries_from(
        demo_types=settings.demo_types,
        extra_registries=[*settings.extra_registries, *extra_registries],
        handlers_dir=settings.handlers_dir,
        database_url=settings.database_url,
        data_dir=settings.data_dir,
        shipped_modules=shipped_modules,
        modules=selection_from(os.environ),
    )
    return isolate(
        registry, settings.isolated_types, recipe, kill_grace_s=settings.child_kill_grace_s
    )


def _run_with_signals(worker: Worker) -> int:
    """Run ``worker`` on its own thread while this (main) thread takes the signals.

    The worker's waits never run on the main thread, so a signal handler that sets its flags
    can never interrupt a thread that holds the same locks.
    """
    outcome: dict[str, int] = {}

    def run() -> None:
        try:
            outcome["code"] = worker.run()
        except Exception:
            log.exception("the worker crashed")
            outcome["code"] = EXIT_CRASHED

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        graceful = not worker.stopping
        log_event(
            log,
            logging.WARNING,
            "worker.signal",
            signal=signal.Signals(signum).name,
            action="finish running jobs" if graceful else "cancel and hand back running jobs",
        )
        worker.stop(graceful=graceful)

    handled = (signal.SIGTERM, signal.SIGINT)
    previous = {signum: signal.signal(signum, on_signal) for signum in handled}
    thread = threading.Thread(target=run, name="jobs-claim-loop")
    try:
        thread.start()
        while thread.is_alive():
            thread.join(0.5)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return outcome.get("code", EXIT_CRASHED)


def _validation_message(error: ValidationError) -> str:
    problems = [
        f"JOBS_{'_'.join(str(part) for part in item['loc']).upper()}: {item['msg']}"
        for item in error.errors(include_url=False)
    ]
    return "invalid worker settings: " + "; ".join(problems)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m jobs_worker [options]``: parse, run, map errors to exit codes."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args)
        return run_worker(settings=settings)
    except ConfigurationError as error:
        print(f"jobs worker: {error}", file=sys.stderr)
        return EXIT_USAGE
