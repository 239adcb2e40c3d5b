"""``import_csv`` against hostile files on PostgreSQL (issue 11, findings 2 and 6): huge fields, NUL
bytes, unbalanced quotes and bad encodings past the sniffed prefix, thousands of columns, values the
database refuses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from jobs_core import Status
from sqlalchemy import text

from tests.imports.helpers import (
    HEADER,
    ORG,
    rows_of,
    run_next,
    upload,
)

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule
    from jobs_imports.service import SiteTarget
    from sqlalchemy import Engine

pytestmark = pytest.mark.postgres


def _row(index: int) -> str:
    return f"https://www.example.com/p{index},q{index},1,10,10%,1.5,2025-01-01\n"


def _rows(count: int) -> list[str]:
    return [_row(index) for index in range(count)]


SNIFFED = 64 * 1024  # the prefix the reader sniffs the dialect and the encoding from


def _past_the_sniffed_prefix(bad: int) -> list[str]:
    """Rows whose ``bad``-th lies past the sniffed prefix: long queries (~270 bytes a row), so
    400 rows get there where 2,000 short ones did (each imported row costs the test time)."""
    rows = [
        f"https://www.example.com/p{i},q{i}-{'x' * 200},1,10,10%,1.5,2025-01-01\n"
        for i in range(400)
    ]
    assert len((HEADER + "".join(rows[:bad])).encode()) > SNIFFED
    return rows


def _import(module: ImportsModule, target: SiteTarget, content: bytes) -> dict[str, Any]:
    view = upload(module, target, content)
    job = run_next(module, "import_csv")
    assert job is not None
    assert job.status is Status.DONE, job.error
    report = dict(job.report or {})
    report["lines"] = [row[0] for row in rows_of(module, view.record.id)]
    return report


def _errors(report: dict[str, Any]) -> dict[int, str]:
    return {sample["line"]: sample["reason"] for sample in report["error_samples"]}


def test_a_10_mb_field_is_a_row_error_on_its_own_line(
    module: ImportsModule, target: SiteTarget
) -> None:
    rows = _rows(10)
    rows.insert(
        5, 'https://www.example.com/big,"' + "x" * 10_000_000 + '",1,10,10%,1.5,2025-01-01\n'
    )
    report = _import(module, target, (HEADER + "".join(rows)).encode())
    assert _errors(report) == {7: "the record is longer than 1048576 bytes"}
    assert (report["read"], report["inserted"], report["errors"]) == (11, 10, 1)


def test_a_nul_in_a_query_after_the_first_64_kb_is_a_row_error(
    module: ImportsModule, target: SiteTarget
) -> None:
    rows = _past_the_sniffed_prefix(300)  # ~108 KB: line 302 is past the sniffed prefix
    rows[300] = "https://www.example.com/nul,q\x00x,1,10,10%,1.5,2025-01-01\n"
    report = _import(module, target, (HEADER + "".join(rows)).encode())
    assert _errors(report) == {302: "the record holds a NUL byte"}
    assert (report["read"], report["inserted"], report["errors"]) == (400, 399, 1)


def test_an_unbalanced_quote_swallows_nothing_after_it(
    module: ImportsModule, target: SiteTarget
) -> None:
    rows = _rows(21)
    rows.insert(1, 'https://www.example.com/bad,"unbalanced,1,10,10%,1.5,2025-01-01\n')
    report = _import(module, target, (HEADER + "".join(rows)).encode())
    assert list(_errors(report)) == [3]
    assert "unbalanced quote" in _errors(report)[3]
    assert (report["read"], report["inserted"], report["errors"]) == (22, 21, 1)
    assert report["lines"] == [2, *range(4, 24)]  # the 20 valid records after it are in


def test_latin1_bytes_after_the_first_64_kb_are_a_row_error_naming_the_line(
    module: ImportsModule, target: SiteTarget
) -> None:
    rows = _past_the_sniffed_prefix(300)
    rows[300] = "https://www.example.com/caf,caf\u00e9,1,10,10%,1.5,2025-01-01\n"
    report = _import(module, target, (HEADER + "".join(rows)).encode("latin-1"))
    assert list(_errors(report)) == [302]
    assert "not valid UTF-8" in _errors(report)[302]
    assert (report["inserted"], report["errors"]) == (399, 1)


def test_5000_columns_fail_the_file_with_a_clear_reason(
    module: ImportsModule, target: SiteTarget
) -> None:
    header = ",".join(["Page"] + [f"c{i}" for i in range(4999)]) + "\n"
    line = ",".join(["https://www.example.com/a"] + ["1"] * 4999) + "\n"
    view = upload(module, target, (header + line * 25).encode())  # ~270 KB
    job = run_next(module, "import_csv")
    assert job is not None
    assert job.status is Status.FAILED
    assert "the header has 5000 columns; at most 256" in (job.error or "")
    failed = module.service.get_import(ORG, view.record.id)
    assert failed.status == "failed"


def test_256_columns_are_read(module: ImportsModule, target: SiteTarget) -> None:
    header = ",".join(["Page"] + [f"c{i}" for i in range(255)]) + "\n"
    lines = "".join(
        ",".join([f"https://www.example.com/{n}"] + ["1"] * 255) + "\n" for n in range(300)
    )
    report = _import(module, target, (header + lines).encode())
    assert (report["read"], report["inserted"], report["errors"]) == (300, 300, 0)


def test_a_3000_character_url_is_a_row_error_not_a_failed_import(
    module: ImportsModule, target: SiteTarget
) -> None:
    noise = "".join(f"{n:04x}" for n in range(750))  # 3,000 varied characters
    rows = [_row(0), f"https://www.example.com/{noise},q,1,10,10%,1.5,2025-01-01\n", _row(1)]
    report = _import(module, target, (HEADER + "".join(rows)).encode())
    assert list(_errors(report)) == [3]
    assert "longer than 2048 characters" in _errors(report)[3]
    assert report["lines"] == [2, 4]


def test_a_record_the_database_refuses_is_a_row_error_and_the_batch_goes_on(
    module: ImportsModule, target: SiteTarget, imports_engine: Engine
) -> None:
    # A real refusal by PostgreSQL (SQLSTATE 22001, value too long for the column): the
    # batch holding the record is written again row by row, and only that record is an error.
    # (the view over import_rows pins the column's type: dropped for the test, then re-made
    # from its own definition)
    with imports_engine.begin() as conn:
        view = conn.execute(text("SELECT pg_get_viewdef('site_search_rows'::regclass)")).scalar()
        conn.execute(text("DROP VIEW site_search_rows"))
        conn.execute(text("ALTER TABLE import_rows ALTER COLUMN query TYPE varchar(20)"))
    try:
        rows = _rows(3)
        rows.insert(
            1, "https://www.example.com/long,a query longer than twenty,1,10,10%,1,2025-01-01\n"
        )
        report = _import(module, target, (HEADER + "".join(rows)).encode())
    finally:
        with imports_engine.begin() as conn:
            conn.execute(text("ALTER TABLE import_rows ALTER COLUMN query TYPE text"))
            conn.execute(text(f"CREATE VIEW site_search_rows AS {view}"))
    assert list(_errors(report)) == [3]
    assert _errors(report)[3].startswith("the database refused the record")
    assert (report["read"], report["inserted"], report["errors"]) == (4, 3, 1)
    assert report["lines"] == [2, 4, 5]
