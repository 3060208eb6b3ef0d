"""The festival table and the one computation the section needs: which festival comes next."""

from __future__ import annotations

import datetime as dt
from typing import NamedTuple

__all__ = ["FESTIVALS", "WINDOW_DAYS", "Festival", "upcoming_festival"]

#: How far ahead the section looks, in days.
WINDOW_DAYS = 14


class Festival(NamedTuple):
    """One public holiday or traditional festival on one calendar day."""

    name: str
    date: dt.date


# Lunar festivals (春节, 元宵节, 端午节, 七夕, 中秋节) fall on lunar dates and 清明节 on a solar
# term, so each year is written out rather than computed; the table covers 2026 and 2027.
FESTIVALS: tuple[Festival, ...] = (
    Festival("元旦", dt.date(2026, 1, 1)),
    Festival("春节", dt.date(2026, 2, 17)),
    Festival("元宵节", dt.date(2026, 3, 3)),
    Festival("清明节", dt.date(2026, 4, 5)),
    Festival("劳动节", dt.date(2026, 5, 1)),
    Festival("端午节", dt.date(2026, 6, 19)),
    Festival("七夕", dt.date(2026, 8, 19)),
    Festival("中秋节", dt.date(2026, 9, 25)),
    Festival("国庆节", dt.date(2026, 10, 1)),
    Festival("元旦", dt.date(2027, 1, 1)),
    Festival("春节", dt.date(2027, 2, 6)),
    Festival("元宵节", dt.date(2027, 2, 20)),
    Festival("清明节", dt.date(2027, 4, 5)),
    Festival("劳动节", dt.date(2027, 5, 1)),
    Festival("端午节", dt.date(2027, 6, 9)),
    Festival("七夕", dt.date(2027, 8, 8)),
    Festival("中秋节", dt.date(2027, 9, 15)),
    Festival("国庆节", dt.date(2027, 10, 1)),
)


def upcoming_festival(today: dt.date, window_days: int = WINDOW_DAYS) -> Festival | None:
    """The first festival on or after ``today`` and at most ``window_days`` days away.

    :param today: the local calendar day of the turn.
    :param window_days: how many days ahead to look.
    :returns: the festival, or ``None`` when none falls within the window (or the table ends).
    """
    for festival in FESTIVALS:
        days = (festival.date - today).days
        if 0 <= days <= window_days:
            return festival
        if days > window_days:
            return None
    return None
