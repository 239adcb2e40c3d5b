"""The chaos suite: N real worker processes over M jobs while workers are killed, PostgreSQL is
restarted, backends are terminated and one worker's link goes silent; then the invariants are
checked against what the handlers recorded. ``uv run python -m bench.chaos --help``; the rules
and how to read the output: ``docs/chaos.md``."""
