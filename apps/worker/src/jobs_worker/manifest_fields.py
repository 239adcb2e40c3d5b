"""The fields of a manifest (docs/subprocess-protocol.md §Manifest), read and checked one by one:
its parameters (and the payload schema they make), its command, its flow control, retry policy and
environment. An error names the file and the field at fault (:class:`ManifestError`)."""

from __future__ import annotations

import math
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs_core import (
    DedupScope,
    JobTimeout,
    PayloadInvalid,
    RetryPolicy,
    flow,
    rates,
)
from jobs_core.protocol import ChildRetryable
from jobs_core.retry import Backoff, constant, exponential

_PARAM_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "list": (list,),
    "object": (dict,),
}
_JSON_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "object": "object",
}


_PARAM_FIELDS = frozenset({"name", "type", "default", "description", "required"})
_RETRY_FIELDS = frozenset({"backoff", "base_s", "factor", "cap_s", "on_timeout"})


class ManifestError(ValueError):
    """A manifest that cannot be loaded: the file, the field and what to do."""

    def __init__(self, path: Path, where: str, message: str) -> None:
        super().__init__(f"{path}: {where}: {message}" if where else f"{path}: {message}")
        self.path = path
        self.where = where


@dataclass(frozen=True, slots=True)
class Param:
    """One declared parameter of a manifest type."""

    name: str
    type: str
    default: Any = None
    has_default: bool = False
    description: str = ""

    def accepts(self, value: Any) -> bool:
        if self.type in ("int", "float") and isinstance(value, bool):
            return False
        if self.type == "float" and isinstance(value, float) and not math.isfinite(value):
            return False
        return isinstance(value, _PARAM_TYPES[self.type])


