"""A pass over the raw bytes of an upload before DuckDB reads it, so that one bad record is a row
error and never the failure (or the silent truncation) of the whole file.

DuckDB reads a file as one stream: a record longer than its line limit, bytes that are not in
the encoding sniffed from the first 64 KB, or too many columns for its memory budget fail the
whole read, and an unbalanced quote makes it read on to the next quote, swallowing the records
in between into one field. Search-analytics exports never hold a line break inside a field, so
here **a record is one physical line**, and each line is checked on its own:

- longer than :data:`MAX_LINE_BYTES` → ``the record is longer than 1048576 bytes``;
- a NUL byte → ``the record holds a NUL byte``;
- not valid in the file's encoding (UTF-8) → ``the record is not valid UTF-8 ...``;
- an odd number of quote characters (a quote opened and never closed) → ``unbalanced quote``.

A line that fails is replaced, in a screened copy of the file (a temporary file), by a marker
record (one field: ``\\x02`` and the index of its reason) that :mod:`jobs_imports.csvfile` turns
into a row error with the reason; the other lines are copied byte for byte, so record numbers
(line numbers) do not move. A file whose lines all pass is read as it is (no copy). The header
must name at most :data:`MAX_COLUMNS` columns: a wider file is refused whole, with that reason
(DuckDB's memory budget per reader holds about 256 text columns).

The pass reads the file in 1 MiB chunks and checks a chunk whole with C-speed byte operations
(``in``, ``count``, ``decode``); only a chunk that fails is walked line by line.
"""

from __future__ import annotations

import codecs
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

__all__ = ["MARKER", "MAX_COLUMNS", "MAX_LINE_BYTES", "Screened", "TooManyColumns", "screen"]

MAX_LINE_BYTES = 1024 * 1024
"""The longest record (one line) read: longer is a row error, never a failed file."""
MAX_COLUMNS = 256
"""The most columns a header may name (one reader's memory budget holds about this many)."""
MARKER = "\x02"
"""The first character of a marker record's only field; the rest is the reason's index."""

_CHUNK = 1024 * 1024
_CANDIDATE_DELIMITERS = (",", ";", "\t", "|")


class TooManyColumns(ValueError):
    """The header names more than :data:`MAX_COLUMNS` columns."""


@dataclass(slots=True)
class Screened:
    """What :func:`screen` found: the file to read and the reasons of the replaced lines."""

    path: Path
    reasons: list[str] = field(default_factory=list)
    copy: bool = False

    def reason(self, marker: str) -> str | None:
        """The reason a marker value stands for, or None if it is not a marker."""
        if not marker.startswith(MARKER):
            return None
        try:
            return self.reasons[int(marker[1:])]
        except (ValueError, IndexError):
            return None

    def discard(self) -> None:
        """Remove the screened copy, if one was made."""
        if self.copy:
            self.path.unlink(missing_ok=True)


def _line_problem(line: bytes, encoding: str, quote: bytes) -> str | None:
    body = line.rstrip(b"\r\n")
    if len(body) > MAX_LINE_BYTES:
        return f"the record is longer than {MAX_LINE_BYTES} bytes"
    if b"\x00" in body:
        return "the record holds a NUL byte"
    if encoding == "utf-8":
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as error:
            return (
                f"the record is not valid UTF-8 (byte {body[error.start]:#04x} at column "
                f"{error.start + 1}); the file was read as UTF-8 from its start: save it as UTF-8"
            )
    if body.count(quote) % 2:
        return "unbalanced quote: a quoted field is not closed on its line"
    return None


def _chunk_is_clean(
    chunk: bytes, encoding: str, quote: bytes, odd_quotes: re.Pattern[bytes]
) -> bool:
    if b"\x00" in chunk:
        return False
    if encoding == "utf-8":
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError:
            return False
    if quote in chunk and odd_quotes.search(chunk):
        return False
    return max(map(len, chunk.split(b"\n"))) <= MAX_LINE_BYTES + 1  # + the "\r" of CRLF


