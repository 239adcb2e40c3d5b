"""The Imports module: CSV imports with DuckDB and map_reconcile."""
