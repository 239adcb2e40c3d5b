"""The job type registry: each module declares its job types here (procrastinate's Blueprint
idea). An app builds one :class:`Registry` and ``include``s the modules' registries; the worker
only ever knows the registry."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from jobs_core import flow, rates
from jobs_core.context import JobContext
from jobs_core.domain import DedupScope, Job, NewJob
from jobs_core.errors import DedupKeyOwned, DuplicateJobType, PayloadInvalid, UnknownJobType
from jobs_core.retry import RetryPolicy
from jobs_core.schedules import Schedule

HandlerResult = Mapping[str, Any] | None
Handler = Callable[[JobContext], HandlerResult | Awaitable[HandlerResult]]
"""A handler takes the context and returns the job's report (or None); sync or async."""

OnFail = Callable[[Job], object]
"""Called after every transition of the job to ``failed``, at least once (:mod:`jobs_core.hooks`);
its errors are logged, never raised, and the hook runs again later."""

OnCancel = Callable[[Job], object]
"""Called after every transition of the job to ``cancelled`` (while queued or running), at least
once, as :data:`OnFail`."""

_NAME = re.compile(r"^[a-z][a-z0-9_.:-]{0,99}$")


class PayloadSchema(Protocol):
    """Validates a payload for a job type (an app may wrap a pydantic model in one)."""

    def validate(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The normalized payload, or raise :class:`~jobs_core.errors.PayloadInvalid`."""
        ...

    def json_schema(self) -> dict[str, Any]:
        """A JSON Schema of the payload, for documentation."""
        ...


@dataclass(frozen=True, slots=True)
class JobType:
    """Everything a module declares about one kind of job.

    - ``max_attempts``: claims allowed before a zombie is failed for good (docs/contract.md §5);
    - ``dedup_scope``: when the dedup key is released (see :class:`DedupScope`);
    - ``on_fail`` / ``on_cancel``: the module's hooks to make its domain state consistent after
      the job ends failed / cancelled (also while still queued); at least once, idempotent
      (:mod:`jobs_core.hooks`);
    - ``retry``: which errors re-queue with backoff (none by default);
    - ``timeout_s``: an attempt running longer fails as a timeout;
    - ``retention_days``: None keeps the rows forever (the default, docs/contract.md §1);
    - ``keep_done`` / ``keep_failed``: keep only the latest N done / failed-or-cancelled
      jobs of the type (None: no count limit; see :mod:`jobs_core.retention`);
    - ``protected``: the rows are domain history: never purged, never deletable;
    - ``public``: may be enqueued over HTTP by any authenticated org;
    - flow control (docs/flow-control.md): ``dedup_key`` (a template of the payload, e.g.
      ``"crawl:{site_id}"``, the key of every job of the type), ``concurrency_key`` (a payload
      field) with ``concurrency_limit`` (running jobs per value of it, counted per org unless
      ``concurrency_scope`` is :attr:`~jobs_core.flow.KeyScope.GLOBAL`), ``max_running`` (running
      jobs of the type), ``rate_limit`` (``(N, per_seconds)``: at most N starts per key in any
      window of that many seconds, over the same key as ``concurrency_key``, or per org when
      the type names none: :mod:`jobs_core.rates`) and ``max_snoozes`` (how often a job may
      ask to run later);
    - ``after_failed_dependency``: what becomes of a job of the type enqueued with
      ``depends_on`` when one of those jobs ends failed or cancelled: ``"cancel"`` (the
      default: it is cancelled at once) or ``"run"`` (it runs once they have all ended;
      docs/flows.md).
    """

    name: str
    handler: Handler
    max_attempts: int = 3
    dedup_scope: DedupScope = DedupScope.QUEUE
    on_fail: OnFail | None = None
    payload_schema: PayloadSchema | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_s: float | None = None
    retention_days: int | None = None
    protected: bool = False
    public: bool = False
    description: str = ""
    applies_to: tuple[str, ...] = ()
    keep_done: int | None = None
    keep_failed: int | None = None
    dedup_key: str | None = None
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    concurrency_scope: flow.KeyScope = flow.KeyScope.ORG
    max_running: int | None = None
    rate_limit: tuple[int, float] | None = None
    max_snoozes: int = 20
    on_cancel: OnCancel | None = None
    after_failed_dependency: Literal["cancel", "run"] = "cancel"

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(
                f"job type name {self.name!r} must match {_NAME.pattern} "
                "(lowercase, starts with a letter)"
            )
        if self.max_attempts < 1:
            raise ValueError(f"{self.name}: max_attempts must be >= 1")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ValueError(f"{self.name}: timeout_s must be > 0")
        if self.retention_days is not None and self.retention_days < 1:
            raise ValueError(f"{self.name}: retention_days must be >= 1")
        if self.protected and self.retention_days is not None:
            raise ValueError(f"{self.name}: a protected type is never purged (no retention_days)")
        for keep in ("keep_done", "keep_failed"):
            value = getattr(self, keep)
            if value is not None and value < 0:
                raise ValueError(f"{self.name}: {keep} must be >= 0")
            if value is not None and self.protected:
                raise ValueError(f"{self.name}: a protected type is never purged (no {keep})")
        if self.dedup_key is not None:
            flow.template_fields(self.dedup_key)
        if self.rate_limit is not None:
            rate = rates.RateLimit.declared(self.rate_limit, self.name)
            object.__setattr__(self, "rate_limit", (rate.count, rate.per_s))
        if self.concurrency_limit is not None and self.concurrency_key is None:
            raise ValueError(
                f"{self.name}: concurrency_limit needs concurrency_key "
                "(the payload field whose values it counts)"
            )
        if self.concurrency_key is not None and (
            self.concurrency_limit is None and self.rate_limit is None
        ):
            raise ValueError(
                f"{self.name}: concurrency_key goes with concurrency_limit or rate_limit "
                "(the payload field, and how many running jobs or starts per value of it)"
            )
        if self.concurrency_key is not None and not self.concurrency_key.isidentifier():
            raise ValueError(f"{self.name}: concurrency_key must name a payload field")
        if self.concurrency_limit is not None and self.concurrency_limit < 1:
            raise ValueError(f"{self.name}: concurrency_limit must be >= 1")
        if not isinstance(self.concurrency_scope, flow.KeyScope):
            raise ValueError(
                f"{self.name}: concurrency_scope must be a KeyScope "
                f"({', '.join(repr(s.value) for s in flow.KeyScope)}), "
                f"not {self.concurrency_scope!r}"
            )
        if self.max_running is not None and self.max_running < 1:
            raise ValueError(f"{self.name}: max_running must be >= 1")
        if self.max_snoozes < 0:
            raise ValueError(f"{self.name}: max_snoozes must be >= 0")
        if self.after_failed_dependency not in ("cancel", "run"):
            raise ValueError(
                f"{self.name}: after_failed_dependency must be 'cancel' or 'run', "
                f"not {self.after_failed_dependency!r}"
            )

    @property
    def flow_limit(self) -> flow.FlowLimit | None:
        """The limits the claim applies to this type (None: unlimited)."""
        rate = self.rate
        if self.concurrency_limit is None and self.max_running is None and rate is None:
            return None
        return flow.FlowLimit(
            key_limit=self.concurrency_limit, type_limit=self.max_running, rate=rate
        )

    @property
    def rate(self) -> rates.RateLimit | None:
        """The type's rate limit (None: none)."""
        if self.rate_limit is None:
            return None
        return rates.RateLimit(*self.rate_limit)

    def derived_keys(
        self, org_id: str, payload: Mapping[str, Any], dedup_key: str | None
    ) -> tuple[str | None, str | None]:
        """The dedup key and the concurrency key of a job of ``org_id``'s of this type with this
        (validated) payload. A type-owned dedup key refuses a different one from the caller; the
        concurrency key (the key of its flow limits) is scoped by
        :func:`~jobs_core.flow.flow_key`."""
        if self.dedup_key is not None:
            derived = flow.render_dedup_key(self.dedup_key, payload)
            if dedup_key is not None and dedup_key != derived:
                raise DedupKeyOwned(self.name, derived, dedup_key)
            dedup_key = derived
        concurrency = None
        if self.concurrency_key is not None:
            value = flow.key_value(
                payload, self.concurrency_key, f"the concurrency limit of {self.name!r}"
            )
            concurrency = flow.flow_key(org_id, value, self.concurrency_scope)
        elif self.rate_limit is not None:
            concurrency = flow.flow_key(org_id, None, self.concurrency_scope)
        return dedup_key, concurrency

    def validate_payload(self, payload: Mapping[str, Any] | None) -> dict[str, Any]:
        """The payload checked by the type's schema (any JSON object when it has none)."""
        if payload is None:
            payload = {}
        if not isinstance(payload, Mapping):
            raise PayloadInvalid([{"loc": ["payload"], "msg": "payload must be a JSON object"}])
        # Checked before the schema too: a schema may turn NaN into null, or recurse too deep.
        errors = unstorable(payload)
        if errors:
            raise PayloadInvalid(errors)
        if self.payload_schema is None:
            return dict(payload)  # the same document, checked above
        validated = self.payload_schema.validate(payload)
        errors = unstorable(validated)
        if errors:
            raise PayloadInvalid(errors)
        return validated


MAX_PAYLOAD_DEPTH = 32
"""How deep a payload may nest objects and arrays (the payload object is level 1): deeper
documents are refused at enqueue, before any schema or store recurses through them."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def text_problem(text: str) -> tuple[str, str] | None:
    """Why ``text`` cannot be stored as text (message, error type), or None."""
    if "\x00" in text:
        return "text must not contain NUL (\\u0000) characters", "nul"
    if not text.isascii() and _SURROGATE.search(text):
        return "text must be valid Unicode (no lone surrogate such as \\ud800)", "surrogate"
    return None


def unstorable(value: Any, loc: tuple[str | int, ...] = (), depth: int = 1) -> list[dict[str, Any]]:
    """Why a JSON document cannot be stored the same way by every adapter: PostgreSQL text and
    jsonb refuse NUL (``\\u0000``) characters and text that is not valid Unicode (a lone
    surrogate), JSON has no NaN or infinity, and no document nests deeper than
    :data:`MAX_PAYLOAD_DEPTH`. Empty when storable. Checked at enqueue so the in-memory store
    refuses what PostgreSQL would."""
    if depth > MAX_PAYLOAD_DEPTH and isinstance(value, Mapping | list | tuple):
        return [
            _unstorable(
                loc, f"nested deeper than {MAX_PAYLOAD_DEPTH} objects or arrays", "too_deep"
            )
        ]
    if type(value) is dict and _flat_storable(value):
        return []
    if isinstance(value, str):
        problem = text_problem(value)
        return [] if problem is None else [_unstorable(loc, *problem)]
    if isinstance(value, float) and not math.isfinite(value):
        return [_unstorable(loc, "numbers must be finite (no NaN or infinity)", "finite_number")]
    errors: list[dict[str, Any]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str):
                problem = text_problem(key)
                if problem is not None:
                    message, kind = problem
                    errors.append(_unstorable(loc, message.replace("text", "keys", 1), kind))
            errors += unstorable(item, (*loc, str(key)), depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            errors += unstorable(item, (*loc, index), depth + 1)
    return errors


_SCALARS = frozenset({int, bool, type(None)})


def _flat_storable(document: dict[Any, Any]) -> bool:
    """True when ``document`` is certainly storable without walking it: text keys and only text
    without NUL or surrogates, finite numbers, booleans or nulls as values (the common flat
    payload; an enqueue of many jobs checks one per job). False sends it to the full walk of
    :func:`unstorable`, which finds the errors."""
    for key, item in document.items():
        if type(key) is not str or text_problem(key) is not None:
            return False
        kind = type(item)
        if kind is str:
            if text_problem(item) is not None:
                return False
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif kind not in _SCALARS:
            return False
    return True


def _unstorable(loc: tuple[str | int, ...], msg: str, kind: str) -> dict[str, Any]:
    return {"loc": list(loc), "msg": msg, "type": kind}


class Registry:
    """Job types by name. Registering a name twice is an error."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._types: dict[str, JobType] = {}
        self.schedules: list[Schedule] = []
        """Schedules the module declares in code (stored by the scheduler at its start)."""

    def schedule(self, schedule: Schedule) -> Schedule:
        """Declare a schedule of this module (see :mod:`jobs_core.schedules`)."""
        self.schedules.append(schedule)
        return schedule

    def register(self, job_type: JobType) -> JobType:
        """Add a job type; raise :class:`DuplicateJobType` if its name is taken."""
        if job_type.name in self._types:
            raise DuplicateJobType(job_type.name)
        self._types[job_type.name] = job_type
        return job_type

    def job_type(self, name: str, **declarations: Any) -> Callable[[Handler], Handler]:
        """Decorator form of :meth:`register`: ``@registry.job_type("noop", public=True)``."""

        def decorate(handler: Handler) -> Handler:
            self.register(JobType(name=name, handler=handler, **declarations))
            return handler

        return decorate

    def include(self, other: Registry, *, internal: bool = False) -> None:
        """Add every type of a module's registry; with ``internal``, each as an internal type
        (``public`` off: a development module's types served, but not over HTTP)."""
        for job_type in other:
            self.register(dataclasses.replace(job_type, public=False) if internal else job_type)
        self.schedules.extend(other.schedules)

    def get(self, name: str) -> JobType:
        """The type named ``name``, or :class:`UnknownJobType`."""
        try:
            return self._types[name]
        except KeyError:
            raise UnknownJobType(name) from None

    def __contains__(self, name: object) -> bool:
        return name in self._types

    def __iter__(self) -> Iterator[JobType]:
        return iter(list(self._types.values()))

    def __len__(self) -> int:
        return len(self._types)

    def names(self) -> list[str]:
        """Registered type names, sorted."""
        return sorted(self._types)

    # -- the public-type rule: the one place that says what an org may name over HTTP ----------
    def is_public(self, name: object) -> bool:
        """True if ``name`` is a registered type that any authenticated org may enqueue or
        schedule over HTTP (declared ``public``)."""
        job_type = self._types.get(name) if isinstance(name, str) else None
        return job_type is not None and job_type.public

    def public_type(self, name: str) -> JobType:
        """The public type named ``name``; :class:`UnknownJobType` for an internal type exactly
        as for an absent one, so a caller cannot learn that an internal type exists."""
        if not self.is_public(name):
            raise UnknownJobType(name)
        return self._types[name]

    def public_types(self) -> list[JobType]:
        """The public types, sorted by name (what ``GET /job-types`` lists and the OpenAPI
        document describes); internal types are never among them."""
        return [self._types[name] for name in self.names() if self._types[name].public]

    def flow_limits(self) -> dict[str, flow.FlowLimit]:
        """The flow limits (concurrency, rate) of the registered types that declare any."""
        return {t.name: limit for t in self._types.values() if (limit := t.flow_limit)}

    def new_job(
        self,
        org_id: str,
        type_name: str,
        payload: Mapping[str, Any] | None = None,
        *,
        dedup_key: str | None = None,
        run_at: datetime | None = None,
        priority: int = 0,
    ) -> NewJob:
        """Resolve an enqueue request against the type's declarations (validating the payload,
        deriving its keys)."""
        if not org_id:
            raise ValueError("org_id must not be empty")
        if dedup_key is not None and not dedup_key:
            raise ValueError("dedup_key must not be empty (use None for no key)")
        if dedup_key is not None and (problem := text_problem(dedup_key)) is not None:
            raise ValueError("dedup_key: " + problem[0])
        priority = flow.check_priority(priority)
        job_type = self.get(type_name)
        validated = job_type.validate_payload(payload)
        dedup_key, concurrency_key = job_type.derived_keys(org_id, validated, dedup_key)
        return NewJob(
            org_id=org_id,
            type=job_type.name,
            payload=validated,
            dedup_key=dedup_key,
            dedup_scope=job_type.dedup_scope,
            max_attempts=job_type.max_attempts,
            run_at=run_at,
            priority=priority,
            concurrency_key=concurrency_key,
        )

    def new_jobs(
        self,
        org_id: str,
        type_name: str,
        payloads: Iterable[Mapping[str, Any] | None],
        *,
        dedup_keys: Sequence[str | None] | None = None,
        priority: int = 0,
    ) -> list[NewJob]:
        """:meth:`new_job` for each payload (its dedup key at the same index): the same checks
        in the same order, and every payload validated, with the type resolved once."""
        specs: list[NewJob] = []
        job_type: JobType | None = None
        for i, payload in enumerate(payloads):
            dedup_key = None if dedup_keys is None else dedup_keys[i]
            if (
                job_type is None
                or dedup_key is not None
                or job_type.dedup_key is not None
                or job_type.concurrency_key is not None
                or job_type.rate_limit is not None
            ):
                # The first job of the batch, and every keyed one, goes through every check.
                specs.append(
                    self.new_job(org_id, type_name, payload, dedup_key=dedup_key, priority=priority)
                )
                job_type = self.get(type_name)
                continue
            specs.append(
                NewJob(
                    org_id,
                    job_type.name,
                    job_type.validate_payload(payload),
                    None,
                    job_type.dedup_scope,
                    job_type.max_attempts,
                    None,
                    priority,
                )
            )
        return specs
