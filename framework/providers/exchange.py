"""The records of a provider request: its format, what the provider accepts, the request itself,
the tools it may offer, and what submitting it gave: text, tool calls and token usage
(``docs/turn_context.md``)."""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from promptweave.config import ProviderConfig
from promptweave.messages.prompt_message import ImageLimits
from promptweave.providers.prefix import PrefixReport, TextLabels, canonical_json

__all__ = [
    "DEFAULT_MODELS",
    "ProviderApi",
    "ProviderRequest",
    "ProviderSpec",
    "SubmitResult",
    "ToolCall",
    "ToolSpec",
    "Usage",
]


class ProviderApi(enum.StrEnum):
    """The request formats promptweave writes."""

    OPENAI_CHAT = "openai_chat"
    OPENAI_RESPONSES = "openai_responses"
    ANTHROPIC = "anthropic"

    @property
    def path(self) -> str:
        """The endpoint path, relative to the API's base URL."""
        return {
            ProviderApi.OPENAI_CHAT: "/chat/completions",
            ProviderApi.OPENAI_RESPONSES: "/responses",
            ProviderApi.ANTHROPIC: "/v1/messages",
        }[self]

    @property
    def takes_prompt_cache_key(self) -> bool:
        """The format routes its prompt cache by a ``prompt_cache_key`` (the OpenAI ones)."""
        return self is not ProviderApi.ANTHROPIC


#: The model used when ``provider.model`` is empty.
DEFAULT_MODELS = {
    ProviderApi.OPENAI_CHAT: "gpt-4o-mini",
    ProviderApi.OPENAI_RESPONSES: "gpt-4o-mini",
    ProviderApi.ANTHROPIC: "claude-sonnet-4-5",
}


@attrs.frozen(kw_only=True)
class ProviderSpec:
    """What a provider accepts.

    :param api: the request format.
    :param model: the model name.
    :param supports_images: the model declares image input; else (the default) images become
        ``[图片]`` and nothing is downloaded.
    :param inline_images: with ``supports_images``, send images as base64, fetched through
        ``fetch_image`` before the request (the default, as the reference bot does,
        ``docs/design.md#images``: a platform's image URLs are often out of the provider's reach);
        ``False`` sends the URLs.
    :param max_tokens: the reply's token limit.
    :param image_limits: size, type and timeout limits of fetched images.
    :param prompt_cache_key: send the conversation's ``prompt_cache_key`` (OpenAI formats only;
        see :attr:`promptweave.turn_context.context.TurnContext.prompt_cache_key`).
    """

    api: ProviderApi = attrs.field(converter=ProviderApi)
    model: str = ""
    supports_images: bool = False
    inline_images: bool = True
    max_tokens: int = 1024
    image_limits: ImageLimits = attrs.field(factory=ImageLimits)
    prompt_cache_key: bool = True

    @classmethod
    def from_config(cls, config: ProviderConfig, api: str | None = None) -> ProviderSpec:
        """The spec of ``[provider]``; ``api`` overrides the configured format."""
        chosen = ProviderApi(api or config.api)
        return cls(
            api=chosen,
            model=config.model or DEFAULT_MODELS[chosen],
            supports_images=config.supports_images,
            inline_images=config.inline_images,
            max_tokens=config.max_tokens,
            image_limits=ImageLimits.from_config(config),
            prompt_cache_key=config.prompt_cache_key,
        )


