"""How a failure becomes one line on stderr and an exit code.

Exit codes (also listed by ``jobs --help``):

- ``0`` success;
- ``1`` the request was refused: unknown job, unknown type, invalid payload, a status that forbids
  the action, a dedup key held by another job;
- ``2`` the command line is wrong: bad option, bad JSON, bad date, bad job id, bad setting;
- ``3`` the database cannot be reached (or the embedded server cannot start), or its schema is
  missing or older than this version (``jobs migrate``);
- ``130`` interrupted by Ctrl-C during a one-shot command.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

EXIT_OK: Final = 0
EXIT_REFUSED: Final = 1
EXIT_USAGE: Final = 2
EXIT_UNAVAILABLE: Final = 3
EXIT_INTERRUPTED: Final = 130


class CliError(Exception):
    """A failure the CLI reports as one line, with its exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class UsageError(CliError):
    """The command line itself is wrong (exit 2)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


class DatabaseUnavailable(CliError):
    """The database cannot be reached (exit 3)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_UNAVAILABLE)


_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@]*):[^@/]*@", re.I)


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***``, safe to print."""
    return _PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:***@", url)


def first_line(text: str) -> str:
    """The first non-empty line of ``text``, stripped."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return text.strip()


def _is_database_error(exc: BaseException) -> bool:
    # Checked by module name so the CLI never imports SQLAlchemy or psycopg to classify an error.
    module = type(exc).__module__ or ""
    name = type(exc).__name__
    driver = module.startswith(("sqlalchemy", "psycopg"))
    return driver and name in {"OperationalError", "InterfaceError", "ConnectionTimeout"}


def translate(exc: BaseException, database: str) -> CliError | None:
    """The :class:`CliError` for a known failure, or None for a bug (shown with a traceback).

    ``database`` names the database in messages (a redacted URL, or "the embedded server").
    """
    from jobs_core import (
        DedupConflict,
        InvalidTransition,
        JobNotFound,
        JobsError,
        PayloadInvalid,
        StoreUnavailable,
        UnknownJobType,
    )

    if isinstance(exc, CliError):
        return exc
    if _sqlstate(exc) in _NOT_MIGRATED:
        return DatabaseUnavailable(
            f"the database ({database}) has no jobs schema, or an older one than this version:"
            f" run `jobs migrate` ({first_line(str(_driver_error(exc)))})"
        )
    if isinstance(exc, StoreUnavailable) or _is_database_error(exc):
        cause = _root_cause(exc)
        return DatabaseUnavailable(f"cannot reach the database ({database}): {cause}")
    if isinstance(exc, JobNotFound):
        return CliError("no such job (or it belongs to another org)")
    if isinstance(exc, PayloadInvalid):
        return CliError("invalid payload: " + payload_problems(exc.errors))
    if isinstance(exc, UnknownJobType | InvalidTransition | DedupConflict):
        return CliError(str(exc))
    if isinstance(exc, JobsError):
        return CliError(str(exc))
    return None


def payload_problems(errors: Sequence[Mapping[str, Any]]) -> str:
    """``seconds: Input should be a valid number; ...`` from a schema's error list."""
    parts = []
    for error in errors:
        path = [str(part) for part in error.get("loc", ())]
        while path and path[0] in {"body", "payload"}:  # the whole document is the payload
            path.pop(0)
        location = ".".join(path)
        message = str(error.get("msg", error))
        parts.append(f"{location}: {message}" if location else message)
    return "; ".join(parts) or "rejected by the job type's schema"


_NOT_MIGRATED = {"42P01", "42703", "42883"}
"""SQLSTATEs of a schema this version does not find: an undefined table, column or function."""


def _driver_error(exc: BaseException) -> BaseException:
    # SQLAlchemy wraps the driver error in ``orig``.
    inner: BaseException = exc
    while getattr(inner, "orig", None) is not None:
        inner = inner.orig  # type: ignore[attr-defined]
    return inner


def _sqlstate(exc: BaseException) -> str | None:
    state = getattr(_driver_error(exc), "sqlstate", None)
    return state if isinstance(state, str) else None


def _root_cause(exc: BaseException) -> str:
    # The driver's first line says what is wrong ("connection refused", "database \"x\" does
    # not exist").
    inner = _driver_error(exc)
    if inner.__cause__ is not None and str(inner) == "":
        inner = inner.__cause__
    text = first_line(str(inner)) or type(inner).__name__
    # psycopg repeats the whole connection attempt; keep the reason after the last "failed: ".
    if "failed: " in text:
        text = text.rsplit("failed: ", 1)[1]
    return text
