"""``python -m jobs_worker``: run a worker process."""

import sys

from jobs_worker.main import main

sys.exit(main())
