"""A chaos run's settings: the command line, resolved into a :class:`Config`."""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from pathlib import Path

from bench.chaos import plan

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "raw"  # git-ignored; summaries: bench/results/*.md
ORG = "chaos"
FAULTS = ("kill", "terminate", "restart", "blackhole", "cancel")
APP_PREFIX = "chaos-worker-"

EXIT_OK = 0
EXIT_BROKEN = 1
EXIT_USAGE = 2
EXIT_SETUP = 3


class SetupError(RuntimeError):
    """The run could not be set up or did not finish; the message says what to do."""


# -- the command line ------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m bench.chaos``."""
    p = argparse.ArgumentParser(
        prog="python -m bench.chaos",
        description="Run N real workers over M jobs under faults (kill -9, PostgreSQL restarts, "
        "terminated backends, a blackholed link), then check that no job was lost, none ran "
        "twice at once, none exceeded its attempts and every status matches what the handlers "
        "saw. Exit 0: every invariant held; 1: one broke; 3: the run could not be set up.",
        epilog="Rules and how to read the output: docs/chaos.md.",
    )
    g = p.add_argument_group("scale")
    g.add_argument("--workers", type=_positive_int, default=8, help="worker processes (8)")
    g.add_argument("--jobs", type=_positive_int, default=20_000, help="jobs enqueued (20000)")
    g.add_argument("--concurrency", type=_positive_int, default=4, help="slots per worker (4)")
    g.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    g.add_argument(
        "--small",
        action="store_true",
        help="CI pacing: a 3 s sweep threshold, faults packed into the first 10 s, "
        "more long jobs so the blackhole and the kills catch some running",
    )
    g = p.add_argument_group("jobs (see bench/chaos/plan.py)")
    g.add_argument("--mean-ms", type=float, default=40.0, help="mean duration of a job (40)")
    g.add_argument("--long-ratio", type=float, default=None, help="share of long jobs (0.01)")
    g.add_argument(
        "--long-ms",
        type=_range,
        default=None,
        help="long jobs: MIN-MAX ms (threshold+2 s to 2.5 x threshold+2 s)",
    )
    g.add_argument("--retry-p", type=float, default=0.08, help="retryable failure per attempt")
    g.add_argument("--fail-p", type=float, default=0.02, help="definitive failure per attempt")
    g.add_argument("--raise-p", type=float, default=0.02, help="handler bug per attempt")
    g.add_argument("--bad-return-p", type=float, default=0.01, help="non-mapping report")
    g = p.add_argument_group("worker pacing (the JOBS_ settings of every worker)")
    g.add_argument("--sweep-threshold", type=float, default=None, help="seconds (5; --small 3)")
    g.add_argument("--heartbeat", type=float, default=None, help="seconds (threshold / 10)")
    g.add_argument("--sweep-interval", type=float, default=None, help="seconds (threshold / 5)")
    g.add_argument("--worker-log-level", default="WARNING", help="JOBS_LOG_LEVEL (WARNING)")
    g = p.add_argument_group("faults (mean seconds between two of a kind; 0 turns it off)")
    g.add_argument("--kill-every", type=float, default=5.0, help="kill -9 a worker (5)")
    g.add_argument("--terminate-every", type=float, default=8.0, help="terminate backends (8)")
    g.add_argument("--terminate-count", type=_positive_int, default=5, help="backends each (5)")
    g.add_argument("--restart-every", type=float, default=60.0, help="restart PostgreSQL (60)")
    g.add_argument("--blackhole-every", type=float, default=60.0, help="blackhole worker 0 (60)")
    g.add_argument(
        "--no-blackhole",
        action="store_true",
        help="no blackhole fault, and worker 0 connects directly",
    )
    g.add_argument("--blackhole-s", type=float, default=None, help="how long (2x threshold + 2)")
    g.add_argument(
        "--blackhole-wait-s",
        type=float,
        default=30.0,
        help="how long to wait for worker 0 to hold a job that outlasts the threshold (30)",
    )
    g.add_argument("--cancel-every", type=float, default=3.0, help="request cancellations (3)")
    g.add_argument(
        "--first-faults-within",
        type=float,
        default=None,
        help="every fault kind happens once within this many seconds (20; --small 10)",
    )
    g = p.add_argument_group("run")
    g.add_argument("--timeout-s", type=float, default=1800.0, help="give up after (1800)")
    g.add_argument("--progress-s", type=float, default=5.0, help="a progress line every (5)")
    g.add_argument(
        "--out", type=Path, default=RESULTS, help="results directory (bench/results/raw)"
    )
    g.add_argument(
        "--keep-logs",
        action="store_true",
        help="keep the workers' logs (kept anyway when an invariant broke)",
    )
    return p


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _range(text: str) -> tuple[float, float]:
    low, _, high = text.partition("-")
    try:
        values = (float(low), float(high))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MIN-MAX, e.g. 3000-10000: {text!r}") from None
    if not 0 <= values[0] <= values[1]:
        raise argparse.ArgumentTypeError(f"expected 0 <= MIN <= MAX: {text!r}")
    return values


