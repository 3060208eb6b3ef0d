"""One command that rewrites every recorded expectation the tests compare against.

From the checkout, with the development install of the README::

    .venv/bin/python tests/regenerate.py             # all of them
    .venv/bin/python tests/regenerate.py retrieval   # some: assembly, retrieval, docs
    .venv/bin/python tests/regenerate.py --check     # write nothing; list what would change

Each one is rewritten from the code as it is now, so run it only when a change of output is
intended, and review what it wrote with ``git diff``. On a clean tree it changes nothing (for
the two data files, ``tests/turn/test_regenerate.py`` checks it; for the docs, ``test_docs_run.py``
fails whenever an update would change a page). ``--check`` exits with 1 when something would
change.

- ``assembly``: ``tests/data/assembly_golden.json``, what the example turns and the seeded corpus
  of conversations render (``tests/assembly_support.py``).
- ``retrieval``: ``tests/data/retrieval_expected.json``, what the retrieval finds for the example
  data and for randomised stores (``tests/retrieval_expected.py``).
- ``docs``: the expected output of every ``console`` block of ``docs/*.md`` and ``README.md``
  (``tests/docs_run.py``; every ``…`` that still matches is kept). The slowest: each page runs.

The other files of ``tests/data/`` are inputs written by hand (:data:`INPUTS`), and the README's
screenshot ``docs/images/replay-report.png`` is a picture no test compares, redrawn in a headless
Chromium by ``tests/report_support.py``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import assembly_support
import docs_run
import retrieval_expected

__all__ = ["DATA", "INPUTS", "RECORDED", "TARGETS", "main"]

DATA = Path(__file__).resolve().parent / "data"
#: The data files recorded from the code, and what writes each one's text.
RECORDED: dict[str, tuple[Path, Callable[[], str]]] = {
    "assembly": (assembly_support.GOLDEN, assembly_support.golden_text),
    "retrieval": (retrieval_expected.EXPECTED, retrieval_expected.recorded_text),
}
#: The files of ``tests/data/`` nothing regenerates, and why.
INPUTS = {
    "nonebot.toml": "the configuration the NoneBot tests start a bot with",
    "report_chat.jsonl": "the scripted chat the replay report is drawn from",
    "routing_eval.jsonl": "the routing evaluation set: messages and the decisions they deserve",
}
TARGETS = (*RECORDED, "docs")


def _data_file(name: str, check: bool) -> bool:
    """Rewrite one recorded data file (or with ``check``, only compare); whether it changed."""
    path, text = RECORDED[name]
    new = text()
    changed = path.read_text(encoding="utf-8") != new
    if changed and not check:
        path.write_text(new, encoding="utf-8")
    verb = "would change" if check else "rewritten"
    print(f"{path.relative_to(docs_run.ROOT)}: {verb if changed else 'unchanged'}")
    return changed


def _docs(check: bool) -> bool:
    """Update every page's console outputs (or with ``check``, run them); whether any changed."""
    changed = False
    for page in docs_run.PAGES:
        with tempfile.TemporaryDirectory() as scratch:
            if check:
                mismatches = docs_run.run_page(page, Path(scratch))
                for mismatch in mismatches:
                    print(docs_run.describe(mismatch))
                page_changed = bool(mismatches)
            else:
                page_changed = docs_run.update_page(page, Path(scratch))
        changed = changed or page_changed
        verb = "would change" if check else "updated"
        print(f"{page.relative_to(docs_run.ROOT)}: {verb if page_changed else 'unchanged'}")
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tests/regenerate.py",
        description="Rewrite the recorded expectations the tests compare against.",
    )
    parser.add_argument(
        "targets", nargs="*", help=f"what to rewrite: {', '.join(TARGETS)} (default: all)"
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 on a change")
    arguments = parser.parse_args(argv)
    unknown = [target for target in arguments.targets if target not in TARGETS]
    if unknown:
        parser.error(f"unknown target {unknown[0]!r} (choose from {', '.join(TARGETS)})")
    # The corpus makes plugins fail on purpose; their tracebacks would bury the report.
    logging.getLogger("promptweave").addHandler(logging.NullHandler())
    changed = False
    for target in arguments.targets or TARGETS:
        if target == "docs":
            changed = _docs(arguments.check) or changed
        else:
            changed = _data_file(target, arguments.check) or changed
    return 1 if changed and arguments.check else 0


if __name__ == "__main__":
    sys.exit(main())
