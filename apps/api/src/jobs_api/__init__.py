"""The HTTP API deployable of jobs."""
