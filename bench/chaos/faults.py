"""The faults a chaos run inflicts (:mod:`bench.chaos.run` lists them): one method per kind,
each returning False when the fault could not happen now (it is tried again later)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from bench.chaos.config import APP_PREFIX, ORG

if TYPE_CHECKING:
    from bench.chaos.run import ChaosRun


class Faults:
    """The faults of one run; ``active`` is set while a blackhole is on (or waiting for a job to
    hold), ``work_over`` once every job has finished."""

    def __init__(self, run: ChaosRun) -> None:
        self.run = run
        self.thread: threading.Thread | None = None
        self.active = threading.Event()
        self.work_over = threading.Event()

    def inflict(self, kind: str) -> bool:
        """Inflict one fault; False when it could not happen now (it is tried again later)."""
        try:
            return bool(getattr(self, f"_{kind}")())
        except Exception as error:
            self.run.event(f"{kind}.error", error=repr(error)[:200])
            return False

    def _kill(self) -> bool:
        candidates = [
            s for s in self.run.fleet.slots if s.alive() and not (s.linked and self.active.is_set())
        ]
        if not candidates:
            return False
        slot = self.run.rng.choice(candidates)
        pid = self.run.fleet.kill(slot)
        if pid is None:
            return False
        self.run.counts["kills"] += 1
        self.run.event("kill", worker=slot.index, pid=pid, replacement=slot.pid)
        return True

    def _terminate(self) -> bool:
        rows = self.run.db.query(
            "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s "
            "ORDER BY random() LIMIT %s",
            (f"{APP_PREFIX}%", self.run.config.terminate_count),
            patience_s=10,
        )
        killed = 0
        for (pid,) in rows:
            done = self.run.db.query("SELECT pg_terminate_backend(%s)", (pid,), patience_s=10)
            killed += bool(done and done[0][0])
        self.run.counts["terminated_backends"] += killed
        self.run.counts["terminate_rounds"] += 1
        self.run.event("terminate", backends=killed)
        return killed > 0

    def _restart(self) -> bool:
        mode = self.run.rng.choice(("fast", "immediate"))
        # Down well within the sweep threshold: a restart is an outage workers ride out, not
        # a silence long enough for their lease fence (a longer one is the blackhole's case).
        downtime = self.run.rng.uniform(0.1, 0.35) * self.run.config.sweep_threshold_s
        self.run.db.close()
        down_s = self.run.server.restart(mode, downtime)
        self.run.pg_down_s += down_s
        self.run.counts["pg_restarts"] += 1
        self.run.counts[f"pg_restarts_{mode}"] += 1
        self.run.event("restart", mode=mode, down_s=round(down_s, 2))
        return True

    def _blackhole(self) -> bool:
        if self.run.proxy is None or self.active.is_set():
            return False
        self.active.set()
        self.thread = threading.Thread(
            target=self._hold_blackhole, name="chaos-blackhole", daemon=True
        )
        self.thread.start()
        return True

    def _hold_blackhole(self) -> None:
        cfg = self.run.config
        assert self.run.proxy is not None
        try:
            linked = self.run.fleet.slots[0]
            deadline = time.monotonic() + cfg.blackhole_wait_s
            held = 0
            while time.monotonic() < deadline and not self.work_over.is_set():
                held = self._long_jobs_held(linked.pid)
                if held:
                    break
                self.work_over.wait(0.25)
            if self.work_over.is_set() and not held:
                self.run.event("blackhole.skipped", reason="every job had finished")
                return
            self.run.proxy.blackhole()
            self.run.counts["blackholes"] += 1
            self.run.counts["blackholes_holding_long_job"] += bool(held)
            self.run.event(
                "blackhole.on", worker=0, pid=linked.pid, long_jobs_held=held, s=cfg.blackhole_s
            )
            time.sleep(cfg.blackhole_s)  # not cut short by the end of the work: it must heal
            self.run.proxy.restore()
            self.run.event("blackhole.off", worker=0, pid=linked.pid)
        except Exception as error:
            self.run.proxy.restore()
            self.run.event("blackhole.error", error=repr(error)[:200])
        finally:
            self.active.clear()

    def _long_jobs_held(self, pid: int | None) -> int:
        """Executions running on ``pid`` planned to last past the sweep threshold from now."""
        if pid is None:
            return 0
        rows = self.run.db.query(
            "SELECT count(*) FROM chaos_executions s WHERE s.kind = 'start' AND s.pid = %s "
            "AND s.at + s.planned_ms / 1000.0 > %s AND NOT EXISTS ("
            "SELECT 1 FROM chaos_executions e WHERE e.exec_id = s.exec_id AND e.kind = 'end')",
            (pid, time.time() + self.run.config.sweep_threshold_s + 1),
            patience_s=5,
        )
        return int(rows[0][0]) if rows else 0

    def _cancel(self) -> bool:
        rows = self.run.db.query(
            "(SELECT id FROM jobs WHERE status = 'running' ORDER BY random() LIMIT 1) UNION ALL "
            "(SELECT id FROM jobs WHERE status = 'queued' ORDER BY random() LIMIT 1)",
            patience_s=5,
        )
        asked = 0
        for (job_id,) in rows:
            self.run.cancel_requested.add(job_id)  # before the call: its answer may be lost
            try:
                self.run.service.cancel(ORG, job_id)
            except Exception:  # finished meanwhile (InvalidTransition), or an outage
                self.run.counts["cancels_refused"] += 1
                continue
            asked += 1
        self.run.counts["cancels_requested"] += asked
        return asked > 0
