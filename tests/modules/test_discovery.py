"""Discovery of module declarations (decision 0024): entry points, JOBS_MODULES, the stated
order, and the errors that name the modules at fault."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from jobs_core import DuplicateJobType
from jobs_core.modules import (
    ENTRY_POINT_GROUP,
    Module,
    ModuleContext,
    ModuleError,
    compose_modules,
    discover,
    load_module,
    ordered,
    selection_from,
)
from jobs_worker.registries import load_modules, worker_registry

ROOT = Path(__file__).resolve().parents[2]
D = "tests.modules.declared:"
NO_DATABASE = ModuleContext(engine=None, database_url=None, data_dir=Path("."))


def test_the_shipped_modules_declare_themselves_by_entry_point() -> None:
    from importlib import metadata

    points = {point.name: point.value for point in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert points["imports"] == "jobs_imports.module:module"
    assert points["demo"] == "jobs_worker.demo:module"
    assert [module.name for module in discover()] == ["imports"]  # demo: development only
    assert [module.name for module in discover(development=True)] == ["demo", "imports"]
    imports = discover(["imports"])[0]
    assert imports.migrations == "jobs_imports.migrations"
    assert imports.migration_version_table == "alembic_version_imports"


def test_jobs_modules_restricts_and_names_modules_by_path() -> None:
    assert selection_from({}) is None
    assert selection_from({"JOBS_MODULES": " "}) is None
    assert selection_from({"JOBS_MODULES": "-"}) == ()
    assert selection_from({"JOBS_MODULES": "imports, a.b:c"}) == ("imports", "a.b:c")
    assert discover(()) == []
    assert [m.name for m in load_modules(False, {"JOBS_MODULES": "-"})] == []
    chosen = load_modules(False, {"JOBS_MODULES": f"{D}alpha,imports"})
    assert [module.name for module in chosen] == ["alpha", "imports"]
    assert load_module(f"{D}factory").name == "made"
    with pytest.raises(ModuleError, match=r"no installed module is named 'nope'.*imports"):
        discover(["nope"])


def test_the_order_is_requirements_first_then_by_name() -> None:
    from tests.modules import declared

    order = ordered([declared.gamma, declared.beta, declared.zeta, declared.alpha])
    assert [module.name for module in order] == ["alpha", "beta", "zeta", "gamma"]
    with pytest.raises(ModuleError, match="'gamma' requires 'zeta', not loaded"):
        ordered([declared.gamma])
    with pytest.raises(ModuleError, match="cycle"):
        ordered([declared.cycle_a, declared.cycle_b])


def test_a_type_declared_by_two_modules_names_both() -> None:
    from tests.modules import declared

    with pytest.raises(DuplicateJobType, match="'shared_name' is declared by module 'alpha' and"):
        compose_modules([declared.alpha, declared.beta], NO_DATABASE)
    with pytest.raises(DuplicateJobType, match="module 'beta'"):
        worker_registry(False, modules=[declared.alpha, declared.beta])
    registry, owners = compose_modules([declared.alpha, declared.zeta], NO_DATABASE)
    assert owners == {"alpha_one": "alpha", "shared_name": "alpha", "zeta_one": "zeta"}
    assert registry.names() == ["alpha_one", "shared_name", "zeta_one"]


def test_a_module_that_cannot_be_loaded_is_an_error_never_skipped() -> None:
    with pytest.raises(ModuleError, match="cannot be imported: this module's dependency"):
        discover(["tests.modules.broken_module:module"])
    with pytest.raises(ModuleError, match=r"is a Registry, not a jobs_core\.modules\.Module"):
        discover([f"{D}not_a_module"])
    with pytest.raises(ModuleError, match="is nothing"):
        discover([f"{D}missing"])
    with pytest.raises(ModuleError, match="lowercase"):
        Module(name="Bad-Name")


def test_without_a_database_the_modules_that_own_tables_are_left_out() -> None:
    from tests.modules import declared

    registry, _ = compose_modules([declared.tables, declared.alpha], NO_DATABASE)
    assert registry.names() == ["alpha_one", "shared_name"]


def _run(env_extra: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, *argv], env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.slow  # a process each
@pytest.mark.parametrize(
    "command",
    [("-m", "jobs_worker"), ("-m", "jobs_cli", "enqueue", "noop", "--org", "o", "--new-org")],
    ids=["worker", "cli"],
)
def test_the_deployables_refuse_a_broken_module_in_one_line(
    command: tuple[str, ...], tmp_path: Path
) -> None:
    done = _run(
        {
            "JOBS_MODULES": "tests.modules.broken_module:module",
            "JOBS_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
            "JOBS_DATA_DIR": str(tmp_path),
            "PYTHONPATH": str(ROOT),
        },
        *command,
    )
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "tests.modules.broken_module:module" in last
    assert "cannot be imported" in last
    assert "Traceback" not in done.stderr
