"""``promptweave.toml``: the deployment's settings (``docs/configuration.md``).

Loaded with the project's one cattrs converter into frozen attrs classes. Unknown keys are errors,
reported one line per problem with the key path.
"""

from __future__ import annotations

import math
import os
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from promptweave._convert import load_toml, structure
from promptweave._fields import FrozenMapping, finite_seconds, one_of, str_tuple
from promptweave._patterns import lazy_pattern
from promptweave.errors import ConfigError

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE_NAME",
    "SYNCHRONOUS_LEVELS",
    "AmbientConfig",
    "BudgetConfig",
    "Config",
    "DeliveryConfig",
    "GroupConfig",
    "HistoryConfig",
    "ModelPrice",
    "PluginsConfig",
    "ProviderConfig",
    "RetrievalConfig",
    "RoutingConfig",
    "SessionConfig",
    "StoreConfig",
    "TimelineConfig",
    "TokensConfig",
    "TurnContextConfig",
]

CONFIG_FILE_NAME = "promptweave.toml"
CONFIG_ENV = "PROMPTWEAVE_CONFIG"
#: SQLite's ``PRAGMA synchronous`` levels, weakest first (``docs/store.md``); the settings hold one.
SYNCHRONOUS_LEVELS = ("off", "normal", "full", "extra")

_positive = attrs.validators.ge(1)
_non_negative = attrs.validators.ge(0)
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def _as_tuple(values: Iterable[Any]) -> tuple[Any, ...]:
    """``tuple`` as a converter. attrs reads each converter's signature when it builds the class,
    and the signature of a builtin is parsed from its text form by ``tokenize``, whose patterns
    then compile on every start (``docs/performance.md``)."""
    return tuple(values)


def _redis_url(_instance: object, _attribute: object, value: str) -> None:
    if not value.startswith(_REDIS_SCHEMES):
        schemes = ", ".join(_REDIS_SCHEMES)
        raise ValueError(f"url must start with one of {schemes}, not {value!r}")


def _key_prefix(_instance: object, _attribute: object, value: str) -> None:
    if "{" in value or "}" in value:
        raise ValueError(f"prefix cannot contain braces (Redis hash tags), not {value!r}")


@attrs.frozen(kw_only=True)
class BudgetConfig:
    """The character budget of one request: system prompt plus messages
    (``docs/design.md#character-budget``).

    :param chars: the budget; 0 disables trimming.
    """

    chars: int = attrs.field(default=12000, validator=_non_negative)


@attrs.frozen(kw_only=True)
class TimelineConfig:
    """Section ``group_timeline`` (``docs/design.md#group-timeline``)."""

    addressed_limit: int = attrs.field(default=8, validator=_positive)
    ambient_limit: int = attrs.field(default=4, validator=_positive)
    line_chars: int = attrs.field(default=240, validator=_positive)
    block_chars: int = attrs.field(default=2400, validator=_positive)
    max_images: int = attrs.field(default=3, validator=_non_negative)


@attrs.frozen(kw_only=True)
class HistoryConfig:
    """The current user's history in the message sequence.

    :param user_window: the rows of the window (a summary row among them): the newest rows in
        ``system`` mode; the least it holds in the cache mode.
    :param window_step: in the cache mode (``[turn_context] turn_sections = "user"``) the window
        moves by this many rows at once: it grows to ``user_window + window_step - 1`` rows, then
        the oldest ``window_step`` leave together, so the cached prefix breaks once per step
        (``docs/cost.md``). ``1`` moves it by one row each turn, as ``system`` mode always does.
    """

    user_window: int = attrs.field(default=18, validator=_positive)
    window_step: int = attrs.field(default=8, validator=_positive)


@attrs.frozen(kw_only=True)
class StoreConfig:
    """Where conversational and retrieval state lives.

    :param backend: ``sqlite`` (the default: one file, nothing to install), ``memory``, or
        ``redis`` (the conversational and routing state in a Redis server shared by several bot
        processes; needs ``pip install 'promptweave[redis]'``).
    :param path: the SQLite file, relative to the config file's directory; with ``redis`` it
        holds the retrieval data only.
    :param url: the Redis server of the ``redis`` backend (``redis://``, ``rediss://`` or
        ``unix://``; query options such as ``?socket_timeout=1`` are passed to the client).
    :param prefix: the start of every Redis key, so deployments can share one server; no braces
        (keys carry their own ``{bot:group}`` Cluster hash tag).
    :param enabled: ``false`` runs without conversational state: every turn sends only the
        current message (``docs/design.md#degradation``).
    :param synchronous: the SQLite file's ``PRAGMA synchronous``: ``normal`` (a recorded write
        survives any process crash), ``full`` (it survives a power loss too), ``extra`` or ``off``
        (``docs/store.md``, "What recorded means").
    """

    backend: str = attrs.field(default="sqlite", validator=one_of("sqlite", "memory", "redis"))
    path: str = "promptweave.sqlite3"
    url: str = attrs.field(default="redis://localhost:6379/0", validator=_redis_url)
    prefix: str = attrs.field(default="promptweave:", validator=_key_prefix)
    enabled: bool = True
    synchronous: str = attrs.field(default="normal", validator=one_of(*SYNCHRONOUS_LEVELS))


