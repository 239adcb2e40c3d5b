"""The DuckDB reader on its own: format detection, value conversion, batches and offsets."""

from __future__ import annotations

import codecs
import re
from datetime import date
from pathlib import Path

import pytest
from jobs_imports.csvfile import (
    ImportFileError,
    count_records,
    detect_format,
    iter_batches,
    map_fields,
    normalize_header,
)


def write(tmp_path: Path, content: bytes | str, name: str = "f.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def records(path: Path, start: int = 0, batch_size: int = 1000) -> list[tuple[object, ...]]:
    fmt = detect_format(path)
    assert fmt is not None
    return [
        (r.line_no, r.url, r.clicks, r.impressions, r.ctr, r.position, r.day, r.problem, r.empty)
        for batch in iter_batches(path, fmt, start=start, batch_size=batch_size)
        for r in batch
    ]


@pytest.mark.parametrize(
    ("header", "field"),
    [
        ("Top pages", "url"),
        ("Pages les plus populaires", "url"),
        ("\ufeffURL", "url"),
        ("Address", "url"),
        ("Landing Page", "url"),
        ("Requêtes les plus fréquentes", "query"),
        ("Clics", "clicks"),
        ("Avg. Position", "position"),
        ("Position moyenne", "position"),
        ("Taux de clics", "ctr"),
        ("Jour", "date"),
    ],
)
def test_header_spellings_of_search_tools_map_to_fields(header: str, field: str) -> None:
    assert map_fields(("Other", header)) == {field: 1}


def test_headers_are_normalized_for_matching() -> None:
    assert normalize_header("  Avg.  Position ") == "avg position"
    assert normalize_header("\ufeffRequêtes_les-plus") == "requetes les plus"


def test_the_most_specific_url_column_wins() -> None:
    assert map_fields(("Address", "URL", "Clicks"))["url"] == 1


def test_comma_file_with_quotes_and_locale_values(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "Page,Clicks,Impressions,CTR,Position,Date\n"
        'https://e.com/a,"1,234",2 000,"12,5 %",3.25,2025-03-04\n'
        "https://e.com/b,7,70,0.1,4,04/03/2025\n"
        "https://e.com/c,,,,,\n",
    )
    fmt = detect_format(path)
    assert fmt is not None
    assert (fmt.delimiter, fmt.encoding) == (",", "utf-8")
    assert count_records(path, fmt) == 3
    assert records(path) == [
        (2, "https://e.com/a", 1234, 2000, 0.125, 3.25, date(2025, 3, 4), None, False),
        (3, "https://e.com/b", 7, 70, 0.1, 4.0, date(2025, 3, 4), None, False),
        (4, "https://e.com/c", None, None, None, None, None, None, False),
    ]


def test_tab_and_pipe_delimiters(tmp_path: Path) -> None:
    for delimiter in ("\t", "|", ";"):
        path = write(
            tmp_path,
            f"url{delimiter}clicks\nhttps://e.com/{delimiter}3\n".replace(
                f"/{delimiter}", f"/x{delimiter}"
            ),
        )
        fmt = detect_format(path)
        assert fmt is not None
        assert fmt.delimiter == delimiter
        assert records(path)[0][1:3] == ("https://e.com/x", 3)


def test_encodings(tmp_path: Path) -> None:
    text = "Page,Clicks\nhttps://e.com/é,1\n"
    cases = {
        "utf-8": text.encode(),
        "utf-8-bom": codecs.BOM_UTF8 + text.encode(),
        "latin-1": text.encode("latin-1"),
        "utf-16": text.encode("utf-16"),
    }
    for name, content in cases.items():
        path = write(tmp_path, content, f"{name}.csv")
        assert records(path)[0][1] == "https://e.com/é", name


def test_structural_defects_are_row_problems(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "Page,Clicks,Impressions\n"
        "https://e.com/a,1,2\n"
        "https://e.com/b,1\n"
        "https://e.com/c,1,2,3\n"
        ",,\n"
        '"https://e.com/d",x,2\n',
    )
    got = [(line, problem, empty) for line, *_, problem, empty in records(path)]
    assert got == [
        (2, None, False),
        (3, "missing fields: the header has 3", False),
        (4, "too many fields: the header has 3", False),
        (5, None, True),
        (6, "clicks is not a whole number: x", False),
    ]


def test_batches_are_bounded_in_order_and_resume_at_any_offset(tmp_path: Path) -> None:
    lines = "".join(f"https://e.com/{i},{i}\n" for i in range(23))
    path = write(tmp_path, "url,clicks\n" + lines)
    fmt = detect_format(path)
    assert fmt is not None
    sizes = [len(batch) for batch in iter_batches(path, fmt, batch_size=5)]
    assert sizes == [5, 5, 5, 5, 3]
    full = records(path, batch_size=5)
    for start in (0, 1, 5, 22, 23):
        assert records(path, start=start, batch_size=4) == full[start:]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"PK\x03\x04rest-of-a-zip", "Excel workbook (.xlsx)"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "Excel 97-2003"),
        (b"\x1f\x8b\x08\x00", "gzip"),
        (b"%PDF-1.7\n", "PDF"),
        (b"abc\x00def\n", "NUL bytes"),
        (b"hello world\n", "no url column"),
        (b"clicks,impressions\n1,2\n", "found columns: 'clicks', 'impressions'"),
    ],
)
def test_files_that_are_not_usable_csv(tmp_path: Path, content: bytes, message: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(ImportFileError, match=re.escape(message)):
        detect_format(path)


def test_empty_files_have_no_format(tmp_path: Path) -> None:
    for content in (b"", b"  \n\n", codecs.BOM_UTF8):
        assert detect_format(write(tmp_path, content)) is None


def test_invalid_utf8_after_the_sniffed_prefix_is_a_clear_error(tmp_path: Path) -> None:
    good = "".join(f"https://e.com/{i},1\n" for i in range(10_000))  # > the 64 KiB prefix
    path = write(tmp_path, b"url,clicks\n" + good.encode() + b"https://e.com/\xe9,1\n")
    fmt = detect_format(path)
    assert fmt is not None
    assert fmt.encoding == "utf-8"
    with pytest.raises(ImportFileError, match="could not be read past line"):
        records(path)
