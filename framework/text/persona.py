"""Persona packs: every bot-specific text of the prompt, kept as data (``docs/persona_packs.md``).

A pack is a TOML file. The sections and the message sequence read their static texts from it (the
guard rules, the persona, identity lines, the bot's self label, the label of peer bots, the user-turn
prefix, the relationship fallback line), so nothing bot-specific lives in code. Packs are found by
name through the ``register_persona_packs`` hook, or given as a path.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs

from promptweave._convert import load_toml, structure
from promptweave._fields import FrozenMapping, str_tuple

__all__ = [
    "GuardTexts",
    "IdentityTexts",
    "Labels",
    "LearningPrompt",
    "PackInfo",
    "PersonaPack",
    "PersonaTexts",
    "RelationshipTexts",
    "UserTurnTexts",
    "WordingHintTexts",
]


@attrs.frozen(kw_only=True)
class PackInfo:
    """Who the pack is for."""

    name: str
    language: str = "zh"
    description: str = ""


@attrs.frozen(kw_only=True)
class PersonaTexts:
    """Section ``persona``: the stable core personality, the same in every group.

    :param name: the persona's name, used in the guard and the user-turn prefix.
    :param text: the full section text, header included.
    """

    name: str
    text: str


@attrs.frozen(kw_only=True)
class GuardTexts:
    """Section ``injection_guard``: rules that user text must never override."""

    rules: tuple[str, ...] = attrs.field(converter=str_tuple)


@attrs.frozen(kw_only=True)
class IdentityTexts:
    """Section ``identity``: how the bot refers to itself and how the group addresses it.

    Each line is a template; ``{name}`` is the bot's nickname, ``{aliases}`` the names the group
    uses, ``{self}`` the self label. Lines whose placeholders are empty are left out.
    """

    lines: tuple[str, ...] = attrs.field(converter=str_tuple)
    generic_aliases: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)


@attrs.frozen(kw_only=True)
class Labels:
    """Speaker labels of the group timeline and the message sequence.

    :param self_label: the bot's own lines in the timeline.
    :param peer_bot: lines of other bots of the same deployment.
    :param member_fallback: a member without a display name; ``{tail}`` is the id's last 4 digits.
    :param bot_said_header: header of the quoted bot text when a user replies to the bot.
    :param excerpt_member: label of group members in the ambient excerpt.
    """

    self_label: str
    peer_bot: str
    member_fallback: str = "群友#{tail}"
    bot_said_header: str = "【{self}刚才说】"
    excerpt_member: str = "群友"


@attrs.frozen(kw_only=True)
class RelationshipTexts:
    """Section ``relationship``: what is said of the current speaker when nothing is known.

    :param fallback: the one line shown in a group chat, on a turn that may read persistent memory,
        when the speaker has no fact, no guidance and an affinity of 0
        (``docs/design.md#retrieval-order``, ``include_fallback``); ``""`` shows nothing then.
    """

    fallback: str = ""


@attrs.frozen(kw_only=True)
class UserTurnTexts:
    """The lines wrapped around every user message of the message sequence."""

    prefix: str
    injection_suffix: str


@attrs.frozen(kw_only=True)
class LearningPrompt:
    """What a model learner asks the learning model (``docs/learning.md``): the system prompt
    and the instruction that comes before the input (JSON) in the user message.

    ``{persona}`` and ``{self}`` are filled as everywhere in the pack; ``{max_chars}`` with the
    learner's length limit where it has one.
    """

    system: str
    instruction: str


def _tones(values: Mapping[str, str]) -> Mapping[str, str]:
    return FrozenMapping(values)


def _classes(values: Mapping[str, tuple[str, ...]]) -> Mapping[str, tuple[str, ...]]:
    return FrozenMapping({label: str_tuple(words) for label, words in values.items()})


@attrs.frozen(kw_only=True)
class WordingHintTexts:
    """What the built-in plugin ``wording_hints`` says, and the words it reads the replies and
    the message with (``docs/persona_packs.md``, ``[wording_hints]``). Every text is optional:
    ``""`` (the default, so an older pack loads) gives no hint of that kind.

    :param repeat_same_message: 「同句重回」 when the user says again what the bot already answered:
        ``{trigger}`` is the message, ``{previous}`` the bot's answer then.
    :param repeat_own_reply: when the bot gave the same reply several times of late:
        ``{previous}`` is the reply, ``{count}`` how often.
    :param opening: when recent replies opened the same way: ``{openers}`` names the openings.
    :param closing: when the last replies all ended with the same character ``{ending}``.
    :param closing_question: the same, when that character is a question mark.
    :param scene_tones: ``greeting``, ``praise``, ``agreement``: the tone of such a turn.
    :param opener_words: openings counted as such (``确实``, ``行吧``…), matched at the start.
    :param opener_classes: a label per family of openings (``哈哈类``: ``哈哈``, ``嘿嘿``…).
    :param greeting_words: words that make the message a greeting.
    :param praise_words: words that make the message praise.
    """

    repeat_same_message: str = ""
    repeat_own_reply: str = ""
    opening: str = ""
    closing: str = ""
    closing_question: str = ""
    scene_tones: Mapping[str, str] = attrs.field(factory=dict, converter=_tones)
    opener_words: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    opener_classes: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict, converter=_classes)
    greeting_words: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    praise_words: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)


def _prompts(values: Mapping[str, LearningPrompt]) -> Mapping[str, LearningPrompt]:
    return FrozenMapping(values)


def _read_only(names: Mapping[str, str]) -> Mapping[str, str]:
    # The pack is shared by every turn: a plugin must not be able to rename members for all.
    return FrozenMapping(names)


@attrs.frozen(kw_only=True)
class PersonaPack:
    """All bot-specific static text of a deployment."""

    pack: PackInfo
    persona: PersonaTexts
    guard: GuardTexts
    identity: IdentityTexts
    labels: Labels
    user_turn: UserTurnTexts
    relationship: RelationshipTexts = attrs.field(factory=RelationshipTexts)
    display_names: Mapping[str, str] = attrs.field(factory=dict, converter=_read_only)
    learning_prompts: Mapping[str, LearningPrompt] = attrs.field(factory=dict, converter=_prompts)
    wording_hints: WordingHintTexts = attrs.field(factory=WordingHintTexts)

    @classmethod
    def from_file(cls, path: Path) -> PersonaPack:
        """Load a pack; a malformed one raises :class:`promptweave.errors.ConfigError`."""
        return structure(load_toml(path), cls, str(path))

    def format(self, template: str) -> str:
        """Fill the pack-wide placeholders ``{persona}`` and ``{self}`` of a template."""
        return template.replace("{persona}", self.persona.name).replace(
            "{self}", self.labels.self_label
        )