@attrs.frozen(kw_only=True)
class SessionConfig:
    """Session storage, summary compression and the bot-reply context
    (``docs/design.md#long-session-compression`` and ``docs/design.md#bot-reply-context``).

    :param storage_window: session rows kept per user; older ones are deleted on append.
    :param max_content_chars: cap of one stored turn and of one user message sent.
    :param group_ttl_s: age after which a group session turn is no longer read; 0 keeps all.
    :param private_ttl_s: the same for private chats (three days by default).
    :param summary_enabled: compress long sessions into a summary row after delivery.
    :param summary_threshold: user turns in a session that trigger compression (at least 8).
    :param summary_keep: the newest rows kept verbatim after compression (at least 4).
    :param summary_cooldown_s: seconds between two compressions of one (bot, group, user).
    :param summary_max_chars: the longest summary text.
    :param describe_images: keep the URLs of the images of a user's session turns, so that
        compression can describe them once through the ``describe_image`` hook
        (``docs/design.md#images``). ``False`` records them as plain ``[图片]`` marks without URL,
        and compression describes no image, also of rows recorded while it was ``True``. The current
        message's images and the group log (timeline, quoted images) are not affected.
    :param bot_reply_ttl_s: how long a delivered bot message can be looked up when quoted.
    :param bot_reply_max_entries: how many delivered bot messages are remembered.
    """

    storage_window: int = attrs.field(default=200, validator=_positive)
    max_content_chars: int = attrs.field(default=4000, validator=attrs.validators.ge(64))
    group_ttl_s: int = attrs.field(default=0, validator=_non_negative)
    private_ttl_s: int = attrs.field(default=259200, validator=_non_negative)
    summary_enabled: bool = True
    summary_threshold: int = attrs.field(default=24, validator=attrs.validators.ge(8))
    summary_keep: int = attrs.field(default=16, validator=attrs.validators.ge(4))
    summary_cooldown_s: int = attrs.field(default=600, validator=_non_negative)
    summary_max_chars: int = attrs.field(default=120, validator=attrs.validators.ge(20))
    describe_images: bool = True
    bot_reply_ttl_s: int = attrs.field(default=600, validator=_positive)
    bot_reply_max_entries: int = attrs.field(default=512, validator=_positive)

    def __attrs_post_init__(self) -> None:
        if self.summary_keep >= self.summary_threshold:
            raise ValueError(
                f"session.summary_keep ({self.summary_keep}) must be below "
                f"session.summary_threshold ({self.summary_threshold})"
            )
        if self.summary_keep >= self.storage_window:
            raise ValueError(
                f"session.summary_keep ({self.summary_keep}) must be below "
                f"session.storage_window ({self.storage_window})"
            )


@attrs.frozen(kw_only=True)
class AmbientConfig:
    """The ambient excerpt ``【群环境摘录】`` of the message sequence
    (``docs/design.md#the-message-sequence``).

    :param enabled: ``false`` never sends the excerpt.
    :param window: the group's latest session turns read for it.
    :param line_chars: cap of one excerpt line.
    :param block_chars: cap of the whole excerpt.
    """

    enabled: bool = True
    window: int = attrs.field(default=8, validator=_positive)
    line_chars: int = attrs.field(default=512, validator=_positive)
    block_chars: int = attrs.field(default=4000, validator=_positive)


_unit = attrs.validators.and_(attrs.validators.ge(0.0), attrs.validators.le(1.0))


def _timeouts(value: Any) -> Mapping[str, float]:
    timeouts = {str(name): float(seconds) for name, seconds in dict(value).items()}
    for name, seconds in timeouts.items():
        if not 0 < seconds < float("inf"):
            raise ValueError(f"retrieval timeout of {name!r} must be positive, got {seconds}")
    # Read-only: the settings are shared by every turn and every plugin.
    return FrozenMapping(timeouts)


@attrs.frozen(kw_only=True)
class RetrievalConfig:
    """Limits and thresholds of the built-in retrievers (``docs/retrieval.md``).

    Scores are in [0, 1] (see "Scoring" in the docs); similarities of expression pairs too.

    :param timeouts: per-retriever timeout in seconds, by retriever name, overriding the
        retriever's own ``timeout_s``.
    :param threads: worker threads for synchronous retrievers.
    :param memory_limit: memories per turn (all four kinds together).
    :param event_fill: when a group chat has no persistent memory hit, fill in recent group lines
        that read as events.
    :param knowledge_question_words: extra words that make a message a knowledge question.
    :param mid_term_limit: old topics per turn (at most 3, ``docs/design.md#the-fifteen-sections``).
    :param expression_pairs: direct pairs per turn (at most 2).
    :param strategies: behavior strategies of each kind per turn (at most 3).
    """

    timeouts: Mapping[str, float] = attrs.field(factory=dict, converter=_timeouts)
    threads: int = attrs.field(default=8, validator=_positive)
    memory_limit: int = attrs.field(default=6, validator=_positive)
    memory_min_score: float = attrs.field(default=0.15, validator=_unit)
    event_fill: bool = True
    knowledge_limit: int = attrs.field(default=3, validator=_positive)
    knowledge_min_score: float = attrs.field(default=0.15, validator=_unit)
    knowledge_question_words: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    person_facts_limit: int = attrs.field(default=6, validator=_positive)
    mid_term_limit: int = attrs.field(default=3, validator=_positive)
    mid_term_min_score: float = attrs.field(default=0.2, validator=_unit)
    mid_term_scan: int = attrs.field(default=60, validator=_positive)
    expression_pairs: int = attrs.field(default=2, validator=_positive)
    expression_min_similarity: float = attrs.field(default=0.5, validator=_unit)
    strategies: int = attrs.field(default=3, validator=_positive)


