"""Flow control: the rules that decide which due jobs a claim may start (docs/flow-control.md).

A job type may declare

- ``concurrency_key`` + ``concurrency_limit``: never more than N running jobs of the type with the
  same value of that payload field (one crawl per site, two calls per upstream account), counted
  per org unless the type declares the key global (``concurrency_scope``, :func:`scoped_key`);
- ``max_running``: never more than N running jobs of the type at all;
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
from enum import StrEnum
from typing import Any

from jobs_core.domain import PRIORITY_MAX, PRIORITY_MIN, Job
from jobs_core.errors import PayloadInvalid


@dataclass(frozen=True, slots=True)
class FlowLimit:
    """The concurrency limits of one job type, as the claim applies them.

    ``key_limit``: running jobs per value of the job's ``concurrency_key`` (None: no limit; a
    job without a key value is not limited per key). ``type_limit``: running jobs of the type.
    """

    key_limit: int | None = None
    type_limit: int | None = None


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


ClaimLimits = Mapping[str, FlowLimit]
"""The limits of the types a claim may take, by type name (types absent: no limit)."""


def _counted(
    running: Iterable[Job], limits: ClaimLimits
) -> tuple[Counter[tuple[str, str]], Counter[str]]:
    """The running jobs of the limited types, by (type, key) and by type."""
    by_key: Counter[tuple[str, str]] = Counter()
    by_type: Counter[str] = Counter()
    for job in running:
        if job.type in limits:
            by_type[job.type] += 1
            if job.concurrency_key is not None:
                by_key[job.type, job.concurrency_key] += 1
    return by_key, by_type


def _fits(
    job: Job,
    limits: ClaimLimits,
    by_key: Counter[tuple[str, str]],
    by_type: Counter[str],
) -> bool:
    limit = limits.get(job.type)
    if limit is None:
        return True
    if limit.type_limit is not None and by_type[job.type] >= limit.type_limit:
        return False
    return (
        limit.key_limit is None
        or job.concurrency_key is None
        or by_key[job.type, job.concurrency_key] < limit.key_limit
    )


def full(running: Iterable[Job], limits: ClaimLimits) -> Callable[[Job], bool]:
    """Whether a job's key or type is already full with ``running`` running: a claim passes
    over such a job before it picks its candidates (``jobs_core.claims``)."""
    by_key, by_type = _counted(running, limits)
    return lambda job: not _fits(job, limits, by_key, by_type)


def admit(
    candidates: Iterable[Job],
    running: Iterable[Job],
    limits: ClaimLimits,
    count: int,
) -> list[Job]:
    """The first ``count`` of ``candidates`` (in the claim's order) that fit the limits.

    ``running`` are the jobs running now. A candidate is admitted if, counting the running jobs
    and the candidates admitted before it, its key and its type stay within their limits; a
    candidate that does not fit is passed over and never holds back the ones behind it.
    """
    by_key, by_type = _counted(running, limits)
    admitted: list[Job] = []
    for job in candidates:
        if len(admitted) >= count:
            break
        if not _fits(job, limits, by_key, by_type):
            continue
        if job.type in limits:
            by_type[job.type] += 1
            if job.concurrency_key is not None:
                by_key[job.type, job.concurrency_key] += 1
        admitted.append(job)
    return admitted


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
