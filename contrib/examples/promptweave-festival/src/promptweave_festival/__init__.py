"""promptweave-festival: an example third-party plugin for promptweave.

It adds the section ``festival`` right after ``current_time``, reminding the bot of the next
Chinese public holiday or festival within two weeks, and replaces the ``persona`` section in
group ``20002``, a study group where the bot plays a quieter role.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from promptweave import RenderContext, Section, SectionOverride, hookimpl
from promptweave_festival.festivals import FESTIVALS, WINDOW_DAYS, Festival, upcoming_festival

__all__ = [
    "FESTIVALS",
    "FESTIVAL_HEADER",
    "STUDY_GROUP_ID",
    "STUDY_GROUP_PERSONA",
    "WINDOW_DAYS",
    "Festival",
    "festival_line",
    "local_today",
    "override_section",
    "register_sections",
    "render_festival",
    "upcoming_festival",
]

FESTIVAL_HEADER = "【节日提醒】"

# Festivals are days of the Chinese calendar: a bot whose time zone is unknown still counts days
# in China's.
FALLBACK_ZONE = "Asia/Shanghai"

#: The group whose persona this plugin replaces.
STUDY_GROUP_ID = "20002"

#: The persona of the study group; ``{persona}`` is the persona pack's name for the bot.
STUDY_GROUP_PERSONA = """\
【核心人格】
你是{persona}，这个考研自习群里陪大家一起学习的伙伴，不是答疑机器，也不是监工。
- 群里大多数人在备考，时间紧、压力大：说话简短克制，不刷屏，不用夸张的语气和表情。
- 有人问题目或知识点时，先给思路和关键一步，再看对方要不要完整过程；拿不准的公式、院校数据和分数线直接说拿不准，建议去查官方信息。
- 有人焦虑、想放弃时，先接住情绪，别灌鸡汤，也别拿别人的进度和他比较。
- 打卡和闲聊时可以轻松一点，但不要把话题从学习上带跑太久。"""


def local_today(context: RenderContext) -> dt.date:
    """The turn's calendar day in the bot's time zone."""
    try:
        zone = ZoneInfo(context.turn.bot.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        zone = ZoneInfo(FALLBACK_ZONE)
    return context.now.astimezone(zone).date()


def festival_line(festival: Festival, today: dt.date) -> str:
    """One reminder line, for example ``- 距离元旦还有 3 天（2027-01-01）``."""
    days = (festival.date - today).days
    when = festival.date.isoformat()
    if days == 0:
        return f"- 今天就是{festival.name}（{when}）"
    if days == 1:
        return f"- 明天就是{festival.name}（{when}）"
    return f"- 距离{festival.name}还有 {days} 天（{when}）"


def render_festival(context: RenderContext) -> str | None:
    """The section text, or ``None`` when no festival falls within :data:`WINDOW_DAYS`."""
    today = local_today(context)
    festival = upcoming_festival(today)
    if festival is None:
        return None
    return "\n".join(
        [
            FESTIVAL_HEADER,
            festival_line(festival, today),
            "- 群友聊到假期安排、回家、出行或过节时可以自然提起；不要主动刷节日祝福。",
        ]
    )


@hookimpl
def register_sections(register: Callable[[Section], None]) -> None:
    register(
        Section(
            id="festival",
            title=FESTIVAL_HEADER,
            render=render_festival,
            after="current_time",
            volatility="turn",
        )
    )


@hookimpl
def override_section(
    section_id: str, group_id: str, context: RenderContext
) -> SectionOverride | None:
    if section_id != "persona" or group_id != STUDY_GROUP_ID:
        return None
    return SectionOverride(mode="replace", content=context.persona.format(STUDY_GROUP_PERSONA))
