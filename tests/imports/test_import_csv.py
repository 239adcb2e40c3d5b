"""``import_csv`` end to end on PostgreSQL: upload, run the job, read the rows and the report."""

from __future__ import annotations

import codecs
import json
import uuid
from datetime import date
from typing import TYPE_CHECKING, Any

import pytest
from jobs_core import FakeClock, JobContext, Status
from jobs_imports.registry import build_module
from sqlalchemy import text

from tests.imports.helpers import (
    HEADER,
    ORG,
    claim_one,
    context_for,
    drain,
    job_of,
    queued,
    rows_of,
    run_job,
    run_next,
    upload,
)

if TYPE_CHECKING:
    from pathlib import Path

    from jobs_imports.registry import ImportsModule
    from jobs_imports.service import SiteTarget
    from sqlalchemy import Engine

pytestmark = pytest.mark.postgres

CLEAN = HEADER + (
    "https://www.example.com/a,shoes,10,100,10%,1.5,2025-01-01\n"
    "https://www.example.com/a/,boots,5,50,10%,2.5,2025-01-01\n"
    "/b?utm_source=news&x=1,shoes,0,10,0%,8,2025-01-02\n"
    'https://WWW.EXAMPLE.COM:443/c#top,"red, shoes",1,4,25%,3,2025-01-02\n'
)


def test_clean_import_reports_its_figures_and_requests_a_reconcile(
    module: ImportsModule, target: SiteTarget
) -> None:
    view = upload(module, target, CLEAN)
    assert view.status == "pending"
    assert view.job is not None
    assert view.job.type == "import_csv"
    assert view.job.dedup_key == f"import_csv:{view.record.id}"
    assert view.job.payload == {
        "import_id": str(view.record.id),
        "site_target_id": str(target.id),
    }

    job = run_next(module, "import_csv")
    assert job is not None
    assert job.status is Status.DONE, job.error
    report = dict(job.report or {})
    assert {k: report[k] for k in ("read", "inserted", "skipped", "errors")} == {
        "read": 4,
        "inserted": 4,
        "skipped": 0,
        "errors": 0,
    }
    assert report["error_samples"] == []
    assert report["format"]["delimiter"] == ","
    assert report["format"]["mapped"]["url"] == "Page"
    assert job.progress is not None
    assert (job.progress["done"], job.progress["total"]) == (4, 4)

    done = module.service.get_import(ORG, view.record.id)
    assert done.status == "done"
    record = done.record
    counts = (record.rows_read, record.rows_inserted, record.rows_skipped, record.rows_errors)
    assert counts == (4, 4, 0, 0)
    assert record.finished_at is not None
    assert record.started_at is not None

    rows = rows_of(module, view.record.id)
    assert [row[0] for row in rows] == [2, 3, 4, 5]
    assert [row[2] for row in rows] == [
        "https://www.example.com/a",
        "https://www.example.com/a",
        "https://www.example.com/b?x=1",
        "https://www.example.com/c",
    ]
    assert rows[0][3:] == ("shoes", 10, 100, 0.1, 1.5, date(2025, 1, 1))
    assert rows[3][3] == "red, shoes"
    assert rows[3][6] == 0.25

    reconciles = queued(module, ORG, "map_reconcile")
    assert len(reconciles) == 1
    assert reconciles[0].dedup_key == f"map_reconcile:{target.id}"
    assert reconciles[0].payload == {"site_target_id": str(target.id)}
    assert report["reconcile_job_id"] == str(reconciles[0].id)


BAD = HEADER + (
    "https://www.example.com/ok,q,1,10,10%,1,2025-01-01\n"  # 2 ok
    "https://www.example.com/x,q,many,10,10%,1,2025-01-01\n"  # 3 clicks
    "https://www.example.com/x,q,1,-4,10%,1,2025-01-01\n"  # 4 impressions < 0
    "https://www.example.com/x,q,1,10,140%,1,2025-01-01\n"  # 5 ctr > 100 %
    "https://www.example.com/x,q,1,10,10%,0,2025-01-01\n"  # 6 position 0
    "https://www.example.com/x,q,1,10,10%,1,yesterday\n"  # 7 date
    ",q,1,10,10%,1,2025-01-01\n"  # 8 no url
    "ftp://www.example.com/x,q,1,10,10%,1,2025-01-01\n"  # 9 scheme
    "https://www.example.com/x,q,1\n"  # 10 missing fields
    "https://www.example.com/x,q,1,10,10%,1,2025-01-01,extra\n"  # 11 too many fields
    ",,,,,,\n"  # 12 empty record: skipped
    "https://www.example.com/ok,q,1,10,10%,1,2025-01-01\n"  # 13 same as line 2: skipped
    "https://www.example.com/ok,q,1,10,10%,1,2025-01-02\n"  # 14 another day: ok
)