def _silence_range(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value != 0 and not 30 <= value <= 300:
        raise ValueError(f"{attribute.name} must be 0 (off) or between 30 and 300 seconds")


def _probability(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} must be between 0 and 1")


def _probability_table(
    _instance: object, attribute: attrs.Attribute[tuple[float, ...]], value: tuple[float, ...]
) -> None:
    if len(value) != 4 or not all(0.0 <= p <= 1.0 for p in value):
        raise ValueError(
            f"{attribute.name} must be four probabilities (0, 1-2, 3-4, 5+ recent bot replies)"
        )


@attrs.frozen(kw_only=True)
class RoutingConfig:
    """Turn routing: gates, reply necessity, decision rules, quoting, the low-engagement exit
    (``docs/design.md#the-routing-flow``; ``docs/routing.md``).

    :param model_decision: ask the ``decide_with_model`` hook instead of the decide rules; an
        invalid answer or a failure falls back to the rules.
    :param min_chars: gate ``short``: messages shorter than this (images count as content) skip.
    :param shut_up_silence_s: the group's silence after a shut-up request, 30–300 s; 0 turns it off.
    :param reply_cooldown_s: after a delivered reply the group cools down this long; messages
        arriving meanwhile are kept for the next trigger. 0 turns it off.
    :param kept_messages_max: at most this many messages are kept per group during a cooldown.
    :param necessity_threshold: the reply-necessity score needed to proceed.
    :param quote_candidates: how many recent messages per group can be quoted.
    :param quote_cooldown_s: seconds after a delivered quote before the group may get another.
    :param quote_probability: chance of quoting when the throttle allows it.
    :param low_engagement: offer a short canned phrase on a PASS instead of pure silence.
    :param low_engagement_probabilities: emit probability by recent bot replies: 0, 1–2, 3–4, 5+.
    :param phrase_max_chars: the longest canned phrase.
    :param short_social_chars: the longest text that can be a short social turn.
    :param bot_reply_window: how many recent group messages are searched for the bot's replies.
    :param bot_reply_window_s: how far back the routing state's record of bot replies counts.
    :param follow_up_window_s: a message within this many seconds before the current one gives a
        demonstrative ("那个") its antecedent, so no follow-up question is needed; a
        ``followup``-triggered message this soon after the bot spoke calls the bot.
    """

    model_decision: bool = False
    min_chars: int = attrs.field(default=1, validator=_non_negative)
    shut_up_silence_s: int = attrs.field(default=120, validator=_silence_range)
    reply_cooldown_s: float = attrs.field(default=0.0, validator=finite_seconds)
    kept_messages_max: int = attrs.field(default=20, validator=_positive)
    necessity_threshold: int = 50
    quote_candidates: int = attrs.field(default=6, validator=_positive)
    quote_cooldown_s: float = attrs.field(default=120.0, validator=finite_seconds)
    quote_probability: float = attrs.field(default=0.25, validator=_probability)
    low_engagement: bool = True
    low_engagement_probabilities: tuple[float, ...] = attrs.field(
        default=(0.35, 0.20, 0.10, 0.05), converter=_as_tuple, validator=_probability_table
    )
    phrase_max_chars: int = attrs.field(default=12, validator=_positive)
    short_social_chars: int = attrs.field(default=24, validator=_positive)
    bot_reply_window: int = attrs.field(default=48, validator=_positive)
    bot_reply_window_s: float = attrs.field(default=600.0, validator=finite_seconds)
    follow_up_window_s: float = attrs.field(default=180.0, validator=finite_seconds)


def _face_table(value: Any) -> dict[str, str]:
    faces = {str(intent).strip(): str(face_id).strip() for intent, face_id in dict(value).items()}
    for intent, face_id in faces.items():
        if not intent:
            raise ValueError("faces: a sticker intent cannot be blank")
        if not face_id.isdigit():
            raise ValueError(f"faces: the face id of {intent!r} must be a number, not {face_id!r}")
    return faces


@attrs.frozen(kw_only=True)
class DeliveryConfig:
    """How an answer goes out: pauses between bubbles and stickers (``docs/delivery.md``).

    :param pause_base_s: the pause before every bubble after the first.
    :param pause_per_char_s: added to that pause per character of the bubble, so a longer bubble
        takes longer to "type".
    :param pause_max_s: the longest pause.
    :param sticker: ``face`` sends the answer's final ``[表情：…]`` intent as a platform face when
        ``faces`` (or a ``choose_sticker`` plugin) maps it; ``drop`` never sends one.
    :param faces: sticker intent to QQ face id (``"笑" = 178``); an intent not listed is dropped.
    :param mention_cooldown_s: the shortest time between two @-mentions of the bot in one group;
        a mention decided sooner goes out plain (quotes and plain replies are not affected).
    """

    pause_base_s: float = attrs.field(default=0.6, validator=finite_seconds)
    pause_per_char_s: float = attrs.field(default=0.05, validator=finite_seconds)
    pause_max_s: float = attrs.field(default=3.0, validator=finite_seconds)
    sticker: str = attrs.field(default="face", validator=one_of("face", "drop"))
    faces: dict[str, str] = attrs.field(factory=dict, converter=_face_table)
    mention_cooldown_s: float = attrs.field(default=900.0, validator=finite_seconds)


@attrs.frozen(kw_only=True)
class PluginsConfig:
    """Which optional plugins to load.

    :param contrib: names of ``contrib`` plugins to enable.
    :param strict: raise when a section's ``render`` raises, instead of leaving it out (for tests).
    :param turn_deadline_s: the longest a turn waits for its plugins (routing rules, phrase
        pools, sections, overrides, the turn-context hooks); a plugin still running then is left
        behind, named in the trace and skipped until it returns (``docs/plugin_hooks.md``). 0
        turns the bound off: plugins run on the caller's thread, for as long as they take.
    :param quarantine_s: how long a plugin that hung stays skipped after its hung call returned.
    :param register_deadline_s: the longest one plugin's ``register_*`` hook may take at
        start-up; past it start-up stops with an error naming the plugin.
    """

    contrib: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    strict: bool = False
    turn_deadline_s: float = attrs.field(default=5.0, validator=finite_seconds)
    quarantine_s: float = attrs.field(default=60.0, validator=finite_seconds)
    register_deadline_s: float = attrs.field(default=10.0, validator=finite_seconds)


@attrs.frozen(kw_only=True)
class TurnContextConfig:
    """The per-turn context and preflight compression (``docs/turn_context.md``).

    :param threshold_tokens: a request estimated at this many tokens or more is compressed first.
    :param protect_first: messages at the front a compression keeps (a summary row, the opening).
    :param protect_last: messages at the end a compression keeps (the current exchange).
    :param max_passes: compression passes per turn; stops early at the first pass without progress.
    :param image_token_cost: flat token cost of one image in the estimate (never its bytes).
    :param note_max_chars: a note longer than this is cut.
    :param turn_sections: where the retrieval and turn sections go: ``system`` (in the system
        prompt, after the cached stable prefix) or ``user``, the cache mode (with the profile
        sections, in a part of their own after the current user message's text, the history
        sent as it was said, so that only what is new is processed again: ``docs/cost.md``).
    """

    threshold_tokens: int = attrs.field(default=24000, validator=_positive)
    protect_first: int = attrs.field(default=3, validator=_non_negative)
    protect_last: int = attrs.field(default=20, validator=_positive)
    max_passes: int = attrs.field(default=3, validator=_positive)
    image_token_cost: int = attrs.field(default=1500, validator=_non_negative)
    note_max_chars: int = attrs.field(default=2000, validator=_positive)
    turn_sections: str = attrs.field(
        default="system", validator=attrs.validators.in_(("system", "user"))
    )


@attrs.frozen(kw_only=True)
class ProviderConfig:
    """The LLM provider requests are built for (``docs/turn_context.md``).

    :param api: ``openai_chat``, ``openai_responses`` or ``anthropic``.
    :param model: the model name; ``""`` uses the API's default model.
    :param base_url: the API's base URL for the client plugin of ``api`` (``openai_compat``: an
        OpenAI-compatible server, else ``$OPENAI_BASE_URL``; ``anthropic_messages``: else
        ``$ANTHROPIC_BASE_URL``).
    :param api_key: the key (prefer ``$PROMPTWEAVE_API_KEY``, ``$OPENAI_API_KEY`` or
        ``$ANTHROPIC_API_KEY``).
    :param supports_images: the model declares image input. Off by default: images are sent (and
        downloaded) only for a provider that declares them (``docs/design.md#images``); else they
        become ``[图片]`` and nothing is downloaded.
    :param inline_images: with ``supports_images``, download each image before the request and send
        it inline (base64), as the reference bot does for a provider that declares images; ``False``
        passes the URLs, for a provider that can reach the platform's image hosts itself.
    :param image_max_bytes: the largest image downloaded.
    :param image_types: the media types accepted.
    :param max_tokens: the reply's token limit.
    :param timeout_s: the request and download timeout.
    :param prompt_cache_key: the OpenAI formats send ``prompt_cache_key`` (one per group, or per
        user in a private chat), so one group's turns share the provider's prompt cache.
    :param max_attempts: how many times a client plugin tries a request (the first try
        included) on a rate limit, a server error, a timeout or a broken connection.
    :param retry_max_wait_s: the longest wait between two attempts, a server's ``Retry-After``
        included.
    """

    api: str = attrs.field(
        default="openai_chat",
        validator=attrs.validators.in_(("openai_chat", "openai_responses", "anthropic")),
    )
    model: str = ""
    base_url: str = ""
    api_key: str = attrs.field(default="", repr=False)
    supports_images: bool = False
    inline_images: bool = True
    image_max_bytes: int = attrs.field(default=5 * 1024 * 1024, validator=_positive)
    image_types: tuple[str, ...] = attrs.field(
        default=("image/jpeg", "image/png", "image/gif", "image/webp"), converter=_as_tuple
    )
    max_tokens: int = attrs.field(default=1024, validator=_positive)
    timeout_s: float = attrs.field(default=60.0, validator=[attrs.validators.gt(0), finite_seconds])
    prompt_cache_key: bool = True
    max_attempts: int = attrs.field(default=3, validator=_positive)
    retry_max_wait_s: float = attrs.field(default=20.0, validator=attrs.validators.ge(0.0))


def _price(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        raise ValueError(
            f"{attribute.name} must be a price per million tokens, 0 or more, not {value!r}"
        )


@attrs.frozen(kw_only=True)
class ModelPrice:
    """What one model's tokens cost, per million tokens (``[prices."MODEL"]``, ``docs/cost.md``).

    :param input: an uncached prompt token.
    :param output: a generated token.
    :param cached_input: a prompt token served from the provider's prompt cache; the input price
        when not given (a provider without a cache discount).
    :param cache_write: a prompt token written to the cache (Anthropic bills it above the input
        price); the input price when not given.
    :param currency: the currency of the prices, for the figures (``USD``).
    :param min_cached_tokens: the shortest prefix the provider caches (OpenAI's 1,024 tokens):
        where the provider reports no cached tokens and they are estimated from the prefix, a
        shorter shared prefix counts as uncached.
    """

    input: float = attrs.field(validator=_price)
    output: float = attrs.field(validator=_price)
    cached_input: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(_price)
    )
    cache_write: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(_price)
    )
    currency: str = attrs.field(default="USD", validator=attrs.validators.min_len(1))
    min_cached_tokens: int = attrs.field(default=0, validator=_non_negative)


