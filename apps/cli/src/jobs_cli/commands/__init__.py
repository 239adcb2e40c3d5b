"""The subcommands of ``jobs``, one module per group, imported only when run."""
