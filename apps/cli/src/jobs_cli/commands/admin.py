"""``jobs migrate`` and ``jobs token create|revoke``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from jobs_cli import db
from jobs_cli.errors import CliError, UsageError, redact_url
from jobs_cli.settings import CliSettings

if TYPE_CHECKING:
    from sqlalchemy import Engine


def migrate_url(url: str, settings: CliSettings | None = None) -> list[str]:
    """Apply every pending migration to the database at ``url`` (idempotent): the jobs chain
    first, then each loaded module's chain in the modules' order (decision 0024: after the
    modules it requires, else by name), each with its own version table. The names of the
    chains, in order."""
    from jobs_postgres.migrations import upgrade
    from jobs_postgres.modules import migrate_modules

    from jobs_cli.registries import modules

    # before touching the database: a broken module stops here
    loaded = modules(settings if settings is not None else CliSettings.from_env())
    upgrade(url)
    return ["jobs", *migrate_modules(url, loaded)]


def migrate(args: argparse.Namespace, settings: CliSettings) -> int:
    """Create or upgrade the schema."""
    url = db.database_url(settings)
    chains = migrate_url(url, settings)
    where = (
        f"the embedded server ({settings.data_dir})"
        if settings.database_url is None
        else redact_url(url)
    )
    print(f"database schema is up to date on {where} (chains: {', '.join(chains)})")
    return 0


def issue(engine: Engine, org: str, label: str) -> tuple[str, str]:
    """Create a token for ``org``: ``(token, token_id)``."""
    from jobs_core import SystemClock
    from jobs_postgres.tokens import PostgresTokenStore
    from jobs_tokens import issue_token

    try:
        token, record = issue_token(PostgresTokenStore(engine), org, label, SystemClock().now())
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return token, str(record.id)


def token_help(args: argparse.Namespace, settings: CliSettings) -> int:
    """Unreachable: argparse requires an action after ``token``."""
    raise UsageError("token: choose create or revoke (see jobs token --help)")


def token_create(args: argparse.Namespace, settings: CliSettings) -> int:
    """Create a token; the token alone is the last line of stdout."""
    org = args.org.strip()
    if not org:
        raise UsageError("--org must not be empty")
    with db.engine(settings) as engine:
        token, token_id = issue(engine, org, args.label)
    label = f" ({args.label})" if args.label else ""
    print(f"token {token_id} for org {org}{label}; it is shown only this once:")
    print(token)
    return 0


def token_revoke(args: argparse.Namespace, settings: CliSettings) -> int:
    """Revoke a token by id or by value."""
    from jobs_postgres.tokens import PostgresTokenStore
    from jobs_tokens import revoke_token

    value: str = args.token if args.token is not None else args.token_id
    with db.engine(settings) as engine:
        try:
            revoked = revoke_token(PostgresTokenStore(engine), value)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if not revoked:
        raise CliError("no live token matches (unknown, or already revoked)")
    print("token revoked")
    return 0