@attrs.frozen(kw_only=True)
class TokensConfig:
    """How tokens are counted (``docs/cost.md``, "Counting tokens").

    :param tokenize_url: the tokenize endpoint of the model's server, for the contrib plugin
        ``tokenize_endpoint`` (llama.cpp's ``http://HOST:PORT/tokenize``, llama-cpp-python's
        ``http://HOST:PORT/extras/tokenize/count``); ``""`` counts nothing and every figure is
        estimated.
    :param timeout_s: the longest one tokenize call may take.
    :param cache_size: texts whose count is kept (the system prompt and the history repeat).
    :param retry_after_s: after a failed call, how long the endpoint is not asked again (the
        estimate counts meanwhile, and each turn's trace says so).
    """

    tokenize_url: str = ""
    timeout_s: float = attrs.field(default=2.0, validator=[attrs.validators.gt(0), finite_seconds])
    cache_size: int = attrs.field(default=4096, validator=_non_negative)
    retry_after_s: float = attrs.field(default=30.0, validator=finite_seconds)


@attrs.frozen(kw_only=True)
class LoopConfig:
    """``[loop]``: the bounds of the live loop (``docs/bot.md``).

    :param max_in_flight: turns running at once, over all conversations.
    :param queue_per_conversation: events waiting behind a conversation's running turn; one more
        is dropped (recorded, traced, not answered).
    :param turn_deadline_s: the longest a turn may take from routing to the model's answer; past
        it the turn ends in silence and the trace names the stage it was in.
    :param send_timeout_s: the longest one send may take.
    :param quoted_fetch_timeout_s: the longest the platform is waited for a quoted message that
        neither the event nor the store holds (OneBot ``get_msg``); past it the turn goes on
        without its images.
    :param tool_rounds: model calls that may request tools in one turn.
    :param tool_timeout_s: the longest one tool call may take.
    """

    max_in_flight: int = attrs.field(default=32, validator=_positive)
    queue_per_conversation: int = attrs.field(default=16, validator=_positive)
    turn_deadline_s: float = attrs.field(default=90.0, validator=attrs.validators.gt(0))
    send_timeout_s: float = attrs.field(default=30.0, validator=attrs.validators.gt(0))
    quoted_fetch_timeout_s: float = attrs.field(default=3.0, validator=attrs.validators.gt(0))
    tool_rounds: int = attrs.field(default=3, validator=_non_negative)
    tool_timeout_s: float = attrs.field(default=10.0, validator=attrs.validators.gt(0))