@attrs.frozen(kw_only=True)
class ProviderRequest:
    """One request, ready to send.

    :param api: its format.
    :param path: the endpoint path (``/chat/completions``…).
    :param body: the exact JSON body.
    :param segments: the body's text as labelled pieces (for the prefix report).
    :param prefix: the comparison with the conversation's previous request, when there was one.
    :param trace: images sent, inlined and degraded (with reasons), cache breakpoints, prefix;
        the tools offered and the tool rounds, once :func:`promptweave.with_tools` or
        :func:`promptweave.with_tool_round` added them.
    :param stage_durations_ms: milliseconds spent in ``request`` (the whole build) and, when
        images were fetched to be sent inline, within it ``request.images``. Timing is not part of
        the value: two requests that differ only here are equal.
    :param text_labels: which section each piece of the body's system prompt belongs to, so a
        request derived from this one (a tool round) reports its prefix by section too.
    :param compared_with: the body ``prefix`` compares this one with (the conversation's
        latest request when it was built; the request a tool round extends), so a request
        derived from this one (:func:`promptweave.with_tools`) is compared with the same.
    """

    api: ProviderApi
    path: str
    body: Mapping[str, Any]
    conversation_key: str
    turn_id: str
    segments: tuple[tuple[str, str], ...] = attrs.field(repr=False, eq=False)
    prefix: PrefixReport | None = None
    trace: Mapping[str, Any] = attrs.field(factory=dict)
    stage_durations_ms: Mapping[str, float] = attrs.field(factory=dict, eq=False)
    text_labels: TextLabels = attrs.field(factory=dict, repr=False, eq=False)
    compared_with: bytes | None = attrs.field(default=None, repr=False, eq=False)
    # The body's text and bytes, made once: the request is a value (a changed body is a new
    # request, attrs.evolve), and its body is read at each step of the turn.
    _text: str | None = attrs.field(default=None, init=False, repr=False, eq=False)
    _bytes: bytes | None = attrs.field(default=None, init=False, repr=False, eq=False)

    def body_text(self) -> str:
        """The body as sent: compact JSON, UTF-8 characters kept, key order kept (serialized
        once; the body is not changed in place once the request is built)."""
        text = self._text
        if text is None:
            text = canonical_json(self.body)
            object.__setattr__(self, "_text", text)
        return text

    def body_bytes(self) -> bytes:
        """:meth:`body_text` in UTF-8."""
        found = self._bytes
        if found is None:
            found = self.body_text().encode()
            object.__setattr__(self, "_bytes", found)
        return found


def _schema(value: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"tool parameters must be a JSON schema object, not {type(value).__name__}")
    # A copy, so a schema changed by its owner later never changes a request built earlier.
    try:
        copied: Mapping[str, Any] = json.loads(canonical_json(value))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"tool parameters must be plain JSON: {exc}") from None
    return copied


@attrs.frozen(kw_only=True)
class ToolSpec:
    """A function the model may call.

    :param name: the function's name (OpenAI allows ``a-z A-Z 0-9 _ -``, at most 64 characters).
    :param description: what it does, for the model.
    :param parameters: the JSON schema of its arguments (an ``object`` schema).
    :param strict: ask the provider to hold the arguments to the schema exactly (OpenAI's and
        Anthropic's ``strict``; the schema must then follow their strict-mode rules). Off by
        default, as in Chat Completions; Responses always receives the flag, since it would
        otherwise turn strict mode on.
    """

    name: str = attrs.field(validator=attrs.validators.min_len(1))
    description: str
    parameters: Mapping[str, Any] = attrs.field(converter=_schema)
    strict: bool = False


@attrs.frozen(kw_only=True)
class Usage:
    """The tokens a provider reports for one response; ``None`` where it reports nothing.

    The fields mean the same whatever the format (``docs/turn_context.md``, "Usage").

    :param prompt_tokens: every prompt token, cached or not. Anthropic reports its uncached input
        apart from the cache reads and writes; here they are summed, as OpenAI counts them.
    :param output_tokens: the tokens generated.
    :param cached_tokens: the prompt tokens served from the provider's prompt cache.
    :param cache_creation_tokens: the prompt tokens written to the cache (Anthropic's
        ``cache_creation_input_tokens``; OpenAI's ``cache_write_tokens`` where it reports them).
    """

    prompt_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cache_creation_tokens: int | None = None


@attrs.frozen(kw_only=True)
class ToolCall:
    """One function call the model asked for.

    :param id: the provider's id of the call, which its result must name (OpenAI's ``call_…``,
        Anthropic's ``toolu_…``).
    :param name: the function's name.
    :param arguments: the arguments as the raw JSON text (``"{}"`` when the provider sent none).
    """

    id: str
    name: str
    arguments: str


def _tool_calls(calls: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(calls)


@attrs.frozen(kw_only=True)
class SubmitResult:
    """What submitting a request gave.

    :param sent: whether the request reached the provider: ``False`` for the offline default and
        when no connection could be made; ``True`` once any attempt got an answer or was written
        (a read timeout may still be billed).
    :param text: the reply's text, when there is one.
    :param status: ``offline``, ``ok`` or ``error``.
    :param detail: why, for ``offline`` and ``error``.
    :param raw: the provider's parsed response.
    :param tool_calls: the function calls the model asked for, in order.
    :param usage: the tokens the provider reported, when it reported any.
    :param duration_ms: how long :func:`promptweave.submit_request` (or
        :func:`promptweave.asubmit_request`) took, in milliseconds (set there; not part of
        equality).
    """

    sent: bool
    status: str
    text: str | None = None
    detail: str = ""
    raw: Mapping[str, Any] | None = None
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_tool_calls)
    usage: Usage | None = None
    duration_ms: float = attrs.field(default=0.0, eq=False)
