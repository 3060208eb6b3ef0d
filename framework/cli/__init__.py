"""The ``promptweave`` command line (``docs/cli.md``)."""
