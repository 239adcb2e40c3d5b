"""Flow control: the rules that decide which due jobs a claim may start (docs/flow-control.md).

A job type may declare

- ``concurrency_key`` + ``concurrency_limit``: never more than N running jobs of the type with the
  same value of that payload field (one crawl per site, two calls per upstream account), counted
  per org unless the type declares the key global (``concurrency_scope``, :func:`scoped_key`);
- ``max_running``: never more than N running jobs of the type at all;
- ``rate_limit=(N, P)``: never more than N starts per key in any window of P seconds
  (:mod:`jobs_core.rates`), over the same key as the concurrency limit;
- ``dedup_key``: a template of its payload (``"crawl:{site_id}"``) the job's dedup key is derived
  from on every enqueue path, so a caller cannot bypass it;
- ``max_snoozes``: how often a handler may ask to run again later without spending an attempt.

The rules are here, pure; the in-memory store runs :func:`admit` under its lock and the
PostgreSQL store applies the same rule in its claim statement (decision 0015).
"""

from __future__ import annotations

import json
import string
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from jobs_core import rates
from jobs_core.domain import PRIORITY_MAX, PRIORITY_MIN, Job
from jobs_core.errors import PayloadInvalid
from jobs_core.rates import RateLimit, Starts


@dataclass(frozen=True, slots=True)
class FlowLimit:
    """The flow limits of one job type, as the claim applies them.

    ``key_limit``: running jobs per value of the job's ``concurrency_key`` (None: no limit; a
    job without a key value is not limited per key). ``type_limit``: running jobs of the type.
    ``rate``: starts per key in any window (:mod:`jobs_core.rates`; None: no rate limit; a job
    without a key is not rate limited).
    """

    key_limit: int | None = None
    type_limit: int | None = None
    rate: RateLimit | None = None


class KeyScope(StrEnum):
    """Whose jobs share one value of a concurrency key.

    ``org`` (the default): each org's jobs count apart, as dedup keys do (decision 0003): org A's
    ``site_id=1`` and org B's ``site_id=1`` are two keys, and no tenant can take another's slots.
    ``global``: every org's jobs with that value count together, for a limit that is not the
    tenant's (an external API's account-wide rate, one shared crawler identity).
    """

    ORG = "org"
    GLOBAL = "global"


def scoped_key(org_id: str, value: str, scope: KeyScope) -> str:
    """The concurrency key a job carries (and the stores compare) for the key ``value`` of its
    payload: ``value`` itself for a global key, else the org and the value as a JSON array
    (``["org-a","1"]``): one text no two (org, value) pairs share, whatever they contain. The
    stores count running jobs per (type, this key) and never look inside it."""
    if scope is KeyScope.GLOBAL:
        return value
    return json.dumps([org_id, value], ensure_ascii=False, separators=(",", ":"))


def flow_key(org_id: str, value: str | None, scope: KeyScope) -> str:
    """The key of a job's flow limits: :func:`scoped_key` of its payload's key ``value``; for a
    type that limits its rate without naming a key field (``value`` None), one key per org
    (``["org-a"]``), or ``""`` for the whole type if its scope is global (a payload's key value
    is never empty, so neither form is ever a payload key's)."""
    if value is not None:
        return scoped_key(org_id, value, scope)
    if scope is KeyScope.GLOBAL:
        return ""
    return json.dumps([org_id], ensure_ascii=False, separators=(",", ":"))


ClaimLimits = Mapping[str, FlowLimit]
"""The limits of the types a claim may take, by type name (types absent: no limit)."""

RecentStarts = Mapping[tuple[str, str], Starts]
"""The recorded starts of the rate-limited keys, by (type, key) (:mod:`jobs_core.rates`)."""


@dataclass(slots=True)
class _Counts:
    """What a claim counts while it admits: running jobs per (type, key) and per type, and the
    starts in the rate window per (type, key) (the recorded ones, then those it admits)."""

    by_key: Counter[tuple[str, str]]
    by_type: Counter[str]
    started: Counter[tuple[str, str]]


