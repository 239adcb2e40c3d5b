"""The public-type rule, in one place (``jobs_core.registry``; issue 28 point 6): which types an
org may name over HTTP. The API's enqueue, schedules, ``GET /job-types`` and OpenAPI document
ask the registry (their HTTP behaviour: tests/api)."""

from __future__ import annotations

import pytest
from jobs_core import JobContext, JobType, Registry, UnknownJobType


def _noop(ctx: JobContext) -> None:
    return None


def _registry() -> Registry:
    registry = Registry("t")
    for name, public in (("zeta", True), ("alpha", True), ("inner", False)):
        registry.register(JobType(name, _noop, public=public))
    return registry


def test_only_the_declared_public_types_are_public() -> None:
    registry = _registry()
    assert [t.name for t in registry.public_types()] == ["alpha", "zeta"]
    assert registry.is_public("zeta")
    assert not registry.is_public("inner")
    assert not registry.is_public("absent")
    assert not registry.is_public(None)
    assert registry.public_type("alpha").name == "alpha"


@pytest.mark.parametrize("name", ["inner", "absent"])
def test_an_internal_type_is_refused_exactly_as_an_absent_one(name: str) -> None:
    with pytest.raises(UnknownJobType) as refused:
        _registry().public_type(name)
    assert str(refused.value) == str(UnknownJobType(name))
    assert refused.value.args == UnknownJobType(name).args


def test_an_included_registry_can_be_served_internal_only() -> None:
    composed = Registry("api")
    composed.include(_registry(), internal=True)
    assert composed.names() == ["alpha", "inner", "zeta"]
    assert composed.public_types() == []
    assert composed.get("zeta").public is False
    as_declared = Registry("api")
    as_declared.include(_registry())
    assert [t.name for t in as_declared.public_types()] == ["alpha", "zeta"]
