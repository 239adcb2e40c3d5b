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
    forced = upload(module, target, CLEAN, "copy.csv", force=True)  # imported again on purpose
    assert first.record.file_sha256 == forced.record.file_sha256
    assert first.record.file_path == forced.record.file_path
    sha = first.record.file_sha256
    assert first.record.file_path == f"imports/{sha[:2]}/{sha}.csv"
    assert first.record.original_name == "../../etc/passwd"  # kept for display only
    stored = list((data_dir / "imports").rglob("*.csv"))
    assert [path.name for path in stored] == [f"{sha}.csv"]
    assert first.record.id != forced.record.id
    drain(module)
    assert len(rows_of(module, first.record.id)) == len(rows_of(module, forced.record.id)) == 4


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

    crashed = upload(module, target, content, "crashed.csv", force=True)  # the same content
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
