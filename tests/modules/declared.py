"""Module declarations the discovery tests name by ``package.module:attribute``."""

from __future__ import annotations

from jobs_core import JobType, Registry
from jobs_core.modules import Module, ModuleContext


def _registry(name: str, *types: str) -> Registry:
    registry = Registry(name)
    for type_name in types:
        registry.register(JobType(type_name, lambda ctx: None))
    return registry


def _alpha(ctx: ModuleContext) -> Registry:
    return _registry("alpha", "alpha_one", "shared_name")


def _beta(ctx: ModuleContext) -> Registry:
    return _registry("beta", "beta_one", "shared_name")


def _gamma(ctx: ModuleContext) -> Registry:
    return _registry("gamma", "gamma_one")


alpha = Module(name="alpha", build_registry=_alpha)
beta = Module(name="beta", build_registry=_beta)
gamma = Module(name="gamma", build_registry=_gamma, requires=("zeta",))
zeta = Module(name="zeta", build_registry=lambda ctx: _registry("zeta", "zeta_one"))
cycle_a = Module(name="cycle_a", requires=("cycle_b",))
cycle_b = Module(name="cycle_b", requires=("cycle_a",))
tables = Module(name="tables", migrations="tests.modules.no_such_chain")
not_a_module = Registry("plain")


def factory() -> Module:
    """A zero-argument callable that returns the declaration is accepted too."""
    return Module(name="made", build_registry=lambda ctx: _registry("made", "made_one"))
