"""``python -m jobs_worker``: run a worker process."""

import gc
import sys

gc.disable()  # while the process starts; jobs_worker.main.start_up_over turns it back on

from jobs_worker.main import main  # noqa: E402 - after the collector is off

sys.exit(main())
