"""The Alembic chain of the link checker, with its own version table
(``alembic_version_linkcheck``): ``jobs migrate`` runs it after the jobs chain because the
module's declaration names this package (:mod:`jobs_linkcheck.module`). The chain knows nothing
of the jobs schema, and the jobs schema nothing of it."""