def _counted(
    running: Iterable[Job],
    limits: ClaimLimits,
    starts: RecentStarts | None = None,
    now: datetime | None = None,
) -> _Counts:
    """The running jobs of the limited types, by (type, key) and by type; the starts of their
    rate-limited keys in the window ending at ``now``."""
    by_key: Counter[tuple[str, str]] = Counter()
    by_type: Counter[str] = Counter()
    for job in running:
        if job.type in limits:
            by_type[job.type] += 1
            if job.concurrency_key is not None:
                by_key[job.type, job.concurrency_key] += 1
    started: Counter[tuple[str, str]] = Counter()
    if starts and now is not None:
        for (type_name, key), times in starts.items():
            rate = limits[type_name].rate if type_name in limits else None
            if rate is not None:
                started[type_name, key] = rates.in_window(times, rate, now)
    return _Counts(by_key, by_type, started)


def _fits(job: Job, limits: ClaimLimits, counts: _Counts) -> bool:
    limit = limits.get(job.type)
    if limit is None:
        return True
    if limit.type_limit is not None and counts.by_type[job.type] >= limit.type_limit:
        return False
    key = job.concurrency_key
    if key is None:
        return True
    if limit.rate is not None and counts.started[job.type, key] >= limit.rate.count:
        return False
    return limit.key_limit is None or counts.by_key[job.type, key] < limit.key_limit


def full(
    running: Iterable[Job],
    limits: ClaimLimits,
    *,
    starts: RecentStarts | None = None,
    now: datetime | None = None,
) -> Callable[[Job], bool]:
    """Whether a job's key or type is already full with ``running`` running (or its key has
    used its rate in the window ending at ``now``, with ``starts`` recorded): a claim passes
    over such a job before it picks its candidates (``jobs_core.claims``)."""
    counts = _counted(running, limits, starts, now)
    return lambda job: not _fits(job, limits, counts)


def admit(
    candidates: Iterable[Job],
    running: Iterable[Job],
    limits: ClaimLimits,
    count: int,
    *,
    starts: RecentStarts | None = None,
    now: datetime | None = None,
) -> list[Job]:
    """The first ``count`` of ``candidates`` (in the claim's order) that fit the limits.

    ``running`` are the jobs running now, ``starts`` the recorded starts of the rate-limited
    keys (the window ends at ``now``, the claim's time). A candidate is admitted if, counting
    the running jobs, the starts in the window and the candidates admitted before it, its key
    and its type stay within their limits and its key within its rate; a candidate that does
    not fit is passed over and never holds back the ones behind it.
    """
    counts = _counted(running, limits, starts, now)
    admitted: list[Job] = []
    for job in candidates:
        if len(admitted) >= count:
            break
        if not _fits(job, limits, counts):
            continue
        if job.type in limits:
            counts.by_type[job.type] += 1
            if job.concurrency_key is not None:
                counts.by_key[job.type, job.concurrency_key] += 1
                counts.started[job.type, job.concurrency_key] += 1
        admitted.append(job)
    return admitted


def record(
    starts: RecentStarts, claimed: Iterable[Job], limits: ClaimLimits, now: datetime
) -> dict[tuple[str, str], Starts]:
    """The recorded starts of the rate-limited keys of ``claimed`` once they started at ``now``
    (:func:`jobs_core.rates.recorded`): what a store writes with the claim that started them."""
    counted: Counter[tuple[str, str]] = Counter()
    for job in claimed:
        limit = limits.get(job.type)
        if limit is not None and limit.rate is not None and job.concurrency_key is not None:
            counted[job.type, job.concurrency_key] += 1
    return {
        (type_name, key): rates.recorded(
            starts.get((type_name, key), ()), _rate_of(limits, type_name), now, count
        )
        for (type_name, key), count in counted.items()
    }


def _rate_of(limits: ClaimLimits, type_name: str) -> RateLimit:
    rate = limits[type_name].rate
    assert rate is not None
    return rate


# ---- keys derived from the payload ----------------------------------------------------------

