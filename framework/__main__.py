"""``python -m promptweave``: the ``promptweave`` command without the console script."""

from __future__ import annotations

from promptweave.cli.main import cli

if __name__ == "__main__":
    cli(prog_name="promptweave")
