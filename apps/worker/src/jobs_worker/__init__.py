"""The worker deployable of jobs: slots on threads, heartbeats, sweep, signals, wiring.

Entry points: :func:`jobs_worker.main.run_worker` (what ``jobs worker`` calls) and
``python -m jobs_worker``. The loop itself is :class:`jobs_worker.worker.Worker`.
"""
