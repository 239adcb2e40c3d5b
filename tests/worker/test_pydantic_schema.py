"""The deployables' pydantic payload schema (``jobs_worker.schemas.PydanticSchema``) takes a value
only in the JSON type its published schema gives it: what the API's OpenAPI document says is an
integer is refused as ``true`` or ``"3"`` (schemathesis sent ``{"site_id": true}`` and lax
validation stored ``1``), while JSON Schema's integers (``3.0``) and the types JSON writes as
text (UUIDs, instants; objects of them from a Python caller) are read."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from jobs_core import PayloadInvalid
from jobs_worker.schemas import PydanticSchema
from pydantic import BaseModel, Field


class Payload(BaseModel):
    n: int = Field(ge=1)
    ref: uuid.UUID
    at: datetime
    ratio: float = 0.5
    tags: list[int] = []


SCHEMA = PydanticSchema(Payload)
REF = uuid.UUID("12345678-1234-5678-1234-567812345678")


def test_json_types_and_their_text_forms_are_read() -> None:
    got = SCHEMA.validate(
        {"n": 3.0, "ref": REF, "at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "ratio": 2}
    )
    assert got == {
        "n": 3,
        "ref": str(REF),
        "at": "2026-01-02T03:04:05Z",
        "ratio": 2.0,
        "tags": [],
    }
    text = SCHEMA.validate({"n": 1, "ref": str(REF), "at": "2026-01-02T03:04:05Z", "tags": [2.0]})
    assert text["tags"] == [2]
    assert text["ref"] == str(REF)


@pytest.mark.parametrize(
    ("field", "value"),
    [("n", True), ("n", "3"), ("n", 2.5), ("n", 0), ("ratio", "0.5"), ("tags", [False])],
)
def test_a_value_of_another_json_type_is_refused_naming_its_field(field: str, value: Any) -> None:
    payload = {"n": 1, "ref": str(REF), "at": "2026-01-02T03:04:05Z", field: value}
    with pytest.raises(PayloadInvalid) as refused:
        SCHEMA.validate(payload)
    assert [error["loc"][0] for error in refused.value.errors] == [field]
