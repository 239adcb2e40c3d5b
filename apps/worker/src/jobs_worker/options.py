"""The worker's options as text: the environment's help and the parsers of option values
(:func:`jobs_worker.main.add_worker_arguments` puts the options on a parser)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from jobs_worker.settings import WorkerSettings

ENVIRONMENT_HELP = """\
environment (prefix JOBS_; an option given on the command line wins):
  JOBS_DATABASE_URL       PostgreSQL URL; unset: the embedded server whose data is in JOBS_DATA_DIR
  JOBS_DATA_DIR           the embedded server's data directory (default: .data)
  JOBS_DATABASE_POOLER    none (default) or transaction: JOBS_DATABASE_URL is PgBouncer in
                          transaction mode (docs/scaling.md)
  JOBS_DIRECT_DATABASE_URL the server itself, for the LISTEN of wake-ups behind a pooler; unset
                          there, the worker polls every JOBS_POLL_INTERVAL_S
  JOBS_CONCURRENCY        --concurrency        JOBS_HEARTBEAT_S       --heartbeat
  JOBS_SWEEP_INTERVAL_S   --sweep-interval     JOBS_SWEEP_THRESHOLD_S --sweep-threshold
  JOBS_POLL_INTERVAL_S    --poll-interval      JOBS_CANCEL_CHECK_S    --cancel-check
  JOBS_SHUTDOWN_GRACE_S   --shutdown-grace     JOBS_DEMO_TYPES        --demo-types
  JOBS_MODULES            the modules to load (entry points of group jobs.modules; default all)
  JOBS_EXTRA_REGISTRIES   --extra-registry (comma-separated module:attribute paths)
  JOBS_LOG_LEVEL          --log-level          JOBS_LOG_FORMAT        --log-format
  JOBS_SYNCHRONOUS_COMMIT --synchronous-commit
  JOBS_HANDLERS_DIR       --handlers-dir (a directory of <id>/manifest.yaml subprocess handlers)
  JOBS_ISOLATED_TYPES     types run in a child process (comma-separated; default import_csv; - none)
  JOBS_CHILD_KILL_GRACE_S seconds between SIGTERM and SIGKILL of an isolated child (default 5)
  JOBS_SCHEDULER          run the scheduler thread in this process (default 1; 0: off)
  JOBS_METRICS_PORT       --metrics-port (default off)  JOBS_METRICS_HOST (default 127.0.0.1)
  JOBS_FAIR_CLAIM         claim in fair order between orgs (default 1; docs/flow-control.md)
  JOBS_TRACING            1: an OpenTelemetry span per attempt (default 0; docs/operations.md)
  JOBS_TRACING_ORG        1: the org id as a span attribute (default 0)
  JOBS_SCHEDULER_INTERVAL_S seconds between two looks for due schedules (default 1)
  JOBS_LEASE_MARGIN_S     --lease-margin       JOBS_STORE_TIMEOUT_S   --store-timeout
  JOBS_TIMEOUT_GRACE_S    --timeout-grace      JOBS_PREFETCH(_WINDOW_S) --prefetch(-window)
  JOBS_IMPORTS_BATCH_SIZE rows per transaction of import_csv (default 5000)

signals:
  SIGTERM/SIGINT once: stop claiming, let running jobs finish, exit 0. Twice (or when the grace
  period ends): cancel what still runs and hand those jobs back to the queue, then exit 0.

exit codes (a supervisor restarts the worker on any but 0 and 2; see docs/worker.md):
  0 stopped  1 crashed  2 bad settings  4 a handler overran its timeout + JOBS_TIMEOUT_GRACE_S
  5 fenced: its lease could not be proven and a handler would not stop
"""


def default(field: str) -> Any:
    """The default of a :class:`WorkerSettings` field (for the options' help)."""
    return WorkerSettings.model_fields[field].get_default(call_default_factory=True)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be zero or a positive number of seconds: {text!r}")
    return value


def int_from(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}: {text!r}")
        return value

    return parse


positive_int = int_from(1)
non_negative_int = int_from(0)
