"""What the model learners share: their prompts, read from the persona pack, and the input they
send, as JSON (``docs/learning.md``, the model learners).

Not a plugin of its own: it registers nothing. Every prompt is data: the persona pack's
``[learning_prompts.NAME]`` table (``system`` and ``instruction``); a pack without one uses the
bundled default pack's, so a persona pack written before the model learners keeps working.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from promptweave.learning.model import ModelTask
from promptweave.plugins.contributions import LearnerBatch
from promptweave.store.learned import LoggedMessage
from promptweave.text.persona import LearningPrompt, PersonaPack
from promptweave.text.rules import IMAGE_MARK

__all__ = [
    "INPUT_HEADER",
    "LINE_CHARS",
    "default_pack",
    "line_of",
    "model_task",
    "prompt_for",
    "speaker_name",
]

A = TypeVar("A")

#: What comes between the instruction and the input in the user message.
INPUT_HEADER = "输入（JSON）："
#: The longest message text sent to the learning model.
LINE_CHARS = 200
_DEFAULT_PACK = Path(__file__).parent / "persona_packs" / "default.toml"


@functools.cache
def default_pack() -> PersonaPack:
    """The bundled default persona pack (the prompts a pack without its own falls back to)."""
    return PersonaPack.from_file(_DEFAULT_PACK)


def prompt_for(persona: PersonaPack | None, name: str) -> LearningPrompt:
    """The prompt of task ``name``: the persona pack's, else the default pack's.

    :raises KeyError: when neither has it (a learner asking for a prompt that exists nowhere).
    """
    if persona is not None and name in persona.learning_prompts:
        return persona.learning_prompts[name]
    return default_pack().learning_prompts[name]


def _filled(persona: PersonaPack | None, template: str, values: Mapping[str, Any]) -> str:
    pack = persona or default_pack()
    text = pack.format(template)
    for key, value in values.items():
        text = text.replace("{" + key + "}", str(value))
    return text


def model_task(
    batch: LearnerBatch | None,
    name: str,
    answer: type[A],
    schema: Mapping[str, Any],
    payload: Mapping[str, Any],
    offline: Callable[[Mapping[str, Any]], Any] | None,
    *,
    persona: PersonaPack | None = None,
    values: Mapping[str, Any] | None = None,
    images: Sequence[str] = (),
    max_tokens: int | None = None,
) -> ModelTask[A]:
    """The task ``name`` with its prompt from the persona pack (``batch.persona``, or
    ``persona``): the system prompt, then a user message of the instruction and the input.

    :param values: placeholders of the prompt beyond ``{persona}`` and ``{self}``
        (``{max_chars}``…).
    """
    pack = persona if persona is not None else (batch.persona if batch is not None else None)
    prompt = prompt_for(pack, name)
    filled = values or {}
    user = (
        _filled(pack, prompt.instruction, filled)
        + "\n\n"
        + INPUT_HEADER
        + "\n"
        + json.dumps(payload, ensure_ascii=False, indent=1)
    )
    return ModelTask(
        name=name,
        answer=answer,
        schema=schema,
        system=_filled(pack, prompt.system, filled),
        user=user,
        payload=payload,
        offline=offline,
        images=tuple(images),
        max_tokens=max_tokens,
    )


def speaker_name(logged: LoggedMessage, bot_ids: Iterable[str], self_label: str) -> str:
    """How the input names a message's speaker: the bot's own label for its own lines, else
    the member's display name, else ``群友#<last 4 digits of the id>``."""
    message = logged.message
    if message.sender_id in set(bot_ids):
        return self_label
    return message.sender_name or f"群友#{message.sender_id[-4:]}"


def line_of(logged: LoggedMessage, bot_ids: Iterable[str], self_label: str) -> dict[str, Any]:
    """One message as the learning model reads it: its id, time, speaker, whether it is the
    bot's, what it replies to, and its text (images as ``[图片]``, at most :data:`LINE_CHARS`)."""
    message = logged.message
    ids = set(bot_ids)
    text = " ".join(message.text.split()) or (IMAGE_MARK if message.images else "")
    return {
        "id": message.id,
        "time": message.time.isoformat(timespec="minutes"),
        "speaker": speaker_name(logged, ids, self_label),
        "user_id": message.sender_id,
        "bot": message.sender_id in ids,
        "reply_to": message.reply_to or "",
        "text": text[:LINE_CHARS],
    }
