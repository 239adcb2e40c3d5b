"""Job types declared by manifests: ``<handlers dir>/<id>/manifest.yaml``, one per handler.

Each manifest names a child command that speaks the subprocess protocol
(docs/subprocess-protocol.md); :func:`load_handlers` turns every valid one into a
:class:`~jobs_core.JobType` whose handler is a :class:`~jobs_worker.child.SubprocessHandler`. An
invalid manifest is reported (its file and the field at fault) and skipped: the other types
load. The fields are documented in docs/subprocess-protocol.md §Manifest.

PyYAML's ``safe_load`` reads the files (plain data only: no tags, no code).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from jobs_core import (
    DedupScope,
    JobType,
    Registry,
    RetryPolicy,
)

from jobs_worker.child import ChildSpec, SubprocessHandler, clean_environment
from jobs_worker.logs import log_event
from jobs_worker.manifest_fields import (
    FlowFields,
    ManifestError,
    Param,
    ParamsSchema,
    Reader,
    read_command,
    read_dedup_scope,
    read_env,
    read_flow,
    read_params,
    read_retry,
)

log = logging.getLogger("jobs.manifests")

MANIFEST = "manifest.yaml"

_TOP_FIELDS = frozenset(
    {
        "id",
        "name",
        "description",
        "applies_to",
        "params",
        "command",
        "timeout_s",
        "kill_grace_s",
        "max_attempts",
        "public",
        "dedup_scope",
        "dedup_key",
        "concurrency_key",
        "concurrency_limit",
        "concurrency_scope",
        "max_running",
        "max_snoozes",
        "rate_limit",
        "retry",
        "env",
        "pass_env",
    }
)


@dataclass(frozen=True, slots=True)
class Manifest:
    """A manifest, validated."""

    path: Path
    id: str
    name: str
    description: str
    applies_to: tuple[str, ...]
    params: tuple[Param, ...]
    argv: tuple[str, ...]
    timeout_s: float | None
    kill_grace_s: float
    max_attempts: int
    public: bool
    dedup_scope: DedupScope
    retry: RetryPolicy
    env: Mapping[str, str] = field(default_factory=dict)
    pass_env: tuple[str, ...] = ()
    flow: FlowFields = field(default_factory=FlowFields)

    def job_type(self, environ: Mapping[str, str] | None = None) -> JobType:
        """The job type this manifest declares."""
        spec = ChildSpec(
            argv=self.argv,
            cwd=str(self.path.parent),
            env=clean_environment(self.pass_env, self.env, source=environ),
            timeout_s=self.timeout_s,
            kill_grace_s=self.kill_grace_s,
        )
        return JobType(
            name=self.id,
            handler=SubprocessHandler(spec),
            max_attempts=self.max_attempts,
            dedup_scope=self.dedup_scope,
            payload_schema=ParamsSchema(self.params),
            retry=self.retry,
            timeout_s=self.timeout_s,
            public=self.public,
            description=self.description or self.name,
            applies_to=self.applies_to,
            dedup_key=self.flow.dedup_key,
            concurrency_key=self.flow.concurrency_key,
            concurrency_limit=self.flow.concurrency_limit,
            concurrency_scope=self.flow.concurrency_scope,
            max_running=self.flow.max_running,
            max_snoozes=self.flow.max_snoozes,
            rate_limit=self.flow.rate_limit,
        )


def parse_manifest(path: Path) -> Manifest:
    """Read and validate one manifest; :class:`ManifestError` names the file and the field."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ManifestError(path, "", f"cannot read it: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ManifestError(path, "", "not UTF-8 text") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ManifestError(path, where, f"not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise ManifestError(path, "", "must be a mapping of fields (id, name, params, …)")
    unknown = sorted(str(key) for key in data if key not in _TOP_FIELDS)
    if unknown:
        raise ManifestError(
            path, unknown[0], f"unknown field; the fields are {', '.join(sorted(_TOP_FIELDS))}"
        )
    reader = Reader(path, data)
    type_id = reader.text("id", required=True)
    if type_id != path.parent.name:
        raise ManifestError(
            path, "id", f"{type_id!r} must equal its directory's name {path.parent.name!r}"
        )
    timeout_s = reader.number("timeout_s", default=None, positive=True)
    params = read_params(path, data.get("params"))
    manifest = Manifest(
        path=path,
        id=type_id,
        name=reader.text("name", default=type_id),
        description=reader.text("description", default=""),
        applies_to=tuple(reader.strings("applies_to")),
        params=params,
        argv=read_command(path, data.get("command")),
        timeout_s=timeout_s,
        kill_grace_s=float(reader.number("kill_grace_s", default=5.0, positive=False) or 0.0),
        max_attempts=reader.integer("max_attempts", default=3, minimum=1),
        public=reader.boolean("public", default=False),
        dedup_scope=read_dedup_scope(path, data.get("dedup_scope", "queue")),
        retry=read_retry(path, data.get("retry")),
        env=read_env(path, data.get("env")),
        pass_env=tuple(reader.strings("pass_env")),
        flow=read_flow(path, reader, params),
    )
    try:
        manifest.job_type()  # the job type's own checks (name pattern, limits)
    except ValueError as error:
        raise ManifestError(path, "id", str(error)) from None
    return manifest


@dataclass(slots=True)
class LoadedHandlers:
    """What a handlers directory gave: the types that loaded, and the manifests that did not."""

    registry: Registry
    errors: list[ManifestError]


def load_manifests(directory: Path, taken: Sequence[str] = ()) -> LoadedHandlers:
    """Every ``<directory>/*/manifest.yaml``, sorted; an invalid one (or one whose id is in
    ``taken``, the types already registered) is an error and is skipped."""
    registry = Registry("handlers")
    errors: list[ManifestError] = []
    if not directory.is_dir():
        errors.append(ManifestError(directory, "", "the handlers directory does not exist"))
        return LoadedHandlers(registry, errors)
    for path in sorted(directory.glob(f"*/{MANIFEST}")):
        try:
            manifest = parse_manifest(path)
            if manifest.id in taken or manifest.id in registry:
                raise ManifestError(
                    path, "id", f"{manifest.id!r} is already a registered job type; rename it"
                )
            registry.register(manifest.job_type())
        except ManifestError as error:
            errors.append(error)
    return LoadedHandlers(registry, errors)


def load_handlers(directory: Path, taken: Sequence[str] = ()) -> Registry:
    """:func:`load_manifests`, each error logged (``manifest.invalid``) at ERROR."""
    loaded = load_manifests(directory, taken)
    for error in loaded.errors:
        log_event(
            log,
            logging.ERROR,
            "manifest.invalid",
            file=str(error.path),
            field=error.where or "-",
            error=str(error),
            note="this type is not served; the others are",
        )
    return loaded.registry
