"""Stage timing: how long each stage of a turn took, in milliseconds (``docs/index.md``).

Every stage takes one ``time.perf_counter()`` reading when it starts and one when it ends, and
records the difference rounded to three decimals. Stages whose result the caller does not get back
(recording, the background session compression) also log it on :data:`stage_log` at debug level.
"""

from __future__ import annotations

import logging
import time

__all__ = ["elapsed_ms", "stage_log"]

#: Where the stages that return no duration log theirs, at debug level.
stage_log = logging.getLogger("promptweave.stages")


def elapsed_ms(start: float) -> float:
    """Milliseconds since ``start`` (a ``time.perf_counter()`` reading), to three decimals."""
    return round((time.perf_counter() - start) * 1000, 3)
