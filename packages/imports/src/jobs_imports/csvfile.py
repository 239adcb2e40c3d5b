"""Reading a search-analytics CSV export with DuckDB, in bounded batches.

DuckDB does the byte work — dialect sniffing, decoding, quoting, and the per-value parsing and
checks, vectorized in SQL — and hands Python small batches of already-typed records through a
streaming cursor; the file is never loaded whole into Python.

The flow: :func:`detect_format` inspects the file (encoding from its first bytes, delimiter, quote
and header from DuckDB's sniffer) and maps its header to our fields (:data:`FIELD_NAMES`);
:func:`count_records` counts the records (for ``done/total`` progress); :func:`iter_batches`
streams :class:`Record` batches from any record offset (how a resumed import skips what it
already wrote).

Every column is read as text and converted by rules a search-console export needs (a decimal
comma, ``12,5 %`` CTRs, non-breaking-space thousands separators, ISO or day-first dates), so a bad
value makes one row invalid, with a reason, instead of failing the file or silently changing a
column's type. Structural defects (too many or too few fields) are row errors too: the file is
read with ``strict_mode=false`` and ``null_padding``, one sentinel column past the header catches
extra fields, and a NULL-string sentinel tells a missing field (NULL) from an empty one (``''``).

Line numbers are record numbers as DuckDB counts them: the header is line 1 and each record adds
one. They equal the file's physical lines unless a quoted field spans lines or blank lines sit
between records (DuckDB skips those) — exports of search tools have neither.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from jobs_imports import screening

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "FIELD_NAMES",
    "CsvFormat",
    "ImportFileError",
    "Record",
    "count_records",
    "detect_format",
    "iter_batches",
]


class ImportFileError(Exception):
    """The file cannot be imported at all (not a CSV, no url column, unreadable)."""


FIELD_NAMES: Mapping[str, tuple[str, ...]] = {
    # Normalized header spellings (lowercase, no accents, punctuation as spaces), most specific
    # first: when two columns match one field, the one whose name comes first here wins.
    "url": (
        "url",
        "page",
        "pages",
        "top pages",
        "pages les plus populaires",
        "page url",
        "url de la page",
        "landing page",
        "landing page url",
        "address",
        "adresse",
    ),
    "query": (
        "query",
        "queries",
        "top queries",
        "search query",
        "requete",
        "requetes",
        "requetes les plus frequentes",
        "keyword",
        "mot cle",
    ),
    "clicks": ("clicks", "clics", "url clicks", "total clicks"),
    "impressions": ("impressions", "total impressions"),
    "ctr": ("ctr", "url ctr", "average ctr", "taux de clics", "click through rate"),
    "position": ("position", "average position", "avg position", "position moyenne"),
    "date": ("date", "day", "jour"),
    "country": ("country", "pays"),
    "device": ("device", "appareil"),
}
"""Our fields and the header names that mean them (only ``url`` is required)."""

_SNIFF_BYTES = 64 * 1024
_DUCKDB_MEMORY = "32MB"
_MAX_LINE_BYTES = screening.MAX_LINE_BYTES  # longer: a row error (screening), not an export row
_BUFFER_BYTES = 2 * _MAX_LINE_BYTES  # DuckDB's default (32 MiB per buffer) would not fit the budget
_NULL_SENTINEL = "\x01"  # the string DuckDB reads as NULL: an absent (padded) field, never ''
_EXTRA = "__extra_field"
_BINARY_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"PK\x03\x04", "a ZIP archive or an Excel workbook (.xlsx): export the sheet as CSV"),
    (b"\xd0\xcf\x11\xe0", "an Excel 97-2003 workbook (.xls): export the sheet as CSV"),
    (b"\x1f\x8b", "a gzip archive: decompress it first"),
    (b"%PDF", "a PDF document"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"SQLite format 3", "an SQLite database"),
)


@dataclass(frozen=True, slots=True)
class CsvFormat:
    """What :func:`detect_format` found: how to read the file and where our fields are."""

    encoding: str
    delimiter: str
    quote: str
    escape: str
    columns: tuple[str, ...]
    fields: Mapping[str, int] = field(default_factory=dict)
    """Our field name → index of its column in ``columns``."""

    def describe(self) -> dict[str, Any]:
        """A JSON-able summary for the import's report."""
        return {
            "encoding": self.encoding,
            "delimiter": self.delimiter,
            "columns": list(self.columns),
            "mapped": {name: self.columns[index] for name, index in self.fields.items()},
        }


