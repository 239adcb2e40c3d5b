"""The store port by role (decision 0031): ``JobStore`` is nothing but its roles, each method in
one role, no role a grab-bag, and each role checked by parts of the contract suite that exist."""

from __future__ import annotations

import importlib
import inspect

import jobs_contract
from jobs_core.ports import (
    Attempts,
    Enqueueing,
    History,
    JobStore,
    OperatorReads,
    OrgJobs,
    Overview,
    Recovery,
    TypePauses,
    Waits,
)
from jobs_core.workers import WorkerRegistry

STORE_ROLES = (
    Enqueueing,
    Attempts,
    Recovery,
    OrgJobs,
    History,
    Overview,
    OperatorReads,
    WorkerRegistry,
    TypePauses,
    Waits,
)
LARGEST_ROLE = 7


def own_methods(port: type) -> set[str]:
    """The methods a port declares itself (not those of the ports it is made of)."""
    return {
        name
        for name, value in vars(port).items()
        if inspect.isfunction(value) and not name.startswith("_")
    }


def test_the_store_is_its_roles_each_method_in_one() -> None:
    assert own_methods(JobStore) == set()
    assert set(STORE_ROLES) <= set(JobStore.__mro__)
    declared = [name for role in STORE_ROLES for name in own_methods(role)]
    assert len(declared) == len(set(declared)), "a method in two roles"
    public = {name for name in dir(JobStore) if not name.startswith("_")}
    assert public == set(declared)
    sizes = {role.__name__: len(own_methods(role)) for role in STORE_ROLES}
    assert max(sizes.values()) <= LARGEST_ROLE, sizes


def test_each_role_is_checked_by_parts_of_the_suite_that_exist() -> None:
    for dotted, parts in jobs_contract.ROLES.items():
        module, _, name = dotted.rpartition(".")
        assert inspect.isclass(getattr(importlib.import_module(module), name)), dotted
        assert parts, dotted
        for part in parts:
            assert part in jobs_contract.PARTS, (dotted, part)
            assert any(n.startswith("test_") for n in vars(importlib.import_module(part))), part
    roles = {f"{role.__module__}.{role.__qualname__}" for role in STORE_ROLES}
    assert roles <= set(jobs_contract.ROLES)
    every_part = {part for parts in jobs_contract.ROLES.values() for part in parts}
    assert every_part == set(jobs_contract.PARTS)
