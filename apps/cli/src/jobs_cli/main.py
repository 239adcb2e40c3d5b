"""Entry point of the ``jobs`` console script: the argument parser and the error boundary.

The parser is argparse: it is in the standard library, costs nothing to import, and gives every
subcommand a ``--help``. Each subcommand names its handler as ``"module:function"`` and the module
is imported only when that command runs, so ``jobs --help`` or ``jobs ls`` never import FastAPI,
uvicorn or the worker.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from jobs_cli.errors import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    UsageError,
    first_line,
    redact_url,
    translate,
)
from jobs_cli.settings import CliSettings, SettingsError

PROG = "jobs"

ENVIRONMENT_HELP = """\
environment (prefix JOBS_):
  JOBS_DATABASE_URL   PostgreSQL URL; unset: an embedded server whose data lives in JOBS_DATA_DIR
  JOBS_DATA_DIR       the embedded server's data directory (default: .data under the project)
  JOBS_DATABASE_POOLER none (default) or transaction: JOBS_DATABASE_URL is PgBouncer in
                      transaction mode (docs/scaling.md)
  JOBS_DEMO_TYPES     1/0: register the demo types noop, sleep, fail, crash (default: 1 on the
                      embedded server, 0 with JOBS_DATABASE_URL)
  JOBS_DEBUG          1: print the traceback of an error
  JOBS_MODULES        the modules to load (default: every installed one); a module's own
                      commands are `jobs <module> <command>`
  the API and the worker read more (see README.md, "Configuration")

exit codes:
  0 success; 1 refused (unknown job or type, invalid payload, wrong status); 2 bad command line;
  3 database unreachable or not migrated (`jobs migrate`); 130 interrupted
"""


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors reported in the CLI's one-line format."""

    def error(self, message: str) -> Any:  # argparse's signature returns NoReturn
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32, width=100)


def _priority(text: str) -> int:
    from jobs_core.domain import PRIORITY_MAX, PRIORITY_MIN

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise argparse.ArgumentTypeError(
            f"{text!r} is outside {PRIORITY_MIN}..{PRIORITY_MAX} (higher runs first)"
        )
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _port(text: str) -> int:
    value = _positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port")
    return value


def _add(
    sub: Any,
    name: str,
    handler: str,
    summary: str,
    description: str = "",
    **kwargs: Any,
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=(description or summary),
        formatter_class=_formatter,
        **kwargs,
    )
    parser.set_defaults(handler=handler)
    # Accepted after the subcommand too; SUPPRESS keeps the top-level value when absent here.
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the traceback of an error (or set JOBS_DEBUG=1)",
    )
    return parser


def _org(parser: argparse.ArgumentParser, *, required: bool, what: str) -> None:
    parser.add_argument(
        "--org",
        required=required,
        metavar="ORG",
        help=what,
    )


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print JSON (the HTTP API's shape) instead of text"
    )


def build_parser(
    with_worker_options: bool = True, with_module_commands: bool = False
) -> argparse.ArgumentParser:
    """The ``jobs`` argument parser with every subcommand.

    ``with_worker_options=False`` leaves the ``worker`` subcommand's options out, to spare the
    other commands importing the worker; ``with_module_commands`` adds ``jobs <module> ...``
    for the loaded modules that declare commands (:mod:`jobs_cli.commands.modules`).
    """
    parser = _Parser(
        prog=PROG,
        description="jobs: a PostgreSQL-backed background job system.",
        epilog=ENVIRONMENT_HELP,
        formatter_class=_formatter,
    )
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of an error (or JOBS_DEBUG=1)"
    )
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    _add_server_commands(sub, with_worker_options)
    _add_token_commands(sub)
    _add_job_commands(sub)
    from jobs_cli.maintenance_parser import add_maintenance_commands

    add_maintenance_commands(sub, _add, _org)
    from jobs_cli.commands.quotas import add_quota_commands

    add_quota_commands(sub, _add)
    from jobs_cli.commands.types import add_type_commands

    add_type_commands(sub, _add)
    workers = _add(
        sub,
        "workers",
        "jobs_cli.commands.workers:workers",
        "list the live worker processes",
        "List the live worker processes: host, pid, the types each serves, its concurrency, "
        "when it started and when it was last seen. A worker silent for a minute is gone.",
    )
    _json_flag(workers)
    if with_module_commands:
        from jobs_cli.commands.modules import add_module_commands

        add_module_commands(sub, _add, set(sub.choices))
    return parser


def command_words(parser: argparse.ArgumentParser) -> frozenset[str]:
    """The command words ``parser`` knows (:func:`build_parser`'s: the CLI's own, and the
    modules' when built with them)."""
    return frozenset(
        next(
            action.choices
            for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
        )
    )


