"""Built-in plugin ``model_summary``: session summaries and image descriptions written by the
learning model (``docs/learning.md``, summaries and image descriptions).

``summarize_session`` asks the learning model (task and ``[learning.budget]`` learner
``summary``) for at most ``min(max_chars, 120)`` characters of Chinese over the turns being
compressed (each as ``{"speaker": "对方"|"你", "text": …}``, at most 240 characters) and the
previous summary. ``describe_image`` asks it (task and learner ``describe_image``) for at most 60
characters describing one image, the image sent with the request, only when ``[learning.model]
vision`` is on. Both prompts are the runtime's persona pack's ``[learning_prompts.summary]`` and
``[learning_prompts.describe_image]`` (``model.persona``), else the bundled default pack's.

Neither hook is ``trylast``, so an answer of the model wins; each returns ``None`` whenever the
model cannot answer (there is no learning model, the budget is spent, the provider failed, no
valid answer came in two attempts), and the built-in ``session_summary`` plugin's extractive
summary is written, or the image stays ``[图片]``. Each such fallback is logged on the
``promptweave.learning`` logger in words the operator reads; the model traces and counts its own
calls (``runtime.learning_model.calls``).

The offline learning model answers with the rules of this module: the summary is the extractive
summary (:func:`promptweave.builtin_plugins.session_summary.extractive_summary_of_lines`) of the
turns it was sent, within the limit; an image is described by the fixed text
:data:`OFFLINE_DESCRIPTION`, since the offline model sees no image.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from promptweave import SessionTurn, hookimpl
from promptweave.builtin_plugins.model_tasks import default_pack, model_task
from promptweave.builtin_plugins.session_summary import extractive_summary_of_lines, speaker_of
from promptweave.learning.budget import BudgetSpent
from promptweave.learning.model import ModelTask, ModelUnavailable, answer_schema
from promptweave.plugins.contributions import ModelAsker
from promptweave.store.session_rows import SUMMARY_MARK
from promptweave.text.persona import PersonaPack

__all__ = [
    "DESCRIPTION_CHARS",
    "OFFLINE_DESCRIPTION",
    "SUMMARY_CHARS",
    "TURN_CHARS",
    "ImageAnswer",
    "SummaryAnswer",
    "describe_image",
    "image_task",
    "offline_description",
    "offline_summary",
    "summarize_session",
    "summary_task",
]

A = TypeVar("A")

log = logging.getLogger("promptweave.learning")

#: The longest summary the model is asked for (less when ``[session] summary_max_chars`` is).
SUMMARY_CHARS = 120
#: The longest turn text sent with a summary task.
TURN_CHARS = 240
#: The longest image description.
DESCRIPTION_CHARS = 60
#: How much of an image URL a log line names.
URL_LOGGED_CHARS = 80
#: What the offline learning model says of any image: it has no vision and says so.
OFFLINE_DESCRIPTION = "图片（离线模型未看图）"


def _collapsed(value: object) -> object:
    """A text with its whitespace collapsed to single spaces (anything else as it is, for the
    type check to reject)."""
    return " ".join(value.split()) if isinstance(value, str) else value


def _text_within(limit: int) -> Callable[[Any, attrs.Attribute[str], str], None]:
    """A validator: a non-blank text of at most ``limit`` characters, without the summary mark."""

    def check(_instance: Any, attribute: attrs.Attribute[str], value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"{attribute.name} must be a text")
        if not value:
            raise ValueError(f"{attribute.name} is blank")
        if len(value) > limit:
            raise ValueError(f"{attribute.name} has {len(value)} characters, more than {limit}")
        if SUMMARY_MARK in value:
            raise ValueError(f"{attribute.name} carries the summary mark {SUMMARY_MARK}")

    return check


@attrs.frozen(kw_only=True)
class SummaryAnswer:
    """The model's summary: non-blank, at most :data:`SUMMARY_CHARS` characters once its
    whitespace is collapsed, never carrying ``【此前对话摘要】``."""

    summary: str = attrs.field(converter=_collapsed, validator=_text_within(SUMMARY_CHARS))


@functools.cache
def summary_answer(limit: int) -> type[SummaryAnswer]:
    """The answer record of a summary of at most ``limit`` characters (``limit`` at most
    :data:`SUMMARY_CHARS`)."""
    if limit >= SUMMARY_CHARS:
        return SummaryAnswer

    @attrs.frozen(kw_only=True)
    class LimitedSummaryAnswer(SummaryAnswer):
        summary: str = attrs.field(converter=_collapsed, validator=_text_within(limit))

    LimitedSummaryAnswer.__doc__ = f"A :class:`SummaryAnswer` of at most {limit} characters."
    return LimitedSummaryAnswer


@attrs.frozen(kw_only=True)
class ImageAnswer:
    """The model's description of one image: non-blank, at most :data:`DESCRIPTION_CHARS`
    characters once its whitespace is collapsed."""

    description: str = attrs.field(converter=_collapsed, validator=_text_within(DESCRIPTION_CHARS))


SUMMARY_SCHEMA = answer_schema({"summary": {"type": "string"}})
IMAGE_SCHEMA = answer_schema({"description": {"type": "string"}})


def offline_summary(payload: Mapping[str, Any], max_chars: int = SUMMARY_CHARS) -> dict[str, Any]:
    """The offline learning model's summary of a summary task's ``payload``: the extractive
    summary of its turns (``speaker``, ``text``) after its ``previous_summary``, at most
    ``max_chars`` characters; ``""`` (an invalid answer) when no clause is worth keeping."""
    lines = [(str(turn["speaker"]), str(turn["text"])) for turn in payload.get("turns", ())]
    previous = payload.get("previous_summary")
    found = extractive_summary_of_lines(
        lines, previous if isinstance(previous, str) else None, max_chars
    )
    return {"summary": (found or "")[:max_chars]}


def offline_description(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The offline learning model's description of any image: :data:`OFFLINE_DESCRIPTION`. It
    sees no image, and the text says so rather than guessing from the URL."""
    return {"description": OFFLINE_DESCRIPTION}


