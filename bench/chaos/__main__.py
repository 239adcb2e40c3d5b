"""``python -m bench.chaos``: see :mod:`bench.chaos.run`."""

from bench.chaos.run import main

raise SystemExit(main())