@dataclass(frozen=True, slots=True)
class ParamsSchema:
    """The payload schema of a manifest type: its parameters, defaults filled, nothing else."""

    params: tuple[Param, ...]

    def validate(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The payload with the defaults filled, or :class:`PayloadInvalid` naming each
        parameter at fault."""
        errors: list[dict[str, Any]] = []
        clean: dict[str, Any] = {}
        known = {param.name for param in self.params}
        for param in self.params:
            if param.name not in payload:
                if param.has_default:
                    clean[param.name] = param.default
                else:
                    errors.append(_error(param.name, f"{param.name} is required", "missing"))
                continue
            value = payload[param.name]
            if not param.accepts(value):
                errors.append(
                    _error(param.name, f"{param.name} must be of type {param.type}", "type")
                )
                continue
            clean[param.name] = value
        errors += [
            _error(str(name), f"{name} is not a parameter of this type", "extra_forbidden")
            for name in payload
            if name not in known
        ]
        if errors:
            raise PayloadInvalid(errors)
        return clean

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of the parameters."""
        properties: dict[str, Any] = {}
        for param in self.params:
            prop: dict[str, Any] = {"type": _JSON_TYPES[param.type]}
            if param.has_default:
                prop["default"] = param.default
            if param.description:
                prop["description"] = param.description
            properties[param.name] = prop
        return {
            "type": "object",
            "properties": properties,
            "required": [p.name for p in self.params if not p.has_default],
            "additionalProperties": False,
        }


def _error(name: str, message: str, kind: str) -> dict[str, Any]:
    return {"loc": [name], "msg": message, "type": kind}


@dataclass(frozen=True, slots=True)
class FlowFields:
    """A manifest's flow control (docs/flow-control.md): the type-owned dedup key template, the
    per-key concurrency limit and the type-wide cap, as :class:`~jobs_core.JobType` takes them."""

    dedup_key: str | None = None
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    concurrency_scope: flow.KeyScope = flow.KeyScope.ORG
    max_running: int | None = None
    max_snoozes: int = 20
    rate_limit: tuple[int, float] | None = None


class Reader:
    def __init__(self, path: Path, data: Mapping[str, Any]) -> None:
        self.path = path
        self.data = data

    def _fail(self, name: str, message: str) -> ManifestError:
        return ManifestError(self.path, name, message)

    def text(self, name: str, *, required: bool = False, default: str = "") -> str:
        if name not in self.data or self.data[name] is None:
            if required:
                raise self._fail(name, "required (a text value)")
            return default
        value = self.data[name]
        if not isinstance(value, str) or (required and not value.strip()):
            raise self._fail(name, f"must be a non-empty text value, got {value!r}")
        return value.strip()

    def strings(self, name: str) -> list[str]:
        value = self.data.get(name)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self._fail(name, f"must be a list of text values, got {value!r}")
        return list(value)

    def number(self, name: str, *, default: float | None, positive: bool) -> float | None:
        value = self.data.get(name, default)
        if value is None:
            return None
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value < 0 or (positive and value == 0):
            bound = "> 0" if positive else ">= 0"
            raise self._fail(name, f"must be a number {bound} (seconds), got {value!r}")
        return float(value)

    def integer(self, name: str, *, default: int, minimum: int) -> int:
        value = self.data.get(name, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self._fail(name, f"must be an integer >= {minimum}, got {value!r}")
        return value

    def optional_integer(self, name: str, *, minimum: int) -> int | None:
        if self.data.get(name) is None:
            return None
        return self.integer(name, default=minimum, minimum=minimum)

    def boolean(self, name: str, *, default: bool) -> bool:
        value = self.data.get(name, default)
        if not isinstance(value, bool):
            raise self._fail(name, f"must be true or false, got {value!r}")
        return value


def read_params(path: Path, value: Any) -> tuple[Param, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ManifestError(path, "params", "must be a list of {name, type, default} entries")
    params: list[Param] = []
    seen: set[str] = set()
    for index, item in enumerate(value):
        where = f"params[{index}]"
        if not isinstance(item, dict):
            raise ManifestError(path, where, "must be a mapping {name, type, default}")
        unknown = sorted(str(key) for key in item if key not in _PARAM_FIELDS)
        if unknown:
            raise ManifestError(
                path, f"{where}.{unknown[0]}", f"unknown; use {', '.join(sorted(_PARAM_FIELDS))}"
            )
        name = item.get("name")
        if not isinstance(name, str) or not name.isidentifier():
            raise ManifestError(path, f"{where}.name", f"must be an identifier, got {name!r}")
        if name in seen:
            raise ManifestError(path, f"{where}.name", f"{name!r} is declared twice")
        seen.add(name)
        kind = item.get("type", "str")
        if kind not in _PARAM_TYPES:
            raise ManifestError(
                path, f"{where}.type", f"{kind!r} is not one of {', '.join(_PARAM_TYPES)}"
            )
        required = item.get("required")
        has_default = "default" in item and required is not True
        if required is not None and not isinstance(required, bool):
            raise ManifestError(path, f"{where}.required", "must be true or false")
        param = Param(
            name=name,
            type=kind,
            default=item.get("default"),
            has_default=has_default,
            description=str(item.get("description") or ""),
        )
        if has_default and param.default is not None and not param.accepts(param.default):
            raise ManifestError(
                path, f"{where}.default", f"{param.default!r} is not of type {kind}"
            )
        params.append(param)
    return tuple(params)


def read_command(path: Path, value: Any) -> tuple[str, ...]:
    directory = path.parent
    if value is None:
        if not (directory / "run.py").is_file():
            raise ManifestError(
                path, "command", "missing, and there is no run.py next to the manifest"
            )
        return (sys.executable, str(directory / "run.py"))
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as error:
            raise ManifestError(path, "command", f"cannot be split into words: {error}") from None
    elif isinstance(value, list) and all(isinstance(part, str) for part in value):
        argv = list(value)
    else:
        raise ManifestError(path, "command", "must be a string or a list of strings")
    if not argv or not argv[0]:
        raise ManifestError(path, "command", "must not be empty")
    program = directory / argv[0]
    if "/" in argv[0] and not Path(argv[0]).is_absolute():
        # a path relative to the handler's directory: ./run.sh, bin/tool
        argv[0] = str(program.resolve())
    elif "/" not in argv[0] and program.is_file():
        argv[0] = str(program.resolve())  # run.py, next to the manifest
    if argv[0].endswith(".py"):
        if not Path(argv[0]).is_file():
            raise ManifestError(path, "command", f"{argv[0]!r} is not a file")
        return (sys.executable, *argv)
    program = Path(argv[0])
    if program.is_absolute():
        if not program.is_file():
            raise ManifestError(path, "command", f"{argv[0]!r} does not exist")
        if not is_executable(program):
            raise ManifestError(
                path, "command", f"{argv[0]!r} is not executable (chmod +x it, or name its shell)"
            )
    return tuple(argv)


def is_executable(program: Path) -> bool:
    return os.access(program, os.X_OK)


_KEY_TYPES = ("str", "int")  # what a key can be made of (jobs_core.flow.key_value)


def read_flow(path: Path, reader: Reader, params: Sequence[Param]) -> FlowFields:
    """The flow-control fields; every payload field they name must be a declared parameter of
    type str or int, since a job's keys are read from its (validated) payload."""
    declared = {param.name: param for param in params}

    def key_field(where: str, name: str) -> None:
        param = declared.get(name)
        if param is None:
            known = ", ".join(declared) or "none"
            raise ManifestError(
                path, where, f"{name!r} is not a declared parameter (params: {known}); declare it"
            )
        if param.type not in _KEY_TYPES:
            raise ManifestError(
                path, where, f"parameter {name!r} is a {param.type}; a key needs a str or int"
            )

    template = reader.text("dedup_key", default="") or None
    if template is not None:
        try:
            names = flow.template_fields(template)
        except ValueError as error:
            raise ManifestError(path, "dedup_key", str(error)) from None
        for name in names:
            key_field("dedup_key", name)
    key = reader.text("concurrency_key", default="") or None
    limit = reader.optional_integer("concurrency_limit", minimum=1)
    rate = read_rate_limit(path, reader.data.get("rate_limit"))
    if key is not None and limit is None and rate is None:
        raise ManifestError(
            path, "concurrency_limit", "required with concurrency_key (running jobs per value)"
        )
    if limit is not None and key is None:
        raise ManifestError(
            path, "concurrency_key", "required with concurrency_limit (the parameter it counts)"
        )
    if key is not None:
        key_field("concurrency_key", key)
    scope = read_key_scope(path, reader.text("concurrency_scope", default="org"))
    if scope is not flow.KeyScope.ORG and key is None:
        raise ManifestError(
            path, "concurrency_scope", "only with concurrency_key (whose values it scopes)"
        )
    return FlowFields(
        dedup_key=template,
        concurrency_key=key,
        concurrency_limit=limit,
        concurrency_scope=scope,
        max_running=reader.optional_integer("max_running", minimum=1),
        max_snoozes=reader.integer("max_snoozes", default=20, minimum=0),
        rate_limit=rate,
    )


def read_rate_limit(path: Path, value: Any) -> tuple[int, float] | None:
    """``rate_limit: [N, per_seconds]`` (decision 0042), checked by the core's rule."""
    if value is None:
        return None
    try:
        rate = rates.RateLimit.declared(tuple(value) if isinstance(value, list) else value, "")
    except ValueError as error:
        raise ManifestError(path, "rate_limit", str(error).removeprefix(": ")) from None
    return rate.count, rate.per_s


def read_dedup_scope(path: Path, value: Any) -> DedupScope:
    try:
        return DedupScope(value)
    except ValueError:
        choices = ", ".join(scope.value for scope in DedupScope)
        raise ManifestError(path, "dedup_scope", f"{value!r} is not one of {choices}") from None


def read_key_scope(path: Path, value: str) -> flow.KeyScope:
    try:
        return flow.KeyScope(value)
    except ValueError:
        choices = ", ".join(scope.value for scope in flow.KeyScope)
        raise ManifestError(
            path, "concurrency_scope", f"{value!r} is not one of {choices}"
        ) from None


def read_retry(path: Path, value: Any) -> RetryPolicy:
    """Exit code 75 re-queues with this backoff while attempts remain (and a timeout too
    with ``on_timeout: true``)."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ManifestError(path, "retry", "must be a mapping {backoff, base_s, factor, cap_s}")
    unknown = sorted(str(key) for key in value if key not in _RETRY_FIELDS)
    if unknown:
        raise ManifestError(
            path, f"retry.{unknown[0]}", f"unknown; use {', '.join(sorted(_RETRY_FIELDS))}"
        )
    reader = Reader(path, {f"retry.{k}": v for k, v in value.items()})
    kind = value.get("backoff", "exponential")
    base = reader.number("retry.base_s", default=2.0, positive=False) or 0.0
    cap = reader.number("retry.cap_s", default=3600.0, positive=False) or 0.0
    factor = reader.number("retry.factor", default=2.0, positive=True) or 2.0
    if factor < 1:
        raise ManifestError(path, "retry.factor", "must be >= 1")
    backoff: Backoff
    if kind == "exponential":
        backoff = exponential(base, factor, cap)
    elif kind == "constant":
        backoff = constant(base)
    else:
        raise ManifestError(path, "retry.backoff", f"{kind!r} is not exponential or constant")
    on_timeout = reader.boolean("retry.on_timeout", default=False)
    retry_on: tuple[type[BaseException], ...] = (ChildRetryable,)
    if on_timeout:
        retry_on += (JobTimeout,)
    return RetryPolicy(retry_on=retry_on, backoff=backoff)


def read_env(path: Path, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ManifestError(path, "env", "must be a mapping NAME: value")
    env: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or "=" in key:
            raise ManifestError(path, "env", f"{key!r} is not a variable name")
        if not isinstance(item, str | int | float | bool):
            raise ManifestError(path, f"env.{key}", "must be a text or number value")
        env[key] = str(item).lower() if isinstance(item, bool) else str(item)
    return env
