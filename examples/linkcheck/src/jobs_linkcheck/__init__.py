"""jobs-linkcheck: an example module of jobs, a small link checker (examples/linkcheck/README.md)."""
