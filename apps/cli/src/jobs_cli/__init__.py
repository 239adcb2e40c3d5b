"""The ``jobs`` command line."""
