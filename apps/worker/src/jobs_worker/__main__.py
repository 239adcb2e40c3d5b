"""``python -m jobs_worker``: run a worker process."""

import sys

from jobs_worker import startup

startup.begins()  # before the worker's imports (decision 0047)

from jobs_worker.main import main  # noqa: E402 - after the collector is off

sys.exit(main())