@attrs.frozen(kw_only=True)
class LearningModelConfig:
    """``[learning.model]``: the model the model learners, the session summary and the image
    descriptions ask (``docs/learning.md``, the learning model). Every empty setting falls back to
    ``[provider]``'s.

    :param enabled: ask a model at all; ``false`` leaves strategies, person facts, relationships,
        group events to no one, and summaries to the extractive default.
    :param client: who answers: ``auto`` (the turns' client: ``offline`` when the ``offline_model``
        plugin is enabled, else the client plugin of ``api`` when it is enabled), ``offline`` (the
        deterministic offline learning model), ``openai_compat`` or ``anthropic_messages``.
    :param api: ``openai_chat``, ``openai_responses`` or ``anthropic``; ``""``: ``[provider] api``.
    :param model: the model name; ``""``: ``[provider] model``.
    :param base_url: the endpoint; ``""``: ``[provider] base_url`` (for the same ``api``), else the
        client's environment variables and default.
    :param api_key: the key; ``""``: ``[provider] api_key`` (for the same ``api``), else the
        client's environment variables.
    :param structured: how an OpenAI-format request asks for JSON that follows the answer's schema:
        ``json_schema`` (``response_format`` of type ``json_schema``: OpenAI, llama.cpp's own
        server, vLLM) or ``json_object`` (type ``json_object`` with a ``schema``:
        llama-cpp-python's server). Anthropic is always asked through a forced tool call.
    :param max_tokens: each answer's token limit.
    :param temperature: sampling temperature.
    :param timeout_s: each attempt's timeout (the client retries as ``[provider] max_attempts``).
    :param vision: the model accepts images: ``describe_image`` asks it to describe the images of
        a session being summarized (with ``[session] describe_images`` on).
    """

    enabled: bool = True
    client: str = attrs.field(
        default="auto",
        validator=attrs.validators.in_(("auto", "offline", "openai_compat", "anthropic_messages")),
    )
    api: str = attrs.field(
        default="",
        validator=attrs.validators.in_(("", "openai_chat", "openai_responses", "anthropic")),
    )
    model: str = ""
    base_url: str = ""
    api_key: str = attrs.field(default="", repr=False)
    structured: str = attrs.field(
        default="json_schema", validator=attrs.validators.in_(("json_schema", "json_object"))
    )
    max_tokens: int = attrs.field(default=512, validator=_positive)
    temperature: float = attrs.field(
        default=0.2, validator=[attrs.validators.ge(0.0), attrs.validators.le(2.0)]
    )
    timeout_s: float = attrs.field(default=60.0, validator=[attrs.validators.gt(0), finite_seconds])
    vision: bool = False