@dataclass(frozen=True, slots=True)
class Config:
    """A run's settings, resolved from the command line."""

    workers: int
    jobs: int
    concurrency: int
    seed: int
    plan: plan.PlanConfig
    sweep_threshold_s: float
    heartbeat_s: float
    sweep_interval_s: float
    worker_log_level: str
    every: dict[str, float]
    terminate_count: int
    blackhole: bool
    blackhole_s: float
    blackhole_wait_s: float
    first_faults_within_s: float
    timeout_s: float
    progress_s: float

    @property
    def worker_env(self) -> dict[str, str]:
        """The ``JOBS_`` settings every worker runs with."""
        return {
            "JOBS_CONCURRENCY": str(self.concurrency),
            "JOBS_HEARTBEAT_S": f"{self.heartbeat_s:g}",
            "JOBS_SWEEP_INTERVAL_S": f"{self.sweep_interval_s:g}",
            "JOBS_SWEEP_THRESHOLD_S": f"{self.sweep_threshold_s:g}",
            "JOBS_POLL_INTERVAL_S": "0.5",
            "JOBS_CANCEL_CHECK_S": "0.5",
            "JOBS_SHUTDOWN_GRACE_S": "10",
            "JOBS_LOG_LEVEL": self.worker_log_level,
            "JOBS_DEMO_TYPES": "0",
            "JOBS_EXTRA_REGISTRIES": "bench.chaos.jobtype:registry",
        }


def resolve(args: argparse.Namespace) -> Config:
    """The run's :class:`Config`; ``ValueError`` for inconsistent options."""
    threshold = args.sweep_threshold or (3.0 if args.small else 5.0)
    long_ratio = args.long_ratio if args.long_ratio is not None else (0.05 if args.small else 0.01)
    long_ms = args.long_ms or ((threshold + 2) * 1000, (2.5 * threshold + 2) * 1000)
    every = {
        "kill": args.kill_every,
        "terminate": args.terminate_every,
        "restart": args.restart_every,
        "blackhole": 0.0 if args.no_blackhole else args.blackhole_every,
        "cancel": args.cancel_every,
    }
    if any(v < 0 for v in every.values()):
        raise ValueError("a fault's mean interval must be >= 0 (0 turns it off)")
    return Config(
        workers=args.workers,
        jobs=args.jobs,
        concurrency=args.concurrency,
        seed=args.seed if args.seed is not None else random.SystemRandom().randrange(2**31),
        plan=plan.PlanConfig(
            mean_ms=args.mean_ms,
            long_p=long_ratio,
            long_min_ms=long_ms[0],
            long_max_ms=long_ms[1],
            retry_p=args.retry_p,
            fail_p=args.fail_p,
            raise_p=args.raise_p,
            bad_return_p=args.bad_return_p,
        ),
        sweep_threshold_s=threshold,
        heartbeat_s=args.heartbeat or threshold / 10,
        sweep_interval_s=args.sweep_interval or threshold / 5,
        worker_log_level=args.worker_log_level.upper(),
        every=every,
        terminate_count=args.terminate_count,
        blackhole=not args.no_blackhole,
        blackhole_s=args.blackhole_s or 2 * threshold + 2,
        blackhole_wait_s=args.blackhole_wait_s,
        first_faults_within_s=args.first_faults_within or (10.0 if args.small else 20.0),
        timeout_s=args.timeout_s,
        progress_s=args.progress_s,
    )
