"""Date arithmetic that holds at the ends of the calendar.

A turn may be timed ``0001-01-01T00:00:00+14:00`` and a window may be ``1e18`` seconds long: the
windows, cooldowns and silences computed from them must still be datetimes, not an
``OverflowError``. Every such computation goes through :func:`shifted`, and every time read back
from a store through :func:`from_timestamp`.
"""

from __future__ import annotations

import datetime as dt

__all__ = ["EARLIEST", "LATEST", "from_timestamp", "shifted"]

#: The first and last instants a store can write and read back in any UTC offset.
EARLIEST = dt.datetime.min.replace(tzinfo=dt.UTC)
LATEST = dt.datetime.max.replace(tzinfo=dt.UTC)

_EPOCH = dt.datetime(1970, 1, 1)


def shifted(moment: dt.datetime, seconds: float) -> dt.datetime:
    """``moment`` plus ``seconds`` (minus, when negative), held at :data:`EARLIEST` or
    :data:`LATEST` where the calendar ends; an infinite ``seconds`` reaches the end it points to.

    :raises ValueError: ``seconds`` is NaN (no direction to move in).
    """
    if seconds != seconds:
        raise ValueError("cannot shift a time by NaN seconds")
    try:
        return moment + dt.timedelta(seconds=seconds)
    except OverflowError:
        return LATEST if seconds > 0 else EARLIEST


def from_timestamp(stamp: float, offset_s: float = 0.0) -> dt.datetime:
    """The aware datetime of UTC epoch seconds ``stamp`` in the UTC offset ``offset_s``.

    ``datetime.fromtimestamp`` passes through UTC, so a local time whose UTC equivalent leaves
    the calendar (``0001-01-01T00:00:00+14:00``) cannot be read back with it; such a time is
    rebuilt from its local wall clock instead, and one beyond even that is held at the end.
    """
    zone = dt.timezone(dt.timedelta(seconds=offset_s))
    try:
        return dt.datetime.fromtimestamp(stamp, zone)
    except (OverflowError, ValueError, OSError):
        try:
            local = _EPOCH + (dt.timedelta(seconds=stamp) + dt.timedelta(seconds=offset_s))
        except OverflowError:
            return LATEST if stamp > 0 else EARLIEST
        return local.replace(tzinfo=zone)
