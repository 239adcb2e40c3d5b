"""A package's names imported when first used (PEP 562's module ``__getattr__``): ``from jobs_core
import Job`` loads the model, not the use cases; ``import jobs_postgres`` loads no SQLAlchemy."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_names(
    package: str, homes: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: a name of ``homes`` imported from its module at its
    first use, then kept in the package's ``namespace`` (its ``globals()``), so the next use is
    a plain attribute; any other name is an ``AttributeError``."""

    def attribute(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    return attribute