def _lines(handle: BinaryIO) -> Iterator[tuple[bytes, bool]]:
    """Each line (its first ``MAX_LINE_BYTES + 2`` bytes at most) and whether it was longer:
    the memory held never depends on the length of a line."""
    while True:
        line = handle.readline(MAX_LINE_BYTES + 2)
        if not line:
            return
        truncated = not line.endswith(b"\n") and len(line) == MAX_LINE_BYTES + 2
        while truncated:  # skip the rest of an overlong line
            rest = handle.readline(_CHUNK)
            if not rest or rest.endswith(b"\n"):
                break
        yield line, truncated


def _chunks(handle: BinaryIO) -> Iterator[bytes]:
    """The file in chunks of about 1 MiB that end at a line break (or the end of the file)."""
    pending = b""
    while True:
        data = handle.read(_CHUNK)
        if not data:
            if pending:
                yield pending
            return
        data = pending + data
        cut = data.rfind(b"\n")
        if cut < 0 and len(data) <= 2 * MAX_LINE_BYTES + 2:
            pending = data  # no line break yet: wait for more (bounded: an overlong line fails)
            continue
        if cut < 0:
            yield data
            pending = b""
            continue
        yield data[: cut + 1]
        pending = data[cut + 1 :]


def header_columns(first_line: bytes, encoding: str) -> int:
    """How many columns the header line names (with the most frequent candidate delimiter)."""
    text = first_line.decode(encoding, errors="replace")
    return max(text.count(delimiter) for delimiter in _CANDIDATE_DELIMITERS) + 1


def screen(path: Path, encoding: str, quote: str = '"') -> Screened:
    """Check every line of ``path``; a screened copy (beside it) when some line fails.

    Raises :class:`TooManyColumns` for a header wider than :data:`MAX_COLUMNS`. UTF-16 files are
    read as they are (their line breaks are two bytes: checked by DuckDB alone).
    """
    if encoding not in ("utf-8", "latin-1"):
        return Screened(path)
    quote_bytes = quote.encode(encoding)
    q = re.escape(quote_bytes)
    other = rb"[^\n" + q + rb"]*"
    # a line with an odd number of quotes: pairs of quotes, then one more, to the end of line
    odd_quotes = re.compile(
        rb"(?m)^" + other + rb"(?:" + q + other + q + other + rb")*" + q + other + rb"$"
    )
    with path.open("rb") as handle:
        first = handle.readline(MAX_LINE_BYTES + 2)
        columns = header_columns(first.lstrip(codecs.BOM_UTF8), encoding)
        if columns > MAX_COLUMNS:
            raise TooManyColumns(
                f"the header has {columns} columns; at most {MAX_COLUMNS} are read: export only "
                "the columns of the report (url, query, clicks, impressions, ctr, position, date)"
            )
        handle.seek(0)
        if all(
            _chunk_is_clean(chunk, encoding, quote_bytes, odd_quotes) for chunk in _chunks(handle)
        ):
            return Screened(path)
        handle.seek(0)
        # in the worker's temporary directory, not the shared data directory
        descriptor, name = tempfile.mkstemp(prefix="jobs-screened-", suffix=".csv")
        screened = Screened(Path(name), copy=True)
        try:
            with os.fdopen(descriptor, "wb") as out:
                for index, (line, overlong) in enumerate(_lines(handle)):
                    problem = (
                        f"the record is longer than {MAX_LINE_BYTES} bytes"
                        if overlong
                        else None
                        if index == 0
                        else _line_problem(line, encoding, quote_bytes)
                    )
                    if problem is None:
                        out.write(line)
                        continue
                    ending = b"\r\n" if line.endswith(b"\r\n") else b"\n"
                    out.write(f"{MARKER}{len(screened.reasons)}".encode() + ending)
                    screened.reasons.append(problem)
        except BaseException:
            screened.discard()
            raise
        return screened