_FORMATTER = string.Formatter()


def template_fields(template: str) -> list[str]:
    """The payload fields a dedup key template names (``"crawl:{site_id}"`` → ``["site_id"]``).

    Raises ValueError for a template that is not a plain list of ``{field}`` references.
    """
    fields: list[str] = []
    for _literal, name, spec, conversion in _FORMATTER.parse(template):
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise ValueError(
                f"dedup key template {template!r}: use plain {{field}} references "
                f"(got {{{name}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}})"
            )
        fields.append(name)
    if not fields:
        raise ValueError(f"dedup key template {template!r} names no payload field")
    return fields


def key_value(payload: Mapping[str, Any], field: str, what: str) -> str:
    """The text of ``payload[field]`` for a key: a string or an integer, never absent."""
    value = payload.get(field)
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise PayloadInvalid(
            [
                {
                    "loc": [field],
                    "msg": f"{what} needs {field!r} in the payload (a non-empty string or integer)",
                    "type": "missing_key_field",
                }
            ]
        )
    text = str(value)
    if "\x00" in text:
        raise PayloadInvalid(
            [{"loc": [field], "msg": "must not contain NUL (\\u0000)", "type": "nul"}]
        )
    return text


def render_dedup_key(template: str, payload: Mapping[str, Any]) -> str:
    """The dedup key a type-owned template gives for ``payload``."""
    values = {
        name: key_value(payload, name, f"the dedup key {template!r}")
        for name in template_fields(template)
    }
    return template.format_map(values)


def check_priority(priority: object) -> int:
    """``priority`` if it is an integer in [PRIORITY_MIN, PRIORITY_MAX], else ValueError."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValueError(f"priority must be an integer, not {type(priority).__name__}")
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise ValueError(
            f"priority must be between {PRIORITY_MIN} and {PRIORITY_MAX} "
            f"(higher runs first; default 0), got {priority}"
        )
    return priority


# ---- fairness between orgs (JOBS_FAIR_CLAIM; default: claims.FAIR_CLAIM_DEFAULT) ---------------


@dataclass(frozen=True, slots=True)
class FairTurn:
    """Where a fair claim's round robin over orgs stands: the org served last (None: start).

    A fair claim takes, at each priority, the *head* (the first due job in claim order) of each
    org before any other job of that priority, heads of the orgs after ``after`` first (orgs in
    code-point order, wrapping around); the other due jobs follow in plain claim order
    (:func:`fair_order`). The claimer keeps the turn between claims (:func:`next_turn`).
    """

    after: str | None = None


def _fair_key(job: Job, head: bool, after: str | None) -> tuple[Any, ...]:
    if head:
        wrapped = after is not None and job.org_id <= after
        return (-job.priority, 0, wrapped, job.org_id, job.created_at, job.id)
    return (-job.priority, 1, False, "", job.created_at, job.id)


def fair_order(due: Iterable[Job], turn: FairTurn) -> list[Job]:
    """``due`` (in claim order: priority, then age) in fair order.

    Priorities first; within a priority, the head of every org, in turn after ``turn.after``,
    then the rest oldest first. So while one org holds any number of queued jobs, another org's
    job at the same priority is taken within as many claims (of one job) as there are orgs with
    due jobs at that priority, per claimer keeping its turn.
    """
    seen: set[str] = set()
    keyed: list[tuple[tuple[Any, ...], Job]] = []
    for job in due:
        head = job.org_id not in seen
        seen.add(job.org_id)
        keyed.append((_fair_key(job, head, turn.after), job))
    keyed.sort(key=lambda pair: pair[0])
    return [job for _key, job in keyed]


def next_turn(turn: FairTurn, claimed: Iterable[Job]) -> FairTurn:
    """The turn after a claim took ``claimed``: the last of their orgs in turn order (the
    turn is unchanged when the claim took nothing)."""
    orgs = {job.org_id for job in claimed}
    if not orgs:
        return turn
    after = turn.after
    return FairTurn(max(orgs, key=lambda org: (after is not None and org <= after, org)))