@attrs.frozen(kw_only=True)
class LearningBudgetConfig:
    """``[learning.budget]``: what learning may spend (``docs/learning.md``, the budget). Over a
    rolling hour and a rolling day (24 hours), overall and per (bot, group); ``0`` is no limit.
    Tokens are those the provider reports (prompt and output). When a limit is reached, model
    learners wait until the window frees; turns never wait.
    """

    calls_per_hour: int = attrs.field(default=120, validator=attrs.validators.ge(0))
    calls_per_day: int = attrs.field(default=1000, validator=attrs.validators.ge(0))
    tokens_per_hour: int = attrs.field(default=200_000, validator=attrs.validators.ge(0))
    tokens_per_day: int = attrs.field(default=1_000_000, validator=attrs.validators.ge(0))
    group_calls_per_hour: int = attrs.field(default=30, validator=attrs.validators.ge(0))
    group_calls_per_day: int = attrs.field(default=200, validator=attrs.validators.ge(0))
    group_tokens_per_hour: int = attrs.field(default=50_000, validator=attrs.validators.ge(0))
    group_tokens_per_day: int = attrs.field(default=200_000, validator=attrs.validators.ge(0))


@attrs.frozen(kw_only=True)
class LearningConfig:
    """``[learning]``: the learner stage (``docs/learning.md``).

    :param enabled: run the learners (in the live loop, a replay and ``promptweave learn``).
    :param tick_s: how often the live loop looks for learners with work waiting.
    :param max_concurrency: learner runs at once.
    :param max_runs_per_tick: the most runs one tick starts; groups waiting longest go first.
    :param lease_s: how long a process's claim on a (learner, bot, group) lasts unless renewed.
    :param retry_s: the wait after a failed run, doubled on each further failure…
    :param retry_max_s: …up to this.
    :param opt_out_groups: group ids (or ``"BOT:GROUP"``) of which nothing is learned or kept:
        what was learned of them is deleted when the stage starts.
    :param learners: ``[learning.learners.NAME]``: ``enabled``, ``min_batch``, ``interval_s``,
        ``max_batch``, ``max_items`` (the cap of each kind it writes), and the learner's own keys.
    :param model: ``[learning.model]``: the model the model learners ask.
    :param budget: ``[learning.budget]``: what they may spend.
    """

    enabled: bool = True
    tick_s: float = attrs.field(default=5.0, validator=attrs.validators.gt(0))
    max_concurrency: int = attrs.field(default=2, validator=_positive)
    max_runs_per_tick: int = attrs.field(default=8, validator=_positive)
    lease_s: float = attrs.field(default=120.0, validator=attrs.validators.gt(0))
    retry_s: float = attrs.field(default=5.0, validator=attrs.validators.gt(0))
    retry_max_s: float = attrs.field(default=600.0, validator=attrs.validators.gt(0))
    opt_out_groups: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    learners: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    model: LearningModelConfig = LearningModelConfig()
    budget: LearningBudgetConfig = LearningBudgetConfig()

    def opted_out(self, bot_id: str, group_id: str) -> bool:
        """Whether nothing of this (bot, group) may be learned or kept (``"BOT:*"``: no group of
        that bot, what ``learn = false`` in ``[bots."BOT".groups."*"]`` gives)."""
        return (
            group_id in self.opt_out_groups
            or f"{bot_id}:{group_id}" in self.opt_out_groups
            or f"{bot_id}:*" in self.opt_out_groups
        )

    def learner(self, name: str) -> dict[str, Any]:
        """The ``[learning.learners.NAME]`` table (empty when absent)."""
        return dict(self.learners.get(name, {}))


#: ``quiet_hours`` ranges: ``"23:00-07:30"`` (24-hour clock, the bot's time zone).
QUIET_RANGE = lazy_pattern(r"^([01]?\d|2[0-3]):([0-5]\d)-([01]?\d|2[0-3]|24):([0-5]\d)$")
#: What ``quiet_allow`` may let through during quiet hours.
QUIET_ALLOW = ("addressed", "none")


