"""``python -m jobs_cli``: the same as the ``jobs`` console script (``jobs dev`` uses it to start
its children with the very interpreter it runs on)."""

import sys

from jobs_cli.main import main

sys.exit(main())
