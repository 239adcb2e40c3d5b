"""``jobs <module> <command>``: the commands a module declares (``Module.cli``,
:mod:`jobs_core.modules`).

The parser adds them only when the command word is not one of the CLI's own (so ``jobs ls``
never loads the modules); each runs with a :class:`~jobs_core.modules.ModuleContext` on the
command's engine (JOBS_DATABASE_URL, or the embedded server).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from jobs_cli import db
from jobs_cli.errors import UsageError
from jobs_cli.settings import CliSettings

HANDLER = "jobs_cli.commands.modules:run"


def add_module_commands(
    sub: Any, add: Callable[..., argparse.ArgumentParser], taken: set[str]
) -> None:
    """Add ``jobs <module> <command>`` for every loaded module that declares commands."""
    from jobs_cli.registries import modules

    for module in modules(CliSettings.from_env()):
        if not module.cli:
            continue
        if module.name in taken:
            raise UsageError(
                f"module {module.name!r} has the name of a jobs command: its commands cannot "
                "be offered"
            )
        group = add(
            sub,
            module.name,
            HANDLER,
            f"commands of the {module.name} module",
            module.description or f"Commands of the {module.name} module.",
        )
        actions = group.add_subparsers(
            dest="module_command", metavar="ACTION", required=True, parser_class=type(group)
        )
        for command in module.cli:
            parser = actions.add_parser(command.name, help=command.help, description=command.help)
            if command.configure is not None:
                command.configure(parser)
            parser.set_defaults(handler=HANDLER, module_name=module.name)


def run(args: argparse.Namespace, settings: CliSettings) -> int:
    """Run the module command named by ``args`` on the database."""
    from jobs_cli.registries import module_context, modules

    module = next(m for m in modules(settings) if m.name == args.module_name)
    command = next(c for c in module.cli if c.name == args.module_command)
    with db.engine(settings) as engine:
        return command.run(args, module_context(settings, engine))