def _quiet_hours(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    ranges = str_tuple(value)
    for text in ranges:
        found = QUIET_RANGE.match(text.strip())
        if found is None or (found.group(3) == "24" and found.group(4) != "00"):
            raise ValueError(
                f'quiet_hours: {text!r} is not a range like "23:00-07:30" (HH:MM-HH:MM)'
            )
        if found.group(1, 2) == found.group(3, 4):
            raise ValueError(f"quiet_hours: {text!r} starts where it ends")
    return tuple(text.strip() for text in ranges)


def _optional_probabilities(value: Any) -> tuple[float, ...] | None:
    return None if value is None else tuple(value)


def _optional_table(
    instance: object, attribute: attrs.Attribute[Any], value: tuple[float, ...] | None
) -> None:
    if value is not None:
        _probability_table(instance, attribute, value)


@attrs.frozen(kw_only=True)
class GroupConfig:
    """``[bots."ID".groups."GROUP"]``: one bot's settings in one group, or with ``"*"`` in
    every group of the bot (``docs/groups.md``). An unset key (``None``) takes the ``"*"`` table's
    value, then ``[routing]``'s; :func:`promptweave.routing.group_control.group_settings` gives
    the settings in force.

    :param enabled: ``false`` keeps the bot silent in the group (``group_disabled``).
    :param necessity_threshold: the reply-necessity score needed to proceed.
    :param low_engagement: offer a canned phrase on a PASS.
    :param low_engagement_probabilities: the exit's probability by recent bot replies.
    :param quiet_hours: ranges ``"HH:MM-HH:MM"`` in the bot's time zone (``[bots."ID"]
        timezone``), a range past midnight included (``"23:00-07:30"``); ``[]``: none.
    :param quiet_allow: what goes through during quiet hours: ``addressed`` (messages addressed
        to the bot: an @, a reply to it, its name) or ``none`` (nothing).
    :param learn: ``false`` opts the group out of learning, as ``[learning] opt_out_groups``
        does; an opt-out always wins (``true`` never undoes one given elsewhere).
    """

    enabled: bool | None = None
    necessity_threshold: int | None = None
    low_engagement: bool | None = None
    low_engagement_probabilities: tuple[float, ...] | None = attrs.field(
        default=None, converter=_optional_probabilities, validator=_optional_table
    )
    quiet_hours: tuple[str, ...] | None = attrs.field(default=None, converter=_quiet_hours)
    quiet_allow: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(one_of(*QUIET_ALLOW))
    )
    learn: bool | None = None


def _group_tables(value: Any) -> Mapping[str, GroupConfig]:
    tables = dict(value)
    for group_id in tables:
        if not str(group_id).strip():
            raise ValueError("groups: a group id cannot be blank")
    return FrozenMapping({str(group_id): table for group_id, table in tables.items()})


@attrs.frozen(kw_only=True)
class BotConfig:
    """``[bots."ID"]``: one bot account's identity and its groups (``docs/configuration.md``,
    ``docs/groups.md``).

    :param name: its nickname; empty falls back to the persona pack's name.
    :param aliases: other names members use for it; empty falls back to the persona pack's.
    :param timezone: IANA time zone of section ``current_time`` and of quiet hours.
    :param peer_bot_ids: accounts of other bots of the same deployment.
    :param allow_groups: when not empty, the only groups the bot takes part in
        (``group_not_allowed`` elsewhere).
    :param deny_groups: groups the bot stays silent in (``group_denied``); not with
        ``allow_groups``.
    :param groups: ``[bots."ID".groups."GROUP"]`` (and ``"*"``): per-group settings.
    """

    name: str = ""
    aliases: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    timezone: str = "Asia/Shanghai"
    peer_bot_ids: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    allow_groups: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    deny_groups: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    groups: Mapping[str, GroupConfig] = attrs.field(factory=dict, converter=_group_tables)

    def __attrs_post_init__(self) -> None:
        if self.allow_groups and self.deny_groups:
            raise ValueError(
                "give allow_groups (the only groups) or deny_groups (every group but these), "
                "not both"
            )


