"""A :class:`jobs_core.PayloadSchema` made from a pydantic model (jobs-core knows no pydantic)."""

from __future__ import annotations

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
        """The payload normalized by the model (defaults filled in), or ``PayloadInvalid``."""
        try:
            parsed = self.model.model_validate(dict(payload))
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