def test_bad_rows_are_counted_with_their_line_and_reason(
    module: ImportsModule, target: SiteTarget
) -> None:
    view = upload(module, target, BAD)
    job = run_next(module, "import_csv")
    assert job is not None
    assert job.status is Status.DONE, job.error
    report = dict(job.report or {})
    assert (report["read"], report["inserted"], report["skipped"], report["errors"]) == (
        13,
        2,
        2,
        9,
    )
    reasons = {sample["line"]: sample["reason"] for sample in report["error_samples"]}
    assert sorted(reasons) == [3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert reasons[3] == "clicks is not a whole number: many"
    assert reasons[4].startswith("impressions is negative")
    assert reasons[5].startswith("ctr is not between 0 and 1")
    assert reasons[6].startswith("position must be positive")
    assert reasons[7].startswith("date is not a date")
    assert reasons[8] == "url is empty"
    assert "unsupported scheme 'ftp'" in reasons[9]
    assert reasons[10].startswith("missing fields")
    assert reasons[11].startswith("too many fields")
    assert [row[0] for row in rows_of(module, view.record.id)] == [2, 14]


def test_a_bom_and_semicolons_with_french_headers_and_numbers(
    module: ImportsModule, target: SiteTarget
) -> None:
    content = (
        codecs.BOM_UTF8
        + (
            "Pages les plus populaires;Clics;Impressions;CTR;Position\n"
            "https://www.example.com/été;1 234;10 000;12,34 %;3,2\n"
            "https://www.example.com/b;0;5;0 %;12\n"
        ).encode()
    )
    view = upload(module, target, content)
    job = run_next(module, "import_csv")
    assert job is not None
    assert job.status is Status.DONE, job.error
    report = dict(job.report or {})
    assert report["format"]["delimiter"] == ";"
    assert report["format"]["encoding"] == "utf-8"
    assert report["format"]["columns"][0] == "Pages les plus populaires"  # BOM gone
    assert (report["read"], report["inserted"], report["errors"]) == (2, 2, 0)
    rows = rows_of(module, view.record.id)
    assert rows[0][1] == "https://www.example.com/été"
    assert rows[0][2] == "https://www.example.com/%C3%A9t%C3%A9"
    assert rows[0][4:8] == (1234, 10000, pytest.approx(0.1234), 3.2)


def test_latin1_and_utf16_files_are_decoded(module: ImportsModule, target: SiteTarget) -> None:
    latin = "Page,Clicks\nhttps://www.example.com/café,3\n".encode("latin-1")
    utf16 = "Page\tClicks\nhttps://www.example.com/café\t4\n".encode("utf-16")
    first = upload(module, target, latin, "latin.csv")
    second = upload(module, target, utf16, "excel.txt")
    drain(module)
    for view, clicks in ((first, 3), (second, 4)):
        rows = rows_of(module, view.record.id)
        assert [(row[1], row[4]) for row in rows] == [("https://www.example.com/café", clicks)]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, "not a CSV file: it looks like a PNG"),
        (b"PK\x03\x04" + b"\x00" * 200, "Excel workbook (.xlsx)"),
        (bytes(range(1, 32)) * 50, "not a CSV text file"),
        (b'{"url": "https://www.example.com/", "clicks": 3}\n', "no url column"),
        (b"Query,Clicks\nshoes,3\n", "no url column"),
    ],
    ids=["png", "xlsx", "binary", "json", "queries-export"],
)
def test_a_file_that_is_not_a_usable_csv_fails_with_a_clear_error(
    module: ImportsModule, target: SiteTarget, content: bytes, message: str
) -> None:
    view = upload(module, target, content)
    job = run_next(module, "import_csv")
    assert job is not None
    assert job.status is Status.FAILED
    assert job.attempts == 1  # a deterministic failure is not retried
    assert job.error is not None
    assert job.error.startswith("ImportFileError: ")
    assert message in job.error
    failed = module.service.get_import(ORG, view.record.id)
    assert failed.status == "failed"  # on_fail made the domain consistent
    assert failed.record.status == "failed"
    assert failed.error == job.error
    assert rows_of(module, view.record.id) == []
    assert queued(module, ORG, "map_reconcile") == []  # nothing imported, nothing to map


