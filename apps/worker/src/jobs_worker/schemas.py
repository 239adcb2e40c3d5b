"""A :class:`jobs_core.PayloadSchema` made from a pydantic model (jobs-core knows no pydantic)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jobs_core import PayloadInvalid
from pydantic import BaseModel, ValidationError


class PydanticSchema:
    """Validates payloads with ``model``; rejections become :class:`PayloadInvalid` with
    pydantic's error list (``loc``, ``msg``, ``type``), which the API returns as a 422."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model

    def validate(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The payload normalized by the model (defaults filled in), or ``PayloadInvalid``.

        Validated as the JSON document it is, in pydantic's strict mode: a value is taken only
        in the JSON type the model's published schema gives it (``true`` is not an integer,
        ``"1"`` is not a number), while the types JSON writes as text (a UUID, a date) are
        read from their text, and a number with no fraction is an integer, as JSON Schema says
        (``1002.0`` fits an integer field). Lax mode accepted ``{"site_id": true}`` for an
        integer field and stored ``1``, which the schema the API publishes refuses."""
        try:
            document = json.dumps(_json_numbers(dict(payload)), default=_as_text)
            parsed = self.model.model_validate_json(document, strict=True)
        except ValidationError as error:
            raise PayloadInvalid(
                [
                    {"loc": list(item["loc"]), "msg": item["msg"], "type": item["type"]}
                    for item in error.errors(include_url=False)
                ]
            ) from None
        return parsed.model_dump(mode="json")

    def json_schema(self) -> dict[str, Any]:
        """The model's JSON Schema."""
        return self.model.model_json_schema()


def _json_numbers(value: Any) -> Any:
    """``value`` with each float that has no fraction as an int (JSON Schema's integer: pydantic's
    strict mode would refuse ``2.0`` for an ``int`` field, and takes an int for a ``float``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _json_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_numbers(item) for item in value]
    return value


def _as_text(value: Any) -> str:
    """A value JSON has no type for, given by a Python caller (a UUID, a datetime): its text, as
    the payload would be stored and as the model reads it back."""
    isoformat = getattr(value, "isoformat", None)
    return str(isoformat()) if callable(isoformat) else str(value)
