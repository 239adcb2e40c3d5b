"""The worker deployable of jobs."""
