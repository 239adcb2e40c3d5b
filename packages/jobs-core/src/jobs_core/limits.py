"""Size limits of the documents a job carries (its report and its progress).

A job's report and progress are JSON documents stored in its row: what the handler wants shown,
not its output. A document far larger than that is refused here, before any store sees it, so
an outcome can always be written (a report of 256 MB used to be retried "until written" while
the job held its slot; issue 11). See docs/worker.md, "Document sizes".
"""

from __future__ import annotations

import json

DOCUMENT_MAX_BYTES = 1024 * 1024
"""The largest report or progress document, as compact JSON (1 MiB)."""

CHECKPOINT_MAX_BYTES = 8 * 1024 * 1024
"""The largest private checkpoint, as compact JSON (8 MiB): it is read back only by the job's
next attempt, never listed, but it is still rewritten whole at each save."""

_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)
"""How the stores encode these documents (a value JSON cannot hold becomes its ``str``)."""


def oversize(document: object, limit: int = DOCUMENT_MAX_BYTES) -> int | None:
    """The encoded size of ``document`` if it is over ``limit`` bytes, else None.

    Encoding stops as soon as the limit is passed (the size returned is then a lower bound,
    marked by the caller as "over"), so a huge document costs little more than its largest
    value. Sizes are counted in characters of the ASCII-escaped JSON, i.e. bytes.
    """
    if document is None or _surely_under(document, limit):
        return None
    size = 0
    for chunk in _ENCODER.iterencode(document):
        size += len(chunk)
        if size > limit:
            return size
    return None


_WIDEST_CHAR = 12
"""The most a character of text takes in ASCII-escaped JSON: a surrogate pair, 12 bytes."""


def _surely_under(document: object, limit: int) -> bool:
    """True when ``document`` is a flat dict of text keys and scalar values whose JSON cannot
    reach ``limit`` bytes, by a bound computed without encoding it: the common small report
    skips the encoder (a pure-Python ``iterencode`` per call, a few percent of a worker's CPU
    per job of a drain; bench/NOTES.md). False means "not known", never "over"."""
    if type(document) is not dict:
        return False
    bound = 2
    for key, value in document.items():
        if type(key) is not str:
            return False
        kind = type(value)
        if kind is str:
            width = len(value) * _WIDEST_CHAR + 2
        elif kind is bool or value is None:
            width = 5
        elif kind is int and -(10**18) < value < 10**18:
            width = 20
        elif kind is float:
            width = 24
        else:
            return False
        bound += len(key) * _WIDEST_CHAR + 4 + width
        if bound > limit:
            return False
    return True


def describe_size(size: int) -> str:
    """``size`` bytes for a message: ``"2.0 MiB"``, ``"512 KiB"``, ``"12 bytes"``."""
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MiB"
    if size >= 1024:
        return f"{size // 1024} KiB"
    return f"{size} bytes"