@attrs.frozen(kw_only=True)
class Config:
    """All settings, each with its documented default (``docs/configuration.md``; ``docs/design.md``
    says where the defaults come from).

    :param persona_pack: a pack name registered through ``register_persona_packs``, or a path.
    :param overrides_file: TOML file of per-bot, per-group section overrides (relative paths are
        resolved against the config file's directory).
    :param tokens: how tokens are counted (``[tokens]``).
    :param prices: what each model's tokens cost, by model name (``[prices."MODEL"]``,
        ``docs/cost.md``).
    :param source: the file the settings came from, for error messages.
    """

    persona_pack: str = "default"
    overrides_file: str | None = None
    budget: BudgetConfig = BudgetConfig()
    timeline: TimelineConfig = TimelineConfig()
    history: HistoryConfig = HistoryConfig()
    store: StoreConfig = StoreConfig()
    plugins: PluginsConfig = PluginsConfig()
    turn_context: TurnContextConfig = TurnContextConfig()
    provider: ProviderConfig = ProviderConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    routing: RoutingConfig = RoutingConfig()
    session: SessionConfig = SessionConfig()
    ambient: AmbientConfig = AmbientConfig()
    loop: LoopConfig = LoopConfig()
    bots: dict[str, BotConfig] = attrs.field(factory=dict)
    delivery: DeliveryConfig = DeliveryConfig()
    learning: LearningConfig = LearningConfig()
    tokens: TokensConfig = TokensConfig()
    prices: dict[str, ModelPrice] = attrs.field(factory=dict)
    base_dir: Path = attrs.field(factory=Path.cwd, eq=False)
    source: str = attrs.field(default=CONFIG_FILE_NAME, eq=False)

    @classmethod
    def from_file(cls, path: Path) -> Config:
        """Load a config file; problems raise :class:`promptweave.errors.ConfigError`."""
        data: dict[str, Any] = load_toml(path)
        try:
            loaded = structure(data, _FileConfig, str(path))
        except ConfigError as exc:
            raise ConfigError(exc.source, [_did_you_mean(p) for p in exc.problems]) from exc
        return cls(
            **attrs.asdict(loaded, recurse=False), base_dir=path.parent.resolve(), source=str(path)
        )

    @classmethod
    def discover(cls, explicit: Path | None = None) -> Config:
        """The config in force: ``explicit``, else ``$PROMPTWEAVE_CONFIG``, else
        ``./promptweave.toml`` if it exists, else the defaults."""
        if explicit is not None:
            return cls.from_file(explicit)
        from_env = os.environ.get(CONFIG_ENV)
        if from_env:
            return cls.from_file(Path(from_env))
        local = Path.cwd() / CONFIG_FILE_NAME
        if local.is_file():
            return cls.from_file(local)
        return cls()

    def __attrs_post_init__(self) -> None:
        # ``learn = false`` of a group table is the learning opt-out (docs/groups.md): folded into
        # [learning] opt_out_groups, which every learner and store already honours.
        folded = _group_opt_outs(self.bots)
        missing = [entry for entry in folded if entry not in self.learning.opt_out_groups]
        if missing:
            learning = attrs.evolve(
                self.learning, opt_out_groups=(*self.learning.opt_out_groups, *missing)
            )
            # attrs' documented way to set a field of a frozen instance in its post-init.
            object.__setattr__(self, "learning", learning)

    def resolve_path(self, value: str) -> Path:
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.base_dir / path


def _group_opt_outs(bots: Mapping[str, BotConfig]) -> list[str]:
    """The ``opt_out_groups`` entries the group tables' ``learn = false`` stand for."""
    return [
        f"{bot_id}:{group_id}"
        for bot_id, bot in bots.items()
        for group_id, table in bot.groups.items()
        if table.learn is False
    ]


@attrs.frozen(kw_only=True)
class _FileConfig:
    """What the file may contain (``base_dir`` is not a key)."""

    persona_pack: str = "default"
    overrides_file: str | None = None
    budget: BudgetConfig = BudgetConfig()
    timeline: TimelineConfig = TimelineConfig()
    history: HistoryConfig = HistoryConfig()
    store: StoreConfig = StoreConfig()
    plugins: PluginsConfig = PluginsConfig()
    turn_context: TurnContextConfig = TurnContextConfig()
    provider: ProviderConfig = ProviderConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    routing: RoutingConfig = RoutingConfig()
    session: SessionConfig = SessionConfig()
    ambient: AmbientConfig = AmbientConfig()
    loop: LoopConfig = LoopConfig()
    bots: dict[str, BotConfig] = attrs.field(factory=dict)
    delivery: DeliveryConfig = DeliveryConfig()
    learning: LearningConfig = LearningConfig()
    tokens: TokensConfig = TokensConfig()
    prices: dict[str, ModelPrice] = attrs.field(factory=dict)


#: One step of a cattrs key path: ``.name`` or ``['key']``.
_PATH_PART = lazy_pattern(r"\.([^.\[]+)|\[['\"]?(.*?)['\"]?\]")
_EXTRA_FIELDS = lazy_pattern(r"^extra fields found \((?P<keys>.*)\) @ (?P<path>\$.*)$")


def _did_you_mean(problem: str) -> str:
    """``extra fields found (modle) @ $.provider`` with ``did you mean model?`` when a known
    key of that table is close to the unknown one (difflib, as Python's own errors suggest)."""
    import difflib  # only when a file is wrong: start-up stays lean (tests/project)

    found = _EXTRA_FIELDS.match(problem)
    if found is None:
        return problem
    table = _table_at(found["path"])
    if table is None:
        return problem
    known = [field.name for field in attrs.fields(table)]
    hints = []
    for key in (key.strip() for key in found["keys"].split(",")):
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        if close:
            hints.append(f"{close[0]} for {key}" if "," in found["keys"] else close[0])
    if not hints:
        return problem
    # Before the key path, which the command line reads from the end of the problem.
    return (
        f"extra fields found ({found['keys']}); did you mean {', '.join(hints)}? @ {found['path']}"
    )


def _table_at(path: str) -> type | None:
    """The attrs class of the table at ``path`` (``$``, ``$.provider``, ``$.bots.10001``)."""
    table: Any = _FileConfig
    parts = [name or key for name, key in _PATH_PART.findall(path.removeprefix("$"))]
    for part in parts:
        if not attrs.has(table):
            # A dict of records (``bots``): the key names one of its values.
            if typing.get_origin(table) is dict:
                table = typing.get_args(table)[1]
                continue
            return None
        hints = typing.get_type_hints(table)
        if part not in hints:
            return None
        table = hints[part]
    if typing.get_origin(table) is dict:
        return None
    return table if attrs.has(table) else None
