"""The PostgreSQL adapter of jobs (filled by the Postgres issue)."""