@pytest.mark.parametrize(
    "content",
    [b"", b"\n\n  \n", codecs.BOM_UTF8, HEADER.encode()],
    ids=["zero", "blank", "bom", "header"],
)
def test_an_empty_file_is_a_done_import_of_zero_rows(
    module: ImportsModule, target: SiteTarget, content: bytes
) -> None:
    view = upload(module, target, content)
    job = run_next(module, "import_csv")
    assert job is not None
    assert job.status is Status.DONE, job.error
    report = dict(job.report or {})
    assert (report["read"], report["inserted"], report["skipped"], report["errors"]) == (0, 0, 0, 0)
    assert report.get("empty", False) is (content != HEADER.encode())
    assert module.service.get_import(ORG, view.record.id).status == "done"


def test_the_report_keeps_the_first_100_errors_and_counts_them_all(
    module: ImportsModule, target: SiteTarget
) -> None:
    lines = [f"https://www.example.com/{i},q,NaN-{i},1,1%,1,2025-01-01" for i in range(250)]
    upload(module, target, HEADER + "\n".join(lines) + "\n")
    job = run_next(module, "import_csv")
    assert job is not None
    report = dict(job.report or {})
    assert report["errors"] == 250
    assert len(report["error_samples"]) == 100
    assert [sample["line"] for sample in report["error_samples"]] == list(range(2, 102))


def test_the_same_content_uploaded_twice_is_stored_once_under_its_hash(
    module: ImportsModule, target: SiteTarget, data_dir: Path
) -> None:
    first = upload(module, target, CLEAN, "../../etc/passwd")
    second = upload(module, target, CLEAN, "copy.csv")
    assert first.record.file_sha256 == second.record.file_sha256
    assert first.record.file_path == second.record.file_path
    sha = first.record.file_sha256
    assert first.record.file_path == f"imports/{sha[:2]}/{sha}.csv"
    assert first.record.original_name == "../../etc/passwd"  # kept for display only
    stored = list((data_dir / "imports").rglob("*.csv"))
    assert [path.name for path in stored] == [f"{sha}.csv"]
    assert first.record.id != second.record.id
    drain(module)
    assert len(rows_of(module, first.record.id)) == len(rows_of(module, second.record.id)) == 4


# ---- resume -------------------------------------------------------------------------------------


class CrashAfter(Exception):
    """Stands for the process dying: raised from inside the handler between two batches."""


class CrashingContext(JobContext):
    """A worker context that 'dies' at the n-th check between batches (a crash injection)."""

    def __init__(self, base: JobContext, crash_at: int) -> None:
        super().__init__(base.job, progress_sink=base._sink, now=base._now)
        self.checks = 0
        self.crash_at = crash_at

    def raise_if_cancelled(self) -> None:
        self.checks += 1
        if self.checks == self.crash_at:
            raise CrashAfter(f"crash before batch {self.crash_at}")
        super().raise_if_cancelled()


def _many_rows(count: int) -> str:
    lines = []
    for i in range(count):
        if i % 7 == 3:
            lines.append(f"https://www.example.com/p{i},q,bad,1,1%,1,2025-01-01")
        elif i % 11 == 5:
            lines.append(lines[-1] if lines else ",,,,,,")  # a repeat: skipped
        else:
            lines.append(f"https://www.example.com/p{i % 9},q{i},{i},{i * 10},1%,2,2025-01-01")
    return HEADER + "\n".join(lines) + "\n"


def _figures(module: ImportsModule, import_id: uuid.UUID) -> tuple[Any, ...]:
    view = module.service.get_import(ORG, import_id)
    report = dict(view.record.report or {})
    report.pop("reconcile_job_id")
    rows = [row[:2] + row[3:] for row in rows_of(module, import_id)]
    return view.status, report, rows


