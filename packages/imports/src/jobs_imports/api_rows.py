"""The rows of an API page as :class:`~jobs_imports.csvfile.Record` s, validated by the very rules
of a CSV upload.

A page's row objects are written to a small CSV file (our field names as its header) and read
back through :func:`jobs_imports.csvfile.iter_batches` after the screening: the conversions and
checks (whole numbers, CTR between 0 and 1, positive positions, dates, an empty url) are those of
``import_csv``, in one place. A row's keys are matched to our fields by the header names a CSV may
use (:data:`~jobs_imports.csvfile.FIELD_NAMES`: ``page`` or ``url``, ``query``, ``clicks``...).

Problems only a JSON row can have are row errors here: a row that is not an object, a value
holding a line break (a CSV record is one line, :mod:`jobs_imports.screening`) or a NUL
character (which a CSV upload cannot hold either).
"""

from __future__ import annotations

import csv
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jobs_imports import csvfile
from jobs_imports.csvfile import FIELD_NAMES, CsvFormat, Record, normalize_header

__all__ = ["records_of"]

_FIELDS = tuple(FIELD_NAMES)
_FORMAT = CsvFormat(
    encoding="utf-8",
    delimiter=",",
    quote='"',
    escape='"',
    columns=_FIELDS,
    fields={name: index for index, name in enumerate(_FIELDS)},
)
_ALIASES = {alias: name for name, aliases in FIELD_NAMES.items() for alias in aliases}
_MAX_VALUE_CHARS = 100


def _text(value: Any) -> str:
    """A JSON value as the text a CSV cell would hold (``null`` is an empty cell)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):  # not a number, whatever Python says
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value)[:_MAX_VALUE_CHARS]


def _cells(row: dict[Any, Any]) -> list[str] | str:
    """The row's cells in our field order, or why it cannot be one CSV record."""
    cells = [""] * len(_FIELDS)
    filled: set[int] = set()
    for key, value in row.items():
        name = _ALIASES.get(normalize_header(str(key)))
        if name is None:
            continue
        index = _FORMAT.fields[name]
        if index in filled:  # the first key naming a field wins, like a CSV's first column
            continue
        text = _text(value)
        if "\n" in text or "\r" in text:
            return f"{name} holds a line break"
        if "\x00" in text:
            return f"{name} holds a NUL character"
        cells[index] = text
        filled.add(index)
    return cells


def _problem(line_no: int, problem: str) -> Record:
    return Record(line_no, None, None, None, None, None, None, None, None, None, problem, False)


def records_of(rows: Sequence[Any], first_line: int) -> list[Record]:
    """The records of a page's ``rows``, numbered from ``first_line``, in page order."""
    problems: dict[int, str] = {}
    with tempfile.TemporaryDirectory(prefix="jobs-import-api-") as directory:
        path = Path(directory) / "page.csv"
        written = 0
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(_FIELDS)
            for index, row in enumerate(rows):
                cells = _cells(row) if isinstance(row, dict) else "the record is not a JSON object"
                if isinstance(cells, str):
                    problems[index] = cells
                    continue
                writer.writerow(cells)
                written += 1
        converted: list[Record] = []
        if written:
            screened = csvfile.screen_file(path)
            try:
                readable = screened.path if screened is not None else path
                for batch in csvfile.iter_batches(
                    readable, _FORMAT, batch_size=written, screened=screened
                ):
                    converted.extend(batch)
            finally:
                if screened is not None:
                    screened.discard()
    records: list[Record] = []
    source = iter(converted)
    for index in range(len(rows)):
        line_no = first_line + index
        if index in problems:
            records.append(_problem(line_no, problems[index]))
        else:
            records.append(next(source)._replace(line_no=line_no))
    return records