def _add_server_commands(sub: Any, with_worker_options: bool) -> None:
    _add(
        sub,
        "migrate",
        "jobs_cli.commands.admin:migrate",
        "create or upgrade the database schema (idempotent)",
        "Apply every pending migration to the database (JOBS_DATABASE_URL, or the embedded "
        "server): the jobs chain, then each loaded module's chain (JOBS_MODULES; a module "
        "after those it requires, otherwise by name). Running it again does nothing.",
    )

    api = _add(
        sub,
        "api",
        "jobs_cli.commands.serve:api",
        "serve the HTTP API",
        "Serve the HTTP API with uvicorn until SIGINT/SIGTERM. The API reads its own JOBS_ "
        "settings (see README.md).",
    )
    api.add_argument("--host", help="interface to bind (default: JOBS_API_HOST, else 127.0.0.1)")
    api.add_argument("--port", type=_port, help="TCP port (default: JOBS_API_PORT, else 8000)")

    worker = _add(
        sub,
        "worker",
        "jobs_cli.commands.serve:worker",
        "run a worker process",
        "Claim and run jobs until SIGINT/SIGTERM: the first signal lets running jobs finish, a "
        "second one hands them back to the queue. Options override the JOBS_ settings of the "
        "same name. N identical processes on one or many machines share the queue. On the "
        "embedded database the demo types are on unless --no-demo-types.",
    )
    if with_worker_options:
        # The worker owns its options (and their defaults): one definition for
        # `python -m jobs_worker` and `jobs worker`. Imported only for this command, since it
        # pulls in pydantic.
        from jobs_worker.main import add_worker_arguments

        add_worker_arguments(worker)

    dev = _add(
        sub,
        "dev",
        "jobs_cli.commands.dev:dev",
        "run everything locally: database, migrations, API, worker, a demo token",
        "Start the embedded PostgreSQL (or use JOBS_DATABASE_URL), migrate, create the org 'demo' "
        "and print a token for it, then serve the API and run a worker with the demo types "
        "(noop, sleep, fail, crash). Ctrl-C stops everything.",
    )
    dev.add_argument("--host", help="API interface (default: JOBS_API_HOST, else 127.0.0.1)")
    dev.add_argument("--port", type=_port, help="API port (default: JOBS_API_PORT, else 8000)")
    dev.add_argument(
        "--concurrency",
        type=_positive_int,
        metavar="N",
        help="jobs the worker runs at once (default: JOBS_CONCURRENCY, else 4)",
    )
    dev.add_argument("--org", default="demo", help="the org to print a token for (default: demo)")


def _add_token_commands(sub: Any) -> None:
    token = _add(sub, "token", "jobs_cli.commands.admin:token_help", "create or revoke API tokens")
    token_sub = token.add_subparsers(
        dest="token_command", metavar="ACTION", required=True, parser_class=_Parser
    )
    create = _add(
        token_sub,
        "create",
        "jobs_cli.commands.admin:token_create",
        "create an API token for an org",
        "Create a bearer token for ORG. The token is printed alone on the last line of stdout; "
        "it is shown only once (the database keeps a hash).",
    )
    _org(create, required=True, what="the org the token acts for")
    create.add_argument("--label", default="", help="a note to recognise the token by")
    revoke = _add(
        token_sub,
        "revoke",
        "jobs_cli.commands.admin:token_revoke",
        "revoke an API token",
        "Revoke a token by its id (printed by 'token create') or by its secret value.",
    )
    which = revoke.add_mutually_exclusive_group(required=True)
    which.add_argument("token_id", nargs="?", metavar="TOKEN_ID", help="the token's id")
    which.add_argument("--token", metavar="TOKEN", help="the token itself")


