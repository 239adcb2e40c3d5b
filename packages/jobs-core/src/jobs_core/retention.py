"""Retention: which finished jobs a purge removes, decided here; adapters delete in batches.

Nothing is purged by default. A job type declares a policy (``JobType.retention_days``,
``keep_done``, ``keep_failed``); an operator may set a default policy for every other type and
per-type overrides at run time (:class:`RetentionSettings`), and switch the purge off. A
``protected`` type (domain history) is never purged, whatever the settings say
(docs/retention.md, decision 0017).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from jobs_core.registry import JobType, Registry

log = logging.getLogger("jobs.retention")

DONE_BUCKET: tuple[str, ...] = ("done",)
FAILED_BUCKET: tuple[str, ...] = ("failed", "cancelled")
"""``keep_failed`` counts the failed and the cancelled jobs together: both ended without
doing their work, and an operator looks at them for the same reason."""

DEFAULT_BATCH = 1_000
DEFAULT_PURGE_CRON = "0 4 * * *"

Key = tuple[datetime, uuid.UUID]
"""A position in a type's history, ``(finished_at, id)``: the order a purge walks."""

_BEFORE_ALL = uuid.UUID(int=0)


class RetentionInvalid(ValueError):
    """A retention policy or setting is invalid; the message says which and why."""


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How long one type's finished jobs are kept. Every bound is optional; a job goes when it
    breaks any of them: older than ``max_age_days``, or beyond the latest ``keep_done`` done
    jobs, or beyond the latest ``keep_failed`` failed or cancelled ones."""

    max_age_days: int | None = None
    keep_done: int | None = None
    keep_failed: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_age_days", "keep_done", "keep_failed"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise RetentionInvalid(f"{name} must be a whole number or null")
        if self.max_age_days is not None and self.max_age_days < 1:
            raise RetentionInvalid("max_age_days must be at least 1 (or null: no age limit)")
        for name in ("keep_done", "keep_failed"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise RetentionInvalid(f"{name} must be 0 or more (or null: no count limit)")

    @property
    def empty(self) -> bool:
        """True when the policy bounds nothing (keeps everything)."""
        return self.max_age_days is None and self.keep_done is None and self.keep_failed is None

    def to_dict(self) -> dict[str, int | None]:
        """The JSON form."""
        return {
            "max_age_days": self.max_age_days,
            "keep_done": self.keep_done,
            "keep_failed": self.keep_failed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetentionPolicy:
        """Read the JSON form (unknown keys are an error: a typo must not keep rows forever)."""
        unknown = set(data) - {"max_age_days", "keep_done", "keep_failed"}
        if unknown:
            raise RetentionInvalid(
                f"unknown retention field(s) {sorted(unknown)}: "
                "use max_age_days, keep_done, keep_failed"
            )
        return cls(data.get("max_age_days"), data.get("keep_done"), data.get("keep_failed"))


def declared_policy(job_type: JobType) -> RetentionPolicy | None:
    """The policy a job type declares in code, None if it declares none."""
    policy = RetentionPolicy(job_type.retention_days, job_type.keep_done, job_type.keep_failed)
    return None if policy.empty else policy


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    """The run-time settings of retention, changed by an operator (HTTP or CLI).

    - ``purge_enabled``: the daily purge does nothing when False;
    - ``default_policy``: for types that declare none (None: keep them forever);
    - ``per_type``: overrides by type name (an operator's word beats the code's);
    - ``batch_size``: rows deleted per transaction;
    - ``purge_cron``/``purge_timezone``: when the built-in purge schedule runs.
    """

    purge_enabled: bool = True
    default_policy: RetentionPolicy | None = None
    per_type: Mapping[str, RetentionPolicy] = field(default_factory=dict)
    batch_size: int = DEFAULT_BATCH
    purge_cron: str = DEFAULT_PURGE_CRON
    purge_timezone: str = "UTC"

    def __post_init__(self) -> None:
        if not isinstance(self.purge_enabled, bool):
            raise RetentionInvalid("purge_enabled must be true or false")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int):
            raise RetentionInvalid("batch_size must be a whole number")
        if not 1 <= self.batch_size <= 100_000:
            raise RetentionInvalid("batch_size must be between 1 and 100000")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what the settings store keeps, and the API shows)."""
        return {
            "purge_enabled": self.purge_enabled,
            "default_policy": None
            if self.default_policy is None
            else self.default_policy.to_dict(),
            "per_type": {name: p.to_dict() for name, p in sorted(self.per_type.items())},
            "batch_size": self.batch_size,
            "purge_cron": self.purge_cron,
            "purge_timezone": self.purge_timezone,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetentionSettings:
        """Read the JSON form; missing keys take their default."""
        unknown = set(data) - set(cls().to_dict())
        if unknown:
            raise RetentionInvalid(
                f"unknown setting(s) {sorted(unknown)}: use {', '.join(cls().to_dict())}"
            )
        default = data.get("default_policy")
        per_type = data.get("per_type") or {}
        if not isinstance(per_type, Mapping):
            raise RetentionInvalid("per_type must be an object of type name -> policy")
        if default is not None and not isinstance(default, Mapping):
            raise RetentionInvalid("default_policy must be an object or null")
        base = cls()
        return cls(
            purge_enabled=data.get("purge_enabled", base.purge_enabled),
            default_policy=None
            if default is None
            else _non_empty(RetentionPolicy.from_dict(default)),
            per_type={
                str(name): RetentionPolicy.from_dict(_mapping(name, policy))
                for name, policy in per_type.items()
            },
            batch_size=data.get("batch_size", base.batch_size),
            purge_cron=str(data.get("purge_cron", base.purge_cron)),
            purge_timezone=str(data.get("purge_timezone", base.purge_timezone)),
        )

    def merged(self, changes: Mapping[str, Any]) -> RetentionSettings:
        """These settings with ``changes`` (a partial JSON form) applied."""
        return RetentionSettings.from_dict({**self.to_dict(), **changes})


def _mapping(name: object, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RetentionInvalid(f"per_type[{name!r}] must be an object")
    return value


def _non_empty(policy: RetentionPolicy) -> RetentionPolicy | None:
    return None if policy.empty else policy


def effective_policy(job_type: JobType, settings: RetentionSettings) -> RetentionPolicy | None:
    """The policy the purge applies to ``job_type``: None (keep all) for a protected type,
    else the operator's override, else the type's declaration, else the default policy."""
    if job_type.protected:
        return None
    override = settings.per_type.get(job_type.name)
    if override is not None:
        return None if override.empty else override
    return declared_policy(job_type) or settings.default_policy


def policies(registry: Registry, settings: RetentionSettings) -> dict[str, RetentionPolicy]:
    """Every registered type the purge would touch, with its policy. Types in the table but in
    no registry are never purged: nothing says whether they are protected."""
    found: dict[str, RetentionPolicy] = {}
    for job_type in registry:
        policy = effective_policy(job_type, settings)
        if policy is not None:
            found[job_type.name] = policy
    return found


class RetentionStore(Protocol):
    """What a purge needs from the store: positions in a type's history, and batched deletes."""

    def nth_newest(self, job_type: str, statuses: tuple[str, ...], n: int) -> Key | None:
        """The key of the ``n``-th newest (1-based) finished job of the type in ``statuses``;
        None when there are fewer."""
        ...

    def delete_batch(
        self,
        job_type: str,
        statuses: tuple[str, ...],
        before: Key,
        after: Key | None,
        limit: int,
    ) -> tuple[int, Key | None]:
        """Delete up to ``limit`` finished jobs of the type in ``statuses`` with a key strictly
        between ``after`` and ``before``, oldest first, in one short transaction. The number
        deleted and the key of the last one (where the next batch starts)."""
        ...


class SettingsStore(Protocol):
    """Where the run-time retention settings live."""

    def load(self) -> RetentionSettings:
        """The stored settings (the defaults when none were saved)."""
        ...

    def save(self, settings: RetentionSettings, by: str) -> None:
        """Store the settings; ``by`` says who changed them."""
        ...


@dataclass(slots=True)
class PurgeReport:
    """What a purge removed, per type and status bucket (``done``, ``failed``)."""

    removed: dict[str, dict[str, int]] = field(default_factory=dict)
    batches: int = 0
    skipped: str | None = None

    @property
    def total(self) -> int:
        """Rows removed in all."""
        return sum(sum(buckets.values()) for buckets in self.removed.values())

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (the purge job's report)."""
        return {
            "removed": self.removed,
            "total": self.total,
            "batches": self.batches,
            "skipped": self.skipped,
        }


def cutoff(policy: RetentionPolicy, keep: int | None, nth: Key | None, now: datetime) -> Key | None:
    """Rows strictly before the returned key are purged (None: none are). The later of the
    age limit and the position of the last kept row wins: a row goes if it breaks either."""
    keys: list[Key] = []
    if policy.max_age_days is not None:
        keys.append((now - timedelta(days=policy.max_age_days), _BEFORE_ALL))
    if keep is not None and nth is not None:
        keys.append(nth)
    return max(keys) if keys else None


def purge(
    store: RetentionStore,
    registry: Registry,
    settings: RetentionSettings,
    now: datetime,
    *,
    on_batch: Callable[[str, str, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> PurgeReport:
    """Apply every policy once: for each type and bucket, find the cutoff, then delete in
    batches of ``settings.batch_size``, each batch its own transaction and starting where the
    last one stopped (never rescanning what is gone). ``on_batch(type, bucket, n)`` reports
    progress; ``should_stop`` ends the purge between two batches (a cancelled job)."""
    report = PurgeReport()
    if not settings.purge_enabled:
        report.skipped = "purge disabled by the run-time settings (purge_enabled=false)"
        return report
    found = policies(registry, settings)
    if not found:
        report.skipped = "no retention policy: every job is kept"
        return report
    for type_name, policy in sorted(found.items()):
        for bucket, statuses, keep in (
            ("done", DONE_BUCKET, policy.keep_done),
            ("failed", FAILED_BUCKET, policy.keep_failed),
        ):
            nth = None
            if keep is not None:
                # "keep N": rows older than the N-th newest go; keep 0: every row goes.
                nth = store.nth_newest(type_name, statuses, keep) if keep > 0 else _END
            before = cutoff(policy, keep, nth, now)
            if before is None:
                continue
            removed = 0
            after: Key | None = None
            while True:
                if should_stop is not None and should_stop():
                    report.skipped = "stopped before the end (cancelled)"
                    _record(report, type_name, bucket, removed)
                    return report
                count, last = store.delete_batch(
                    type_name, statuses, before, after, settings.batch_size
                )
                report.batches += 1 if count else 0
                removed += count
                if count and on_batch is not None:
                    on_batch(type_name, bucket, count)
                if count < settings.batch_size or last is None:
                    break
                after = last
            _record(report, type_name, bucket, removed)
    return report


_END: Key = (datetime.max.replace(tzinfo=UTC), uuid.UUID(int=(1 << 128) - 1))


def _record(report: PurgeReport, type_name: str, bucket: str, removed: int) -> None:
    if removed:
        report.removed.setdefault(type_name, {})[bucket] = removed
