"""The README and the docs stay true: every relative link resolves, the README stays short, and
its smallest module runs as written."""

from __future__ import annotations

import re
import types
from pathlib import Path
from urllib.parse import unquote

import pytest
from jobs_core.modules import Module, ModuleContext
from jobs_core.testing import JobsHarness

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MAX_LINES = 200  # issue 28: a newcomer reads it whole; everything else is in docs/

# [text](target) and ![alt](target); a target ends at the first space or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def markdown_pages() -> list[Path]:
    """The README, every page under docs/ and the benchmark summaries."""
    return [
        README,
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "bench" / "results").glob("*.md")),
    ]


def relative_links(page: Path) -> list[str]:
    """The relative link targets of a page, code blocks left out."""
    text = FENCE.sub("", page.read_text())
    targets = [match.group(1) for match in LINK.finditer(text)]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


@pytest.mark.parametrize("page", markdown_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path = unquote(target.split("#", 1)[0])
        if not (page.parent / path).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: links to missing files: {broken}"


def test_the_link_pattern_finds_links() -> None:
    page = ROOT / "docs" / "benchmarks.md"
    assert "../bench/results/run.md" in relative_links(page)
    assert "docs/img/panel.png" in relative_links(README)


def test_the_readme_is_short_and_indexes_every_docs_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    linked = set(relative_links(README))
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages - linked == set(), "docs pages missing from the README's index"


def test_bench_results_hold_one_summary_per_benchmark() -> None:
    results = ROOT / "bench" / "results"
    committed = [p for p in results.iterdir() if p.name != "raw"]
    assert all(p.is_file() and p.suffix == ".md" for p in committed), committed
    for summary in committed:
        assert "Reproduce: `" in summary.read_text(), f"{summary.name} names no command"


def test_the_readme_smallest_module_runs() -> None:
    text = README.read_text()
    code = re.search(r"```python\n(# src/jobs_hello/module.py\n.*?)```", text, re.S)
    assert code is not None, "the README's smallest module is gone"
    namespace = types.ModuleType("jobs_hello_module")
    exec(compile(code.group(1), "README.md", "exec"), namespace.__dict__)
    module = namespace.module
    assert isinstance(module, Module)
    registry = module.registry(ModuleContext(engine=None, database_url=None, data_dir=ROOT))
    harness = JobsHarness(registry)
    harness.enqueue("greet", {"names": ["a", "b"]})
    (job,) = harness.drain()
    assert job.status.value == "done"
    assert job.report == {"greeted": "a, b"}
