"""jobs-contract: the contract suite of the store port, for any adapter (docs/adapters.md).

What every :class:`jobs_core.JobStore` must do (docs/contract.md), as pytest tests that know
nothing of the adapter they run on, in parts by the store's roles (:data:`ROLES`). An adapter's
test suite provides a few fixtures and imports the parts it runs, one test module per part::

    # conftest.py of the adapter's tests
    @pytest.fixture
    def jobs_store_factory() -> Callable[[], JobStore]: ...  # a store with no jobs, per call

    @pytest.fixture
    def jobs_event_feed(store: JobStore) -> EventFeed: ...  # only for jobs_contract.events

    @pytest.fixture
    def jobs_quota_store(store: JobStore) -> QuotaStore: ...  # only for jobs_contract.quotas

    # test_contract_attempts.py (and one such file per part in PARTS)
    from jobs_contract.attempts import *  # noqa: F403

The fixtures the adapter provides:

- ``jobs_store_factory`` (every part): a callable returning a store with no jobs; each call may
  build a new store or empty the same one (the state machine calls it once per example).
- ``jobs_event_feed`` (``jobs_contract.events``): the :class:`jobs_core.events.EventFeed` that
  sees the changes of the test's ``store`` fixture (request ``store`` to get it).
- ``jobs_quota_store`` (``jobs_contract.quotas``): the :class:`jobs_core.quotas.QuotaStore` that
  sees the jobs of the test's ``store`` (request ``store`` to get it).
- ``jobs_state_machine_examples`` (optional, ``jobs_contract.stateful``): how many random
  programs the state machine runs (default :data:`STATE_MACHINE_EXAMPLES`).

The suite brings its own ``store`` (one call of the factory) and ``clock`` (a
:class:`jobs_core.FakeClock`: time moves only when a test says so).
"""

import pytest

PARTS = (
    "jobs_contract.enqueue",
    "jobs_contract.attempts",
    "jobs_contract.sweep",
    "jobs_contract.org_jobs",
    "jobs_contract.operator_reads",
    "jobs_contract.workers",
    "jobs_contract.json_documents",
    "jobs_contract.flow_control",
    "jobs_contract.fair_claim",
    "jobs_contract.stateful",
    "jobs_contract.events",
    "jobs_contract.transitions",
    "jobs_contract.end_hooks",
    "jobs_contract.checkpoint",
    "jobs_contract.listing",
    "jobs_contract.quotas",
    "jobs_contract.history",
    "jobs_contract.children",
    "jobs_contract.pauses",
    "jobs_contract.overview",
    "jobs_contract.waits",
)
"""Every part of the suite: a module of tests to import into one test module of the adapter."""

ROLES = {
    "jobs_core.ports.Enqueueing": ("jobs_contract.enqueue", "jobs_contract.json_documents"),
    "jobs_core.ports.Attempts": (
        "jobs_contract.attempts",
        "jobs_contract.fair_claim",
        "jobs_contract.flow_control",
        "jobs_contract.transitions",
        "jobs_contract.checkpoint",
        "jobs_contract.children",
    ),
    "jobs_core.ports.Recovery": ("jobs_contract.sweep", "jobs_contract.end_hooks"),
    "jobs_core.ports.OrgJobs": (
        "jobs_contract.org_jobs",
        "jobs_contract.flow_control",
        "jobs_contract.listing",
    ),
    "jobs_core.ports.History": ("jobs_contract.history",),
    "jobs_core.ports.Overview": ("jobs_contract.overview", "jobs_contract.listing"),
    "jobs_core.ports.Waits": ("jobs_contract.waits",),
    "jobs_core.ports.OperatorReads": ("jobs_contract.operator_reads",),
    "jobs_core.workers.WorkerRegistry": ("jobs_contract.workers",),
    "jobs_core.ports.TypePauses": ("jobs_contract.pauses",),
    "jobs_core.events.EventFeed": ("jobs_contract.events",),
    "jobs_core.quotas.QuotaStore": ("jobs_contract.quotas",),
    "jobs_core.ports.JobStore": ("jobs_contract.stateful",),
}
"""Each role of the store (decision 0031), and the parts that check it. ``stateful`` runs random
programs over the whole store; an adapter that plays every role runs every part."""

# The parts are imported into the adapter's test modules: pytest rewrites their asserts (so a
# failure shows the values compared) only if it knows them before they are first imported.
pytest.register_assert_rewrite(*PARTS, "jobs_contract.fixtures", "jobs_contract.helpers")

STATE_MACHINE_EXAMPLES = 25
"""The state machine's examples when the adapter does not say (``jobs_state_machine_examples``)."""
