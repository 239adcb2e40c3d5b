"""jobs from another tree (e.g. main), as a system of its own for the shared peer harness.

``bench/peers.sh`` adds it when ``PEERS_BASELINE`` names a tree with its own ``.venv`` (``uv
sync`` there): the harness then measures this tree's jobs and that tree's in the same run, rounds
alternated with the peers, so "the default drain at least 2x main" is a same-round ratio
(``bench.peers_report``). The adapter is that tree's ``bench/bench_jobs.py``, run by that tree's
interpreter with that tree's packages; only its name changes.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

TREE = Path(os.environ.get("JOBS_PEERS_BASELINE_TREE", "")).resolve()
if not (TREE / "bench" / "bench_jobs.py").is_file():
    raise SystemExit(f"bench_jobsmain: no bench/bench_jobs.py in {TREE} (JOBS_PEERS_BASELINE_TREE)")
sys.path.insert(0, str(TREE))
_spec = importlib.util.spec_from_file_location("bench_jobs", TREE / "bench" / "bench_jobs.py")
if _spec is None or _spec.loader is None:
    raise SystemExit(f"bench_jobsmain: cannot load {TREE}/bench/bench_jobs.py")
bench_jobs = importlib.util.module_from_spec(_spec)
sys.modules["bench_jobs"] = bench_jobs  # the harness's convention: handlers live in a module
_spec.loader.exec_module(bench_jobs)


class JobsMainAdapter(bench_jobs.JobsAdapter):  # type: ignore[misc, name-defined]
    """The other tree's adapter under the name ``jobsmain``."""

    name = "jobsmain"


if __name__ == "__main__":
    import harness  # type: ignore[import-not-found]

    harness.main(JobsMainAdapter())
