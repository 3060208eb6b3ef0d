"""Read a provider's response: its text, the tool calls it asks for and the tokens it used.

One pure function per format reads the parsed JSON of a response. None of them raises: a field
that is missing or of the wrong type is left out, so a malformed or truncated response gives
whatever it does hold (at worst no text, no tool call and no usage).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from promptweave.providers.exchange import ToolCall, Usage
from promptweave.providers.prefix import canonical_json

__all__ = [
    "ProviderAnswer",
    "parse_answer",
    "parse_anthropic_messages",
    "parse_openai_chat",
    "parse_openai_responses",
]


@attrs.frozen(kw_only=True)
class ProviderAnswer:
    """What a response says.

    :param text: the reply's text (its text parts joined), ``None`` when it has none.
    :param tool_calls: the function calls the model asked for, in order.
    :param usage: the reported tokens, ``None`` when the response reports none.
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list | tuple) else ()


def _count(value: Any) -> int | None:
    # bool is an int in Python; a token count is never true or false.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _usage(**counts: int | None) -> Usage | None:
    return Usage(**counts) if any(value is not None for value in counts.values()) else None


def _joined(texts: Sequence[str]) -> str | None:
    return "".join(texts) if texts else None


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "{}"
    try:
        return canonical_json(value)
    except (TypeError, ValueError):
        return "{}"


def _tool_call(call_id: Any, name: Any, arguments: Any) -> ToolCall | None:
    if not isinstance(name, str) or not name:
        return None
    return ToolCall(
        id=call_id if isinstance(call_id, str) else "", name=name, arguments=_arguments(arguments)
    )


def _text_parts(parts: Any, kinds: tuple[str, ...]) -> list[str]:
    texts = []
    for part in _list(parts):
        part = _mapping(part)
        if part.get("type") in kinds and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return texts


def parse_openai_chat(data: Any) -> ProviderAnswer:
    """A Chat Completions response: ``choices[0].message`` and ``usage``.

    The text is ``message.content`` (a string, or the ``text`` parts some compatible servers
    send); cached tokens are ``usage.prompt_tokens_details.cached_tokens``, else DeepSeek's
    ``usage.prompt_cache_hit_tokens``, else llama.cpp's ``timings.cache_n`` (the prompt tokens
    its server did not evaluate again); cache writes ``prompt_tokens_details.cache_write_tokens``
    where the server reports them.
    """
    body = _mapping(data)
    choices = _list(body.get("choices"))
    message = _mapping(_mapping(choices[0]).get("message")) if choices else {}
    content = message.get("content")
    text = content if isinstance(content, str) else _joined(_text_parts(content, ("text",)))
    calls = []
    for entry in _list(message.get("tool_calls")):
        entry = _mapping(entry)
        function = _mapping(entry.get("function"))
        call = _tool_call(entry.get("id"), function.get("name"), function.get("arguments"))
        if call is not None:
            calls.append(call)
    usage = _mapping(body.get("usage"))
    details = _mapping(usage.get("prompt_tokens_details"))
    cached = _count(details.get("cached_tokens"))
    if cached is None:
        cached = _count(usage.get("prompt_cache_hit_tokens"))
    if cached is None:
        cached = _count(_mapping(body.get("timings")).get("cache_n"))
    return ProviderAnswer(
        text=text,
        tool_calls=tuple(calls),
        usage=_usage(
            prompt_tokens=_count(usage.get("prompt_tokens")),
            output_tokens=_count(usage.get("completion_tokens")),
            cached_tokens=cached,
            cache_creation_tokens=_count(details.get("cache_write_tokens")),
        ),
    )


def parse_openai_responses(data: Any) -> ProviderAnswer:
    """A Responses response: ``output`` items and ``usage``.

    The text joins the ``output_text`` parts of the ``message`` items; each ``function_call``
    item is a tool call whose id is its ``call_id`` (what ``function_call_output`` names).
    Cached tokens and cache writes are ``usage.input_tokens_details.cached_tokens`` and
    ``cache_write_tokens``.
    """
    body = _mapping(data)
    texts: list[str] = []
    calls = []
    for item in _list(body.get("output")):
        item = _mapping(item)
        if item.get("type") == "message":
            texts.extend(_text_parts(item.get("content"), ("output_text",)))
        elif item.get("type") == "function_call":
            call = _tool_call(
                item.get("call_id") or item.get("id"), item.get("name"), item.get("arguments")
            )
            if call is not None:
                calls.append(call)
    usage = _mapping(body.get("usage"))
    details = _mapping(usage.get("input_tokens_details"))
    return ProviderAnswer(
        text=_joined(texts),
        tool_calls=tuple(calls),
        usage=_usage(
            prompt_tokens=_count(usage.get("input_tokens")),
            output_tokens=_count(usage.get("output_tokens")),
            cached_tokens=_count(details.get("cached_tokens")),
            cache_creation_tokens=_count(details.get("cache_write_tokens")),
        ),
    )


def parse_anthropic_messages(data: Any) -> ProviderAnswer:
    """A Messages response: ``content`` blocks and ``usage``.

    Anthropic's ``input_tokens`` excludes the tokens read from or written to the cache, so
    ``prompt_tokens`` is ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``
    (of those reported). A ``tool_use`` block's ``input`` becomes its compact JSON text.
    """
    body = _mapping(data)
    texts: list[str] = []
    calls = []
    for block in _list(body.get("content")):
        block = _mapping(block)
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            call = _tool_call(block.get("id"), block.get("name"), block.get("input"))
            if call is not None:
                calls.append(call)
    usage = _mapping(body.get("usage"))
    uncached = _count(usage.get("input_tokens"))
    cache_read = _count(usage.get("cache_read_input_tokens"))
    cache_creation = _count(usage.get("cache_creation_input_tokens"))
    parts = [count for count in (uncached, cache_read, cache_creation) if count is not None]
    return ProviderAnswer(
        text=_joined(texts),
        tool_calls=tuple(calls),
        usage=_usage(
            prompt_tokens=sum(parts) if parts else None,
            output_tokens=_count(usage.get("output_tokens")),
            cached_tokens=cache_read,
            cache_creation_tokens=cache_creation,
        ),
    )


_PARSERS: Mapping[str, Callable[[Any], ProviderAnswer]] = {
    "openai_chat": parse_openai_chat,
    "openai_responses": parse_openai_responses,
    "anthropic": parse_anthropic_messages,
}


def parse_answer(api: str, data: Any) -> ProviderAnswer:
    """Read ``data`` (a parsed response) in the format ``api`` (a :class:`ProviderApi` value).

    :raises ValueError: when ``api`` names no known format.
    """
    try:
        parser = _PARSERS[str(api)]
    except KeyError:
        raise ValueError(f"unknown provider format {api!r}") from None
    return parser(data)
