"""The JSON contract (docs/contract.md, "JSON documents"): every adapter stores a payload, a
progress document and a report through :mod:`jobs_core.codec`, so each reads back the same
answer, written here as a literal (an adapter that kept Python objects, or turned them into
other text, fails)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from jobs_core import Done, FakeClock, JobService, JobStore, NewJob, PayloadInvalid, Requeue, Status

from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)
from jobs_contract.helpers import claim_one, finish, service_for

ORG = "org-a"
AT = datetime(2026, 12, 3, 15, 4, 5, 123456, tzinfo=UTC)


class Opaque:
    """A value JSON has no form for, with a fixed ``str``."""

    def __str__(self) -> str:
        return "<opaque>"


def _nested(depth: int) -> Any:
    """``depth`` levels of alternating objects and lists around one leaf."""
    value: Any = "leaf"
    for level in range(depth):
        value = {"d": value} if level % 2 else [value]
    return value


# (what is enqueued, what every adapter reads back)
ROUND_TRIPS: dict[str, tuple[dict[Any, Any], dict[str, Any]]] = {
    "date": ({"when": date(2026, 12, 3)}, {"when": "2026-12-03"}),
    "time": ({"at": time(15, 4, 5)}, {"at": "15:04:05"}),
    "aware datetime": ({"at": AT}, {"at": "2026-12-03T15:04:05.123456+00:00"}),
    "aware datetime keeps its offset": (
        {"at": datetime(2026, 12, 3, 17, 4, tzinfo=timezone(timedelta(hours=2)))},
        {"at": "2026-12-03T17:04:00+02:00"},
    ),
    "naive datetime stays naive": (
        {"at": datetime(2026, 12, 3, 15, 4, 5)},
        {"at": "2026-12-03T15:04:05"},
    ),
    "decimal as exact text": (
        {"n": Decimal("12.50"), "tiny": Decimal("1E-30"), "big": Decimal("123456789.123456789")},
        {"n": "12.50", "tiny": "1E-30", "big": "123456789.123456789"},
    ),
    "big integers keep every digit": (
        {"a": 2**53 + 1, "b": 2**63, "c": -(2**63) - 1, "d": 2**64 + 7, "e": 10**40},
        {"a": 2**53 + 1, "b": 2**63, "c": -(2**63) - 1, "d": 2**64 + 7, "e": 10**40},
    ),
    "floats": ({"x": 0.1, "y": -2.5}, {"x": 0.1, "y": -2.5}),
    "unicode as given": (
        {
            "clef": "\U0001d11e",  # astral plane (a surrogate pair in UTF-16)
            "combining": "e\u0301",  # not normalised to U+00E9
            "zwj": "\U0001f469\u200d\U0001f4bb",
            "rtl": "\u0645\u0631\u062d\u0628\u0627",
            "\U0001f511": "astral key",
        },
        {
            "clef": "\U0001d11e",
            "combining": "e\u0301",
            "zwj": "\U0001f469\u200d\U0001f4bb",
            "rtl": "\u0645\u0631\u062d\u0628\u0627",
            "\U0001f511": "astral key",
        },
    ),
    "deep but allowed nesting": ({"deep": _nested(24)}, {"deep": _nested(24)}),
    "tuples become lists": (
        {"pair": (1, "a"), "nested": ((1, 2), [3, (4,)])},
        {"pair": [1, "a"], "nested": [[1, 2], [3, [4]]]},
    ),
    "integer keys become text": (
        {"counts": {1: "a", -2: "b"}, 7: True},
        {"counts": {"1": "a", "-2": "b"}, "7": True},
    ),
    "uuid as text": (
        {"ref": uuid.UUID("0192f1d4-0000-7000-8000-000000000001")},
        {"ref": "0192f1d4-0000-7000-8000-000000000001"},
    ),
}


@pytest.fixture
def service(store: JobStore, clock: FakeClock) -> JobService:
    return service_for(store, clock)


@pytest.mark.parametrize("case", list(ROUND_TRIPS))
def test_a_payload_reads_back_the_same_on_every_adapter(service: JobService, case: str) -> None:
    sent, expected = ROUND_TRIPS[case]
    enqueued = service.enqueue(ORG, "crawl", sent).job
    assert enqueued.payload == expected  # what insert returns is what a read gives
    assert service.get(ORG, enqueued.id).payload == expected
    assert claim_one(service).payload == expected


def test_a_batch_reads_back_the_same_on_every_adapter(service: JobService) -> None:
    cases = list(ROUND_TRIPS.values())
    jobs = service.enqueue_many(ORG, "crawl", [sent for sent, _ in cases])
    assert [job.payload for job in jobs] == [expected for _, expected in cases]
    assert [service.get(ORG, job.id).payload for job in jobs] == [exp for _, exp in cases]


@pytest.mark.parametrize(
    ("payload", "loc"),
    [
        ({"tags": {"a"}}, ["tags"]),
        ({"blob": b"\x00\x01"}, ["blob"]),
        ({"obj": {"inner": Opaque()}}, ["obj", "inner"]),
        ({"n": Decimal("NaN")}, ["n"]),
        ({"n": [Decimal("Infinity")]}, ["n", 0]),
        ({"m": {True: 1}}, ["m", "True"]),
        ({"m": {(1, 2): 1}}, ["m", "(1, 2)"]),
    ],
    ids=["set", "bytes", "object", "decimal-nan", "decimal-infinity", "bool-key", "tuple-key"],
)
def test_a_payload_json_cannot_hold_is_refused_naming_the_field_on_every_adapter(
    service: JobService, store: JobStore, clock: FakeClock, payload: dict[str, Any], loc: list[Any]
) -> None:
    with pytest.raises(PayloadInvalid) as caught:
        service.enqueue(ORG, "crawl", payload)
    assert [error["loc"] for error in caught.value.errors] == [loc]
    with pytest.raises(PayloadInvalid):  # the store itself refuses it, whoever calls it
        store.insert(NewJob(ORG, "crawl", payload), clock.now())
    with pytest.raises(PayloadInvalid):
        service.enqueue_many(ORG, "crawl", [{"ok": 1}, payload])
    assert service.stats(ORG)[Status.QUEUED] == 0  # nothing of a refused batch was stored


def test_a_large_batch_with_one_payload_json_cannot_hold_stores_nothing_on_every_adapter(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    # 150 jobs without keys: PostgreSQL COPies them, encoding each payload as its row is sent,
    # so the refusal comes after rows went to the server; none of them may be kept.
    specs = [NewJob(ORG, "crawl", {"i": i}) for i in range(150)]
    specs[120] = NewJob(ORG, "crawl", {"tags": {"a"}})
    with pytest.raises(PayloadInvalid) as caught:
        store.insert_many(specs, clock.now())
    assert [error["loc"] for error in caught.value.errors] == [["tags"]]
    assert service.stats(ORG)[Status.QUEUED] == 0
    assert len(store.insert_many(specs[:120], clock.now())) == 120  # the store still works


REPORT: Mapping[str, Any] = {
    "at": AT,
    "n": Decimal("1.50"),
    "day": date(2026, 12, 3),
    "rows": (1, 2),
    "by_id": {3: "x"},
    "big": 2**64,
    "what": Opaque(),
    "ratio": float("nan"),
    "flags": {None: 1},
}
REPORT_READ: dict[str, Any] = {
    "at": "2026-12-03T15:04:05.123456+00:00",
    "n": "1.50",
    "day": "2026-12-03",
    "rows": [1, 2],
    "by_id": {"3": "x"},
    "big": 2**64,
    "what": "<opaque>",
    "ratio": "nan",
    "flags": {"None": 1},
}


def test_a_report_is_never_refused_and_reads_back_the_same_on_every_adapter(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    job = service.enqueue(ORG, "crawl", {}).job
    running = claim_one(service)
    done = finish(store, running.ref, Done(report=REPORT), clock.now())
    assert done is not None
    assert done.report == REPORT_READ
    assert service.get(ORG, job.id).report == REPORT_READ


def test_a_requeue_report_reads_back_the_same_on_every_adapter(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    job = service.enqueue(ORG, "crawl", {}).job
    running = claim_one(service)
    outcome = Requeue(clock.now() + timedelta(seconds=5), error="later", report={"at": AT})
    requeued = finish(store, running.ref, outcome, clock.now())
    assert requeued is not None
    assert requeued.report == {"at": "2026-12-03T15:04:05.123456+00:00"}
    assert service.get(ORG, job.id).report == requeued.report


def test_progress_reads_back_the_same_on_every_adapter(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    job = service.enqueue(ORG, "crawl", {}).job
    running = claim_one(service)
    progress = {"done": Decimal("2"), "since": AT, "page": (1, 3), "note": "a"}
    assert store.save_progress(running.ref, progress, clock.now())
    read = service.get(ORG, job.id).progress
    assert read is not None
    assert {k: v for k, v in read.items() if k != "updated_at"} == {
        "done": "2",
        "since": "2026-12-03T15:04:05.123456+00:00",
        "page": [1, 3],
        "note": "a",
    }
    assert progress["since"] is AT  # the handler's own document is not changed
