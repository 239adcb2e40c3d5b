"""Hypothesis profiles: how many examples the property-based tests draw.

``HYPOTHESIS_PROFILE`` picks one (the root conftest loads it before any test module):

- ``suite`` (the default): what ``uv run pytest`` runs, sized so the whole suite stays under
  five minutes on the 2-core machine; hypothesis's own default of 100 examples, and each test
  that sets its own count keeps it.
- ``nightly``: ten times as many examples everywhere, for a long run now and then
  (``HYPOTHESIS_PROFILE=nightly uv run pytest -m slow`` or the whole suite).

A test that sets its own count writes it as :func:`scaled` ``(n)``: ``n`` in the suite profile,
``10 n`` in the nightly one.
"""

from __future__ import annotations

import os

from hypothesis import settings

PROFILE_ENV = "HYPOTHESIS_PROFILE"
SUITE_EXAMPLES = 100
"""The suite profile's examples per test (hypothesis's default)."""

settings.register_profile("suite", max_examples=SUITE_EXAMPLES)
settings.register_profile("nightly", max_examples=10 * SUITE_EXAMPLES)
settings.load_profile(os.environ.get(PROFILE_ENV, "suite"))


def scaled(examples: int) -> int:
    """A test's own count of examples in the loaded profile (``examples`` in the suite one)."""
    return max(1, examples * settings().max_examples // SUITE_EXAMPLES)
