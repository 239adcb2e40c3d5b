"""Enqueue refuses what a store cannot hold alike on every adapter (PostgreSQL refuses NUL in
text and jsonb; JSON has no NaN), so the in-memory store never accepts what PostgreSQL would
reject."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest
from jobs_core import JobType, PayloadInvalid, Registry
from jobs_core.registry import MAX_PAYLOAD_DEPTH, unstorable


def test_storable_documents_pass() -> None:
    assert unstorable({"a": ["b", 1, 2.5, None, True, {"c": "d"}]}) == []


@pytest.mark.parametrize(
    ("document", "loc", "kind"),
    [
        ({"name": "a\x00b"}, ["name"], "nul"),
        ({"rows": [1, {"x": math.nan}]}, ["rows", 1, "x"], "finite_number"),
        ({"big": math.inf}, ["big"], "finite_number"),
        ({"outer": {"k\x00": 1}}, ["outer"], "nul"),
    ],
)
def test_unstorable_values_are_located(document: dict[str, Any], loc: list[Any], kind: str) -> None:
    [error] = unstorable(document)
    assert error["loc"] == loc
    assert error["type"] == kind


def test_enqueue_refuses_them_as_an_invalid_payload_or_key() -> None:
    registry = Registry()
    registry.register(JobType("t", lambda ctx: None))
    with pytest.raises(PayloadInvalid) as caught:
        registry.new_job("org", "t", {"s": "\x00"})
    assert caught.value.errors[0]["loc"] == ["s"]
    with pytest.raises(ValueError, match="NUL"):
        registry.new_job("org", "t", {}, dedup_key="k\x00")


@pytest.mark.parametrize(
    ("document", "loc", "kind"),
    [
        # flat documents: the fast check of a flat payload must still find each of these
        ({"k\x00": 1}, [], "nul"),
        ({"a": 1, "b": "x\x00"}, ["b"], "nul"),
        ({"a": True, "n": None, "f": -math.inf}, ["f"], "finite_number"),
        ({"f": math.nan}, ["f"], "finite_number"),
        ({"t": ("a\x00",)}, ["t", 0], "nul"),
    ],
)
def test_flat_documents_are_checked_alike(
    document: dict[str, Any], loc: list[Any], kind: str
) -> None:
    [error] = unstorable(document)
    assert error["loc"] == loc
    assert error["type"] == kind


def test_enqueue_of_many_checks_each_payload_as_one_by_one() -> None:
    registry = Registry()
    registry.register(JobType("t", lambda ctx: None, max_attempts=5))
    payloads: list[dict[str, Any]] = [{"i": i, "s": "x", "f": 1.5} for i in range(5)]
    keys = [None, "a", None, "b", None]
    assert registry.new_jobs("org", "t", payloads, dedup_keys=keys) == [
        registry.new_job("org", "t", p, dedup_key=k) for p, k in zip(payloads, keys, strict=True)
    ]
    with pytest.raises(PayloadInvalid) as caught:
        registry.new_jobs("org", "t", [{"i": 1}, {"i": 2}, {"i": math.nan}])
    assert caught.value.errors[0]["loc"] == ["i"]
    with pytest.raises(PayloadInvalid):
        registry.new_jobs("org", "t", [{"i": 1}, "not a mapping"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="NUL"):
        registry.new_jobs("org", "t", [{}, {}], dedup_keys=[None, "k\x00"])
    with pytest.raises(ValueError, match="org_id"):
        registry.new_jobs("", "t", [{}])
    assert registry.new_jobs("org", "t", []) == []


# ---- hostile input (issue 11, finding 5) ------------------------------------------------------


def _nested(levels: int) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for _ in range(levels - 1):
        document = {"a": document}
    return document


def test_a_payload_nested_up_to_the_limit_passes_and_one_level_more_is_refused() -> None:
    assert unstorable(_nested(MAX_PAYLOAD_DEPTH)) == []
    [error] = unstorable(_nested(MAX_PAYLOAD_DEPTH + 1))
    assert error["type"] == "too_deep"
    assert error["loc"] == ["a"] * MAX_PAYLOAD_DEPTH
    arrays: list[Any] = []
    for _ in range(500):
        arrays = [arrays]
    [error] = unstorable({"deep": arrays})
    assert error["type"] == "too_deep"
    assert len(error["loc"]) == MAX_PAYLOAD_DEPTH


@pytest.mark.parametrize(
    ("document", "loc"),
    [
        ({"s": "\ud800"}, ["s"]),
        ({"s": "caf\u00e9 \udfff"}, ["s"]),
        ({"\udc80": 1}, []),
        ({"list": ["ok", "x\ud83d"]}, ["list", 1]),
    ],
)
def test_lone_surrogates_are_refused_where_they_are(
    document: dict[str, Any], loc: list[Any]
) -> None:
    [error] = unstorable(document)
    assert (error["loc"], error["type"]) == (loc, "surrogate")


def test_a_valid_astral_character_is_not_a_surrogate() -> None:
    assert unstorable({"emoji": "\U0001f600", "cjk": "\u6f22\u5b57"}) == []


class _JsonRoundTrip:
    """A schema that normalizes like pydantic's ``model_dump(mode="json")``: NaN becomes null."""

    def validate(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        return {
            k: None if isinstance(v, float) and math.isnan(v) else v for k, v in payload.items()
        }

    def json_schema(self) -> dict[str, Any]:
        return {"type": "object"}


def test_non_finite_numbers_are_refused_before_a_schema_can_turn_them_into_null() -> None:
    registry = Registry()
    registry.register(JobType("t", lambda ctx: None, payload_schema=_JsonRoundTrip()))
    for number in (math.nan, math.inf, -math.inf, float("1e999")):
        with pytest.raises(PayloadInvalid) as caught:
            registry.new_job("org", "t", {"n": number})
        assert caught.value.errors[0]["type"] == "finite_number"
    with pytest.raises(ValueError, match="surrogate"):
        registry.new_job("org", "t", {}, dedup_key="k\ud800")