def _add_job_commands(sub: Any) -> None:
    enqueue = _add(
        sub,
        "enqueue",
        "jobs_cli.commands.jobs:enqueue",
        "enqueue a job",
        "Enqueue a job of TYPE for ORG. Prints a summary, then the job id alone on the last "
        "line. With a dedup key held by an active job of the org, that job is returned instead.",
    )
    enqueue.add_argument("type", metavar="TYPE", help="a registered job type (e.g. sleep)")
    _org(enqueue, required=True, what="the org that owns the job")
    enqueue.add_argument(
        "--new-org",
        action="store_true",
        help="confirm that ORG is new: without it, an org with no job and no API token yet is "
        "refused (exit 1), so a mistyped org name never silently starts a new org",
    )
    enqueue.add_argument(
        "--payload", metavar="JSON", default="{}", help="the job's arguments, a JSON object"
    )
    enqueue.add_argument(
        "--dedup-key",
        metavar="K",
        help="deduplication key (unique per org; a type that derives its own refuses another)",
    )
    enqueue.add_argument(
        "--priority",
        type=_priority,
        default=0,
        metavar="N",
        help="-100..100, higher runs first (default: 0)",
    )
    enqueue.add_argument(
        "--run-at",
        metavar="ISO",
        help="run no earlier than this ISO 8601 instant (no offset: local time)",
    )
    enqueue.add_argument(
        "--after",
        action="append",
        metavar="ID",
        help="wait until job ID (of the same org) has ended; repeat for several. One that ends "
        "failed or cancelled cancels this job unless its type runs after failed dependencies "
        "(docs/flows.md)",
    )
    _json_flag(enqueue)

    ls = _add(
        sub,
        "ls",
        "jobs_cli.commands.jobs:ls",
        "list jobs, newest first",
        "List jobs, newest first: id, type, status, priority, progress, attempts, age, run "
        "time, error.",
    )
    _org(ls, required=False, what="only this org's jobs (default: every org)")
    ls.add_argument(
        "--status",
        metavar="S",
        help="waiting, queued, running, done, failed, cancelled, or active (waiting+queued+"
        "running) or finished",
    )
    ls.add_argument("--type", metavar="T", help="only jobs of this type")
    ls.add_argument(
        "--parent",
        metavar="ID",
        help="only the children of job ID (the jobs its handler enqueued; with --org, only if "
        "ID is that org's job)",
    )
    ls.add_argument(
        "--limit", type=_positive_int, default=20, metavar="N", help="at most N jobs (default: 20)"
    )
    _json_flag(ls)

    show = _add(
        sub,
        "show",
        "jobs_cli.commands.jobs:show",
        "show one job in full",
        "Show one job in full; for a queued job, why it has not started yet; for a parent, how "
        "many of its children have ended (list them with jobs ls --parent ID).",
    )
    show.add_argument("job_id", metavar="ID", help="the job's id")
    _org(show, required=False, what="the org that owns the job (default: any org)")
    _json_flag(show)

    cancel = _add(
        sub,
        "cancel",
        "jobs_cli.commands.jobs:cancel",
        "cancel a job",
        "Cancel a queued job at once; ask a running job to stop (its handler sees the request).",
    )
    cancel.add_argument("job_id", metavar="ID", help="the job's id")
    _org(cancel, required=True, what="the org that owns the job")
    _json_flag(cancel)

    retry = _add(
        sub,
        "retry",
        "jobs_cli.commands.jobs:retry",
        "queue a failed or cancelled job again",
        "Queue a failed or cancelled job again with a fresh attempt budget and its dedup key.",
    )
    retry.add_argument("job_id", metavar="ID", help="the job's id")
    _org(retry, required=True, what="the org that owns the job")
    _json_flag(retry)

    bulk = _add(
        sub,
        "bulk",
        "jobs_cli.commands.bulk:bulk",
        "retry, cancel or delete many jobs",
        "Retry, cancel or delete many jobs of an org: the ids given, or the newest jobs "
        "matching --status/--type (at most --limit). Each job as its own command would; those "
        "the action does not apply to are skipped and listed with why. --dry-run says what it "
        "would do and changes nothing.",
    )
    bulk.add_argument("action", choices=["retry", "cancel", "delete"], help="what to do")
    bulk.add_argument(
        "ids", nargs="*", metavar="ID", help="job ids (1 to 1000), right after the action"
    )
    _org(bulk, required=True, what="the org that owns the jobs")
    bulk.add_argument("--status", metavar="S", help="filter: a status, or active / finished")
    bulk.add_argument("--type", metavar="T", help="filter: only jobs of this type")
    bulk.add_argument(
        "--limit",
        type=_positive_int,
        default=100,
        metavar="N",
        help="with a filter: at most N jobs, newest first (default: 100, at most 1000)",
    )
    bulk.add_argument("--dry-run", action="store_true", help="count only; change nothing")
    _json_flag(bulk)


def _describe_database(settings: CliSettings | None) -> str:
    if settings is None or settings.database_url is None:
        where = settings.data_dir if settings is not None else ".data"
        return f"embedded server in {where}"
    return redact_url(settings.database_url)


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the first word that is not an option)."""
    return next((word for word in argv if not word.startswith("-")), None)


def _resolve(handler: str) -> Callable[[argparse.Namespace, CliSettings], int]:
    module_name, _, function = handler.partition(":")
    func: Callable[[argparse.Namespace, CliSettings], int] = getattr(
        importlib.import_module(module_name), function
    )
    return func


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``jobs`` command line; return its exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_list or os.environ.get("JOBS_DEBUG", "").strip().lower() in {
        "1",
        "true",
        "yes",
        "on",
    }
    settings: CliSettings | None = None
    try:
        try:
            command = _command_of(args_list)
            if command == "worker":  # before the worker's imports (decision 0047)
                from jobs_worker import startup

                startup.begins()
            parser = build_parser(with_worker_options=command == "worker")
            if command is not None and command not in command_words(parser):
                # not one of the CLI's own words: looked for among the modules' commands
                parser = build_parser(with_worker_options=False, with_module_commands=True)
            args = parser.parse_args(args_list)
            settings = CliSettings.from_env()
        except SettingsError as exc:
            raise UsageError(str(exc)) from exc
        debug = debug or settings.debug
        return _resolve(args.handler)(args, settings)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except SystemExit as exc:  # argparse's --help exits 0 through here
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)
    except BaseException as exc:
        error = translate(exc, _describe_database(settings))
        if debug:
            traceback.print_exc()
        if error is None:
            hint = "" if debug else " (run with --debug for the traceback)"
            reason = first_line(str(exc)) or type(exc).__name__
            print(f"{PROG}: unexpected error: {reason}{hint}", file=sys.stderr)
            return 1
        message = error.message
        print(message if message.startswith(PROG) else f"{PROG}: {message}", file=sys.stderr)
        return error.exit_code