@pytest.mark.parametrize("crash_at", [1, 2, 5, 9])
def test_a_crash_between_batches_resumes_from_the_checkpoint_with_a_clean_runs_result(
    imports_engine: Engine, data_dir: Path, crash_at: int
) -> None:
    clock = FakeClock()
    module = build_module(imports_engine, data_dir, clock=clock, batch_size=3)
    target = module.service.create_site_target(ORG, "Example", "www.example.com")
    content = _many_rows(25)  # 9 batches of 3

    clean = upload(module, target, content, "clean.csv")
    run_next(module, "import_csv")
    expected = _figures(module, clean.record.id)
    assert expected[1]["read"] == 25

    crashed = upload(module, target, content, "crashed.csv")
    job = claim_one(module, "import_csv")
    assert job is not None
    assert job.payload["import_id"] == str(crashed.record.id)
    with pytest.raises(CrashAfter):
        module.registry.get("import_csv").handler(
            CrashingContext(context_for(module, job), crash_at)
        )
    before = job_of(module, ORG, job.id)
    assert before.status is Status.RUNNING  # the dead attempt left its checkpoint behind
    saved = dict(before.progress or {})["checkpoint"]
    assert len(rows_of(module, crashed.record.id)) == saved["inserted"]
    assert saved["records"] == 3 * (crash_at - 1)

    clock.advance(700)
    swept = module.service.jobs.sweep(threshold_s=600)
    assert [j.id for j in swept.requeued] == [job.id]
    again = claim_one(module, "import_csv")
    assert again is not None
    assert again.id == job.id
    assert again.attempts == 2
    finished = run_job(module, again)
    assert finished.status is Status.DONE, finished.error

    assert _figures(module, crashed.record.id) == expected
    # the reconcile of the target was requested once per import, never lost
    assert len(queued(module, ORG, "map_reconcile")) == 1


def test_a_rerun_after_the_final_commit_returns_the_same_report(
    module: ImportsModule, target: SiteTarget
) -> None:
    view = upload(module, target, CLEAN)
    job = claim_one(module, "import_csv")
    assert job is not None
    handler = module.registry.get("import_csv").handler
    first = handler(context_for(module, job))
    # the worker died before recording the outcome: the next attempt finds the import done
    second = handler(context_for(module, job))
    assert first == second
    assert len(rows_of(module, view.record.id)) == 4


def test_a_checkpoint_that_disagrees_with_the_table_starts_over(
    module: ImportsModule, target: SiteTarget
) -> None:
    view = upload(module, target, CLEAN)
    job = claim_one(module, "import_csv")
    assert job is not None
    with module.service.engine.begin() as conn:  # a progress document from elsewhere
        conn.execute(
            text("UPDATE jobs SET progress = CAST(:p AS jsonb) WHERE id = :id"),
            {
                "id": job.id,
                "p": json.dumps(
                    {
                        "checkpoint": {
                            "import_id": str(view.record.id),
                            "records": 3,
                            "read": 3,
                            "inserted": 3,
                            "skipped": 0,
                            "errors": 0,
                        }
                    }
                ),
            },
        )
    refreshed = job_of(module, ORG, job.id)
    finished = run_job(module, refreshed)
    assert finished.status is Status.DONE
    assert dict(finished.report or {})["inserted"] == 4
    assert len(rows_of(module, view.record.id)) == 4


def test_a_foreign_or_unknown_import_id_fails_the_job(
    module: ImportsModule, target: SiteTarget, target_b: SiteTarget
) -> None:
    view = upload(module, target_b, CLEAN)
    job = module.service.jobs.enqueue(
        ORG,
        "import_csv",
        {"import_id": str(view.record.id), "site_target_id": str(target.id)},
    ).job
    claimed = claim_one(module, "import_csv")
    assert claimed is not None
    if claimed.id != job.id:  # the other org's own job came first: run it and take ours
        run_job(module, claimed)
        claimed = claim_one(module, "import_csv")
        assert claimed is not None
    finished = run_job(module, claimed)
    assert finished.status is Status.FAILED
    assert "does not exist" in (finished.error or "")
    # the other org's import was not touched by the foreign job
    assert module.service.get_import(target_b.org_id, view.record.id).status in ("done", "pending")


# ---- hostile files (issue 11, findings 2 and 6) ----------------------------------------------


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
    with imports_engine.begin() as conn:
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
    assert list(_errors(report)) == [3]
    assert _errors(report)[3].startswith("the database refused the record")
    assert (report["read"], report["inserted"], report["errors"]) == (4, 3, 1)
    assert report["lines"] == [2, 4, 5]
