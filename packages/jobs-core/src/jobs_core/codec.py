"""The one JSON codec of the stores: what a payload, a progress document or a report becomes.

Every adapter stores these documents through this module, so each reads back the same answer
(the rules are in ``docs/contract.md``, "JSON documents"; decision 0019):

- A **payload** is checked strictly. What :func:`jobs_core.registry.unstorable` refuses (NUL
  characters, NaN and infinity, lone surrogates, too deep a nesting) and a value JSON has no
  form for (a set, bytes, an object) raise :class:`~jobs_core.errors.PayloadInvalid` naming the
  field. Values with one obvious JSON form are normalised: a datetime, date or time becomes its
  ISO 8601 text (a naive datetime stays naive: no zone is guessed), a finite ``Decimal`` its
  exact text, a UUID its text, a tuple a list, an integer key its decimal text.
- A **report** or **progress** document is what a handler wrote after its work was done: it is
  never refused. It is normalised the same way, and what a payload would refuse is kept as text
  (``str(value)``, a non-text key its ``str``). Text is not changed: NUL characters and lone
  surrogates reach the store, which refuses them (``StoreRefused`` from PostgreSQL).

Integers of any size are kept as integers (PostgreSQL's jsonb keeps every digit; a JavaScript
client reads those beyond 2**53 approximately).
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Mapping
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from jobs_core.errors import PayloadInvalid
from jobs_core.registry import unstorable

_SCALARS = frozenset({str, int, float, bool, type(None)})

_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
"""One compact encoder, made once (``json.dumps`` with options makes one per call)."""


def encode_payload(payload: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A payload as the stores hold it: its JSON text and the document that text reads back as.

    The document is ``payload`` itself when it is already plain (text keys, JSON scalars): copy
    it before keeping it. Raises :class:`PayloadInvalid` naming each field that cannot be
    stored."""
    errors = unstorable(payload)
    if errors:
        raise PayloadInvalid(errors)
    document: dict[str, Any]
    encode: Callable[[dict[str, Any]], str]
    if type(payload) is dict and _plain(payload):
        document, encode = payload, _flat_text
    else:
        found: list[dict[str, Any]] = []
        document, encode = _normalised(payload, (), found), _ENCODER.encode
        if found:
            raise PayloadInvalid(found)
    try:
        return encode(document), document
    except ValueError as exc:  # an integer of more digits than int_max_str_digits
        raise PayloadInvalid(
            [_error((), f"cannot be stored as JSON: {exc}; send very long numbers as text")]
        ) from exc


def payload(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The payload as a store holds it and reads it back (:func:`encode_payload`'s document;
    ``payload`` itself when it is plain)."""
    return encode_payload(payload)[1]


def encode_document(document: Any) -> str:
    """A report or progress document as JSON text: normalised, never refused, but for what no
    JSON text can be written for (an integer of more than 4,300 digits: ``ValueError``)."""
    return _ENCODER.encode(_document(document))


def document(value: Any) -> Any:
    """A report or progress document as JSON types, not encoded (:func:`encode_document`'s
    normalisation: a store putting it inside a parameter of its own encodes the whole with
    :func:`encode_plain`)."""
    return _document(value)


def encode_plain(value: Any) -> str:
    """The compact JSON text of a value already made of JSON types (a store's own parameter:
    text, numbers, ``None``, lists and text-keyed dicts of them, documents from
    :func:`document`). Never normalises: a value of another type raises ``TypeError``."""
    return _ENCODER.encode(value)


def normalise_document(document: Any) -> Any:
    """A report or progress document as a store reads it back (a new object, never ``document``
    itself): the values a payload would refuse are kept as text. Raises what
    :func:`encode_document` raises, so every store refuses the same documents."""
    normalised = _document(document)
    _ENCODER.encode(normalised)
    return normalised


def _document(document: Any) -> Any:
    if type(document) is dict and _plain(document) and not unstorable(document):
        return dict(document)
    return _normalised(document, (), None)


def _plain(document: dict[Any, Any]) -> bool:
    """True when every key is text and every value a JSON scalar: the document is already what
    it reads back as (the common flat payload skips the walk)."""
    for key, value in document.items():
        if type(key) is not str or type(value) not in _SCALARS:
            return False
    return True


_CONSTANTS = {True: "true", False: "false", None: "null"}


def _flat_text(document: dict[str, Any]) -> str:
    """The compact JSON text of a plain document (:func:`_plain`), the same as ``_ENCODER``'s.

    ``JSONEncoder.encode`` of a whole object makes a new C encoder per call (two thirds of the
    time of a small payload); of a single string it only escapes it. Numbers are written as
    ``json`` writes them (``int.__repr__``, ``float.__repr__``)."""
    parts = []
    for key, value in document.items():
        kind = type(value)
        if kind is str:
            text = _ENCODER.encode(value)
        elif kind is int:
            text = int.__repr__(value)
        elif kind is float:
            text = float.__repr__(value)
        else:
            text = _CONSTANTS[value]
        parts.append(f"{_ENCODER.encode(key)}:{text}")
    return "{" + ",".join(parts) + "}"


def _normalised(value: Any, loc: tuple[str | int, ...], errors: list[dict[str, Any]] | None) -> Any:
    """``value`` as JSON types. ``errors`` is None for a document (keep what JSON cannot hold
    as text) and a list for a payload (each refused value is added to it, with its path)."""
    if isinstance(value, str):
        return str.__str__(value)  # a str subclass (an enum) as its value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return float(value)
        if errors is not None:  # pragma: no cover - unstorable refused it already
            errors.append(_error(loc, "numbers must be finite (no NaN or infinity)"))
        return str(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = _key(key, loc, errors)
            out[name] = _normalised(item, (*loc, name), errors)
        return out
    if isinstance(value, list | tuple):
        return [_normalised(item, (*loc, index), errors) for index, item in enumerate(value)]
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        if value.is_finite():
            return str(value)
        if errors is not None:
            errors.append(_error(loc, "numbers must be finite (no NaN or infinity)"))
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if errors is not None:
        errors.append(
            _error(
                loc,
                f"a {type(value).__name__} cannot be stored as JSON: send text, a number, "
                "a boolean, null, a list or an object",
            )
        )
        return None
    return str(value)


def _key(key: Any, loc: tuple[str | int, ...], errors: list[dict[str, Any]] | None) -> str:
    """An object key as text: JSON keys are text; an integer key becomes its decimal text."""
    if isinstance(key, str):
        return str.__str__(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return str(int(key))
    if errors is not None:
        errors.append(
            _error(
                (*loc, repr(key)),
                f"object keys must be text or integers, not {type(key).__name__}",
            )
        )
    return str(key)


def _error(loc: tuple[str | int, ...], msg: str) -> dict[str, Any]:
    return {"loc": list(loc), "msg": msg, "type": "json"}