class Record(NamedTuple):
    """One record of the file, its values converted; ``problem`` says why it is invalid.

    A named tuple rather than a frozen dataclass: one is built per record, and a tuple is the
    cheapest immutable record Python builds."""

    line_no: int
    url: str | None
    query: str | None
    clicks: int | None
    impressions: int | None
    ctr: float | None
    position: float | None
    day: date | None
    country: str | None
    device: str | None
    problem: str | None
    empty: bool


# ---- format detection ---------------------------------------------------------------------------


def _encoding_of(prefix: bytes) -> str:
    """The encoding to read the file with, from its first bytes (BOM, then UTF-8 validity)."""
    if prefix.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    for signature, what in _BINARY_SIGNATURES:
        if prefix.startswith(signature):
            raise ImportFileError(f"the file is not a CSV file: it looks like {what}")
    if b"\x00" in prefix:
        raise ImportFileError("the file is not a CSV text file: it holds binary data (NUL bytes)")
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        # final=False: a multi-byte character cut by the end of the prefix is not an error
        text = decoder.decode(prefix, final=False)
        encoding = "utf-8"
    except UnicodeDecodeError:
        # Not UTF-8: the Windows/Excel exports of western Europe are Latin-1 (a superset read)
        text = prefix.decode("latin-1")
        encoding = "latin-1"
    controls = sum(
        1 for char in text if unicodedata.category(char) == "Cc" and char not in "\t\r\n"
    )
    if text and controls > max(2, len(text) // 100):
        raise ImportFileError("the file is not a CSV text file: it holds binary data")
    return encoding


def normalize_header(name: str) -> str:
    """A header name reduced for matching: no BOM, no accents, lowercase, words by spaces."""
    stripped = unicodedata.normalize("NFKD", name.replace("\ufeff", ""))
    ascii_only = "".join(char for char in stripped if not unicodedata.combining(char))
    return " ".join(re.sub(r"[^a-z0-9]+", " ", ascii_only.lower()).split())


def map_fields(columns: tuple[str, ...]) -> dict[str, int]:
    """Our field → column index, for the columns whose (normalized) name we recognise."""
    normalized = [normalize_header(column) for column in columns]
    mapping: dict[str, int] = {}
    for field_name, spellings in FIELD_NAMES.items():
        for spelling in spellings:
            if spelling in normalized:
                mapping[field_name] = normalized.index(spelling)
                break
    return mapping


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _connect() -> duckdb.DuckDBPyConnection:
    # Imported on first use: loading DuckDB's library takes ~0.4 s, which a worker that never
    # runs an import (and every API or CLI start) should not pay.
    import duckdb

    # One thread and a small memory budget: the reader is a stream, not an analytic query, and it
    # shares the worker process with the job's other slots. DuckDB keeps freed buffers up to its
    # memory limit, so the limit is what bounds the reader's footprint (measured: about 60 MB on
    # top of the interpreter for a 1,000,000-row file, whatever its size).
    return duckdb.connect(config={"threads": 1, "memory_limit": _DUCKDB_MEMORY})


def screen_file(path: Path) -> screening.Screened | None:
    """The file screened line by line (:mod:`jobs_imports.screening`), or None if it holds
    nothing. Read the returned ``path`` (the file itself, or its screened copy) and pass the
    result to :func:`iter_batches`; :meth:`~screening.Screened.discard` it when done.

    Raises :class:`ImportFileError` for a file that is not CSV text or has too many columns.
    """
    with path.open("rb") as handle:
        prefix = handle.read(_SNIFF_BYTES)
    if not prefix.strip() or prefix.strip() in (codecs.BOM_UTF8, codecs.BOM_UTF16_LE):
        return None
    try:
        return screening.screen(path, _encoding_of(prefix))
    except screening.TooManyColumns as error:
        raise ImportFileError(str(error)) from None


def detect_format(path: Path) -> CsvFormat | None:
    """The file's format, or None if it holds nothing (no byte but whitespace).

    Raises :class:`ImportFileError` for a file that is not CSV text or has no url column.
    """
    import duckdb

    with path.open("rb") as handle:
        prefix = handle.read(_SNIFF_BYTES)
    if not prefix.strip() or prefix.strip() in (codecs.BOM_UTF8, codecs.BOM_UTF16_LE):
        return None
    encoding = _encoding_of(prefix)
    with _connect() as con:
        try:
            # ignore_errors: the sniffer then settles on the header's dialect even when a few
            # records are malformed (those become row errors when the file is read).
            row = con.execute(
                "SELECT Delimiter, Quote, Escape, Columns FROM sniff_csv("
                f"{_sql_string(str(path))}, encoding={_sql_string(encoding)}, "
                "header=true, ignore_errors=true, "
                f"max_line_size={_MAX_LINE_BYTES}, buffer_size={_BUFFER_BYTES})"
            ).fetchone()
        except duckdb.Error as error:
            raise ImportFileError(
                f"the file could not be read as CSV: {_first_line(error)}"
            ) from error
    if row is None:  # pragma: no cover - sniff_csv always answers one row
        raise ImportFileError("the file could not be read as CSV")
    delimiter, quote, escape, sniffed = row
    columns = tuple(str(column["name"]).replace("\ufeff", "").strip() for column in sniffed)
    fields = map_fields(columns)
    if "url" not in fields:
        shown = ", ".join(repr(column) for column in columns[:20])
        raise ImportFileError(
            "no url column: the first line must be a header naming the page URL column "
            f"(url, page, address, landing page, ...); found columns: {shown}"
        )
    # A sample without quotes sniffs as "no quote"; RFC 4180 quoting is still what a later
    # record with a comma in a query will use.
    quote = quote if quote and quote != "(empty)" else '"'
    escape = escape if escape and escape != "(empty)" else quote
    return CsvFormat(
        encoding=encoding,
        delimiter=delimiter,
        quote=quote,
        escape=escape,
        columns=columns,
        fields=fields,
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# ---- reading ------------------------------------------------------------------------------------


def _read_csv(path: Path, fmt: CsvFormat) -> str:
    """The ``read_csv`` call of the file: every column text, one sentinel column past the last."""
    names = [f"c{index}" for index in range(len(fmt.columns))] + [_EXTRA]
    columns = ", ".join(f"{_sql_string(name)}: 'VARCHAR'" for name in names)
    return (
        f"read_csv({_sql_string(str(path))}, auto_detect=false, header=true, "
        f"encoding={_sql_string(fmt.encoding)}, delim={_sql_string(fmt.delimiter)}, "
        f"quote={_sql_string(fmt.quote)}, escape={_sql_string(fmt.escape)}, "
        f"columns={{{columns}}}, null_padding=true, strict_mode=false, parallel=false, "
        f"max_line_size={_MAX_LINE_BYTES}, buffer_size={_BUFFER_BYTES}, "
        f"nullstr={_sql_string(_NULL_SENTINEL)})"
    )


def _spaces_removed(column: str) -> str:
    # spaces, and the no-break spaces some locales use as thousands separators
    return f"regexp_replace(trim({column}), '[\\s\u00a0\u202f]', '', 'g')"


def _integer(column: str) -> str:
    cleaned = _spaces_removed(column)
    grouped = f"regexp_full_match({cleaned}, '\\d{{1,3}}([,.]\\d{{3}})+')"
    digits = (
        f"CASE WHEN {grouped} THEN regexp_replace({cleaned}, '[,.]', '', 'g') ELSE {cleaned} END"
    )
    return f"TRY_CAST({digits} AS BIGINT)"


def _decimal(column: str) -> str:
    cleaned = _spaces_removed(column)
    return f"TRY_CAST(replace(rtrim({cleaned}, '%'), ',', '.') AS DOUBLE)"


def _ctr(column: str) -> str:
    percent = f"{_spaces_removed(column)} LIKE '%\\%' ESCAPE '\\'"
    value = _decimal(column)
    return f"CASE WHEN {percent} THEN {value} / 100 ELSE {value} END"


def _date(column: str) -> str:
    text = f"trim({column})"
    return (
        f"COALESCE(TRY_CAST({text} AS DATE), TRY_STRPTIME({text}, '%d/%m/%Y')::DATE, "
        f"TRY_STRPTIME({text}, '%Y/%m/%d')::DATE)"
    )


def _records_query(path: Path, fmt: CsvFormat, screened: bool = False) -> str:
    """SELECT the converted values and a ``problem`` per record, in file order."""
    count = len(fmt.columns)

    def col(name: str) -> str | None:
        index = fmt.fields.get(name)
        return None if index is None else f"c{index}"

    def present(column: str) -> str:
        return f"NULLIF(trim({column}), '')"

    converted: dict[str, str] = {}
    # a marker record of the screening (a replaced line): its reason is looked up in Python
    marker = [f"WHEN starts_with(c0, chr({ord(screening.MARKER)})) THEN c0"] if screened else []
    checks: list[str] = [
        *marker,
        f"WHEN {_EXTRA} IS NOT NULL THEN 'too many fields: the header has {count}'",
        f"WHEN c{count - 1} IS NULL THEN 'missing fields: the header has {count}'",
    ]
    url = col("url")
    assert url is not None  # detect_format refuses a file without one
    converted["url"] = present(url)
    checks.append(f"WHEN {present(url)} IS NULL THEN 'url is empty'")
    for name in ("query", "country", "device"):
        column = col(name)
        converted[name] = "NULL" if column is None else present(column)
    for name, convert, rule, rule_text in (
        ("clicks", _integer, "{v} < 0", "is negative"),
        ("impressions", _integer, "{v} < 0", "is negative"),
        ("ctr", _ctr, "{v} < 0 OR {v} > 1", "is not between 0 and 1 (or 0 % and 100 %)"),
        ("position", _decimal, "{v} <= 0", "must be positive"),
    ):
        column = col(name)
        if column is None:
            converted[name] = "NULL"
            continue
        value = convert(column)
        kind = "a whole number" if convert is _integer else "a number"
        converted[name] = value
        checks.append(
            f"WHEN {present(column)} IS NOT NULL AND {value} IS NULL THEN "
            f"'{name} is not {kind}: ' || left(trim({column}), 40)"
        )
        checks.append(
            f"WHEN {rule.format(v=value)} THEN '{name} {rule_text}: ' || left(trim({column}), 40)"
        )
    day = col("date")
    if day is None:
        converted["date"] = "NULL"
    else:
        converted["date"] = _date(day)
        checks.append(
            f"WHEN {present(day)} IS NOT NULL AND {_date(day)} IS NULL THEN "
            f"'date is not a date (YYYY-MM-DD or DD/MM/YYYY): ' || left(trim({day}), 40)"
        )
    empty = " AND ".join(f"COALESCE(trim(c{index}), '') = ''" for index in range(count))
    empty = f"({empty} AND {_EXTRA} IS NULL)"
    problem = "CASE " + " ".join(checks) + " END"
    return (
        f"SELECT {converted['url']}, {converted['query']}, {converted['clicks']}, "
        f"{converted['impressions']}, {converted['ctr']}, {converted['position']}, "
        f"{converted['date']}, {converted['country']}, {converted['device']}, "
        f"CASE WHEN {empty} THEN NULL ELSE {problem} END, {empty} "
        f"FROM {_read_csv(path, fmt)}"
    )


def count_records(path: Path, fmt: CsvFormat) -> int:
    """How many records follow the header (the ``total`` of the import's progress)."""
    import duckdb

    with _connect() as con:
        try:
            row = con.execute(f"SELECT count(*) FROM {_read_csv(path, fmt)}").fetchone()
        except duckdb.Error as error:
            raise ImportFileError(
                f"the file could not be read as CSV: {_first_line(error)}"
            ) from error
    return int(row[0]) if row is not None else 0


def iter_batches(
    path: Path,
    fmt: CsvFormat,
    *,
    start: int = 0,
    batch_size: int = 5000,
    screened: screening.Screened | None = None,
) -> Iterator[list[Record]]:
    """Batches of at most ``batch_size`` records, in file order, skipping the first ``start``.

    DuckDB streams the result (``fetchmany`` on an open cursor): at most one batch of converted
    records is held in Python at a time. ``parallel=false`` keeps the record order, hence the
    line numbers, identical from one run to the next — what makes ``start`` a safe resume point.
    """
    import duckdb

    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    marked = screened is not None and bool(screened.reasons)
    query = _records_query(path, fmt, screened=marked)
    if start:
        query += f" OFFSET {int(start)}"
    line_no = 1 + start  # the header is line 1
    with _connect() as con:
        try:
            cursor = con.execute(query)
            while True:
                rows = cursor.fetchmany(batch_size)
                if not rows:
                    return
                batch = []
                for row in rows:
                    line_no += 1
                    record = Record(line_no, *row)
                    if marked and record.problem is not None and screened is not None:
                        reason = screened.reason(record.problem)
                        if reason is not None:
                            record = record._replace(problem=reason)
                    batch.append(record)
                yield batch
        except duckdb.Error as error:
            raise ImportFileError(
                f"the file could not be read past line {line_no}: {_first_line(error)}"
            ) from error