def summary_task(
    turns: Sequence[SessionTurn],
    previous_summary: str | None,
    max_chars: int,
    persona: PersonaPack | None = None,
) -> ModelTask[SummaryAnswer]:
    """The ``summary`` task over ``turns``: at most ``min(max_chars, 120)`` characters."""
    limit = min(max_chars, SUMMARY_CHARS)
    payload = {
        "turns": [
            {"speaker": speaker_of(turn), "text": turn.content[:TURN_CHARS]} for turn in turns
        ],
        "previous_summary": previous_summary or "",
    }
    return model_task(
        None,
        "summary",
        summary_answer(limit),
        SUMMARY_SCHEMA,
        payload,
        functools.partial(offline_summary, max_chars=limit),
        persona=persona or default_pack(),
        values={"max_chars": limit},
    )


def image_task(url: str, persona: PersonaPack | None = None) -> ModelTask[ImageAnswer]:
    """The ``describe_image`` task of the image at ``url``, sent with the request."""
    return model_task(
        None,
        "describe_image",
        ImageAnswer,
        IMAGE_SCHEMA,
        {"url": url},
        offline_description,
        persona=persona or default_pack(),
        values={"max_chars": DESCRIPTION_CHARS},
        images=(url,),
    )


def _where(group_id: str | None) -> str:
    return f"in group {group_id}" if group_id else "in a private chat"


def _ask(model: ModelAsker, task: ModelTask[A], what: str, fallback: str) -> A | None:
    """The model's valid answer to ``task``, or ``None`` after logging why not and that
    ``fallback`` happens instead."""
    try:
        answer = model.ask(task)
    except BudgetSpent as spent:
        log.info("%s: %s; %s", what, spent, fallback)
        return None
    except ModelUnavailable as failed:
        log.warning("%s: the learning model failed (%s); %s", what, failed, fallback)
        return None
    if not isinstance(answer, task.answer):
        log.warning(
            "%s: the learning model gave no valid answer in two attempts (%s); %s",
            what,
            model.label,
            fallback,
        )
        return None
    return answer


@hookimpl
def summarize_session(
    bot_id: str,
    group_id: str | None,
    user_id: str,
    turns: Sequence[SessionTurn],
    previous_summary: str | None,
    max_chars: int,
    model: ModelAsker | None,
) -> str | None:
    """The learning model's summary of ``turns``; ``None`` (the extractive summary is written)
    when there is no learning model or it gives no valid answer."""
    if model is None or not turns:
        return None
    answer = _ask(
        model,
        summary_task(turns, previous_summary, max_chars, model.persona),
        f"session summary of user {user_id} {_where(group_id)}",
        "the extractive summary is written",
    )
    return None if answer is None else answer.summary


@hookimpl
def describe_image(
    url: str, bot_id: str, group_id: str | None, model: ModelAsker | None
) -> str | None:
    """The learning model's description of the image at ``url``; ``None`` (it stays ``[图片]``)
    when there is no learning model, it has no vision (``[learning.model] vision`` off) or it
    gives no valid answer."""
    if model is None or not model.vision:
        return None
    answer = _ask(
        model,
        image_task(url, model.persona),
        f"image description of {url[:URL_LOGGED_CHARS]} {_where(group_id)}",
        "the image stays [图片]",
    )
    return None if answer is None else answer.description
