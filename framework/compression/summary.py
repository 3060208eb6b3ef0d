"""Long-session compression (``docs/design.md#long-session-compression``;
``docs/messages.md``).

When a user's session holds ``summary_threshold`` user turns (24 by default) and no compression of
that (bot, group, user) started within the cooldown (600 s), every row but the newest
``summary_keep`` (16) is summarized by the ``summarize_session`` hook into one ``【此前对话摘要】``
row of at most ``summary_max_chars`` (120), inserted at the front of the session and archived for
old-topic recall. It runs after delivery, off the hot path (:class:`promptweave.Promptweave` schedules
it in the background); images are described through the ``describe_image`` hook only now, and
only while ``[session] describe_images`` is on.
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
import re
import time
from collections.abc import Callable
from typing import Any

import attrs

from promptweave.config import Config
from promptweave.messages.images import is_vision_url
from promptweave.plugins.contributions import ModelAsker
from promptweave.plugins.manager import PluginManager
from promptweave.plugins.watchdog import NETWORK_BOUND_FACTOR, Watchdog
from promptweave.store.session_rows import SUMMARY_MARK, SessionSummary, SessionTurn, TurnKind
from promptweave.store.stores import Stores
from promptweave.text.rules import IMAGE_MARK
from promptweave.text.sanitize import sanitize_block
from promptweave.timing import elapsed_ms, stage_log

__all__ = [
    "CompressionResult",
    "CompressionStatus",
    "ModelFor",
    "clean_summary",
    "compress_session",
]

log = logging.getLogger("promptweave")

_WHITESPACE = re.compile(r"\s+")
# The summary row sorts just before the oldest kept row.
_BEFORE_OLDEST = dt.timedelta(milliseconds=1)


class CompressionStatus(enum.StrEnum):
    """What a compression attempt did."""

    COMPRESSED = "compressed"
    SKIPPED = "skipped"


@attrs.frozen(kw_only=True)
class CompressionResult:
    """The outcome of :func:`compress_session`.

    :param reason: why it was skipped: ``disabled``, ``store_unavailable``, ``below_threshold``,
        ``cooldown``, ``nothing_to_compress``, ``no_summary`` or ``rows_changed``.
    :param summary: the summary text written.
    :param turns_covered: how many rows the summary replaced.
    :param duration_ms: milliseconds the attempt took, the ``summarize_session`` and
        ``describe_image`` hooks and the store included. Timing is not part of the value: two
        results that differ only here are equal.
    """

    status: CompressionStatus
    reason: str = ""
    summary: str | None = None
    turns_covered: int = 0
    duration_ms: float = attrs.field(default=0.0, eq=False)


#: ``model_for(learner, bot_id, group_id, now)``: the learning model as one hook call sees it.
ModelFor = Callable[[str, str, str | None, dt.datetime], ModelAsker | None]


def _skipped(reason: str) -> CompressionResult:
    return CompressionResult(status=CompressionStatus.SKIPPED, reason=reason)


@attrs.define
class _ImageDescriber:
    """Describes the images of one compression through the ``describe_image`` hook, each distinct
    URL once, so a sticker sent in many turns costs one description (``docs/design.md#images``:
    described once). Only valid HTTP(S) URLs are described. Without ``enabled`` (``[session]
    describe_images`` off) none is, also one stored while the switch was on: no URL reaches a
    plugin."""

    plugins: PluginManager
    bot_id: str
    group_id: str | None
    enabled: bool
    watchdog: Watchdog | None = None
    seconds: float | None = None
    model: ModelAsker | None = None
    _found: dict[str, str | None] = attrs.field(factory=dict, init=False)

    def __call__(self, url: str) -> str | None:
        url = url.strip()
        if not self.enabled or not is_vision_url(url):
            return None
        if url not in self._found:
            # A plugin that fails leaves the image undescribed: it stays [图片].
            found, fault = self.plugins.hooks.describe_image(
                url,
                self.bot_id,
                self.group_id,
                watchdog=self.watchdog,
                seconds=self.seconds,
                model=self.model,
            )
            if fault is not None:
                log.warning("image not described: %s", fault.describe())
            # Cut before the description is cleaned: only 200 characters of it are kept.
            self._found[url] = None if found is None else found[:800]
        return self._found[url]


def _described(turn: SessionTurn, describe: _ImageDescriber) -> SessionTurn:
    """The turn with each image placeholder replaced by its description; an image that is not
    described stays ``[图片]`` (``docs/design.md#images``)."""
    if not turn.images:
        return turn
    marks = []
    for url in turn.images:
        text = sanitize_block(describe(url) or IMAGE_MARK, 200).replace("\n", " ")
        marks.append(text if text.startswith("[") else f"[图片：{text}]")
    content = " ".join([*dict.fromkeys(marks), turn.content]).strip()
    return attrs.evolve(turn, content=content, images=())


def clean_summary(text: Any, max_chars: int) -> str | None:
    """Collapse whitespace and cut; ``None`` for a blank text or one carrying the summary mark."""
    if not isinstance(text, str):
        return None
    collapsed = _WHITESPACE.sub(" ", sanitize_block(text)).strip()
    if not collapsed or SUMMARY_MARK in collapsed:
        return None
    return collapsed[:max_chars].rstrip()


def compress_session(
    stores: Stores,
    plugins: PluginManager,
    config: Config,
    *,
    bot_id: str,
    group_id: str | None,
    user_id: str,
    now: dt.datetime,
    watchdog: Watchdog | None = None,
    model_for: ModelFor | None = None,
) -> CompressionResult:
    """Compress one session if it is long enough and the cooldown allows.

    The result carries how long the attempt took (``duration_ms``), also logged at debug level on
    the ``promptweave.stages`` logger, since the background runner discards the result. Store
    errors propagate as :class:`promptweave.StoreUnavailableError`; the runtime's background
    runner logs them. A ``summarize_session`` implementation that raises, hangs or answers
    something other than text compresses nothing (``skipped``, reason ``summarizer_failed``).

    :param watchdog: bounds each ``summarize_session`` and ``describe_image`` call by
        ``[provider] timeout_s`` times
        :data:`promptweave.plugins.watchdog.NETWORK_BOUND_FACTOR`.
    :param model_for: ``model_for(learner, bot_id, group_id, now)``: the learning model as the
        ``summary`` and ``describe_image`` hooks see it (``None``: there is none).
    """
    start = time.perf_counter()
    result = _compress(
        stores,
        plugins,
        config,
        bot_id=bot_id,
        group_id=group_id,
        user_id=user_id,
        now=now,
        watchdog=watchdog,
        model_for=model_for,
    )
    result = attrs.evolve(result, duration_ms=elapsed_ms(start))
    stage_log.debug(
        "compress_session: %.3f ms (bot %s, group %s, user %s: %s%s)",
        result.duration_ms,
        bot_id,
        group_id,
        user_id,
        result.status.value,
        f" {result.reason}" if result.reason else "",
    )
    return result


def _compress(
    stores: Stores,
    plugins: PluginManager,
    config: Config,
    *,
    bot_id: str,
    group_id: str | None,
    user_id: str,
    now: dt.datetime,
    watchdog: Watchdog | None,
    model_for: ModelFor | None = None,
) -> CompressionResult:
    settings = config.session
    sessions = stores.sessions
    if not settings.summary_enabled:
        return _skipped("disabled")
    if sessions is None:
        return _skipped("store_unavailable")
    scope = group_id or ""
    # Count what existed at ``now``: a job that runs late must not act on later turns.
    rows = sessions.user_turns(bot_id, scope, user_id, until=now, limit=settings.storage_window)
    user_turns = sum(1 for row in rows if row.role == "user" and not row.is_summary)
    if user_turns < settings.summary_threshold:
        return _skipped("below_threshold")
    if not sessions.claim_compaction(
        bot_id, scope, user_id, now=now, cooldown_s=settings.summary_cooldown_s
    ):
        return _skipped("cooldown")
    keep = max(4, min(settings.summary_keep, config.history.user_window))
    older, kept = rows[:-keep], rows[-keep:]
    conversation = [row for row in older if not row.is_summary]
    if not conversation or not kept:
        return _skipped("nothing_to_compress")
    previous = next((row for row in reversed(older) if row.is_summary), None)
    previous_text = previous.content.removeprefix(SUMMARY_MARK).strip() if previous else None
    seconds = config.provider.timeout_s * NETWORK_BOUND_FACTOR
    describe = _ImageDescriber(
        plugins,
        bot_id,
        group_id,
        settings.describe_images,
        watchdog=watchdog,
        seconds=seconds,
        model=None if model_for is None else model_for("describe_image", bot_id, group_id, now),
    )
    described = [_described(row, describe) for row in conversation]
    found, fault = plugins.hooks.summarize_session(
        watchdog=watchdog,
        seconds=seconds,
        bot_id=bot_id,
        group_id=group_id,
        user_id=user_id,
        turns=tuple(described),
        previous_summary=previous_text,
        max_chars=settings.summary_max_chars,
        model=None if model_for is None else model_for("summary", bot_id, group_id, now),
    )
    if fault is not None:
        log.warning("session not compressed: %s", fault.describe())
        return _skipped("summarizer_failed")
    # Cut before cleaning: a summary of ten megabytes costs nothing.
    given = found[: 4 * settings.summary_max_chars] if isinstance(found, str) else None
    summary = clean_summary(given, settings.summary_max_chars)
    if summary is None:
        return _skipped("no_summary")
    row = SessionTurn(
        bot_id=bot_id,
        group_id=scope,
        user_id=user_id,
        role="user",
        kind=TurnKind.SUMMARY,
        content=f"{SUMMARY_MARK}\n{summary}",
        time=kept[0].time - _BEFORE_OLDEST,
    )
    removed = [r.key for r in older if r.key is not None]
    if not sessions.replace_with_summary(bot_id, scope, user_id, remove=removed, summary=row):
        return _skipped("rows_changed")
    if stores.summaries is not None:
        stores.summaries.add_summary(
            SessionSummary(
                bot_id=bot_id,
                group_id=scope,
                user_id=user_id,
                text=summary,
                created=now,
                turns_covered=len(conversation),
            )
        )
    return CompressionResult(
        status=CompressionStatus.COMPRESSED, summary=summary, turns_covered=len(conversation)
    )
