"""Entry point of the ``jobs`` console script."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the ``jobs`` command line."""
    args = sys.argv[1:] if argv is None else argv
    print(f"jobs: no subcommands yet ({' '.join(args)})", file=sys.stderr)
    return 2
