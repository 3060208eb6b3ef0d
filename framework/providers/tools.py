"""Function tools in a provider request: offer them, then feed back a round of calls and results.

:func:`with_tools` offers tools on a built request; :func:`with_tool_round` appends the calls the
model made and their results, so the model can continue. Both return a new
:class:`promptweave.ProviderRequest` whose body is the previous body with the additions; nothing
already there is rewritten, so a tool round keeps the whole previous request as a byte-identical
prefix (``docs/turn_context.md``, "Tools").

Each format declares tools at the place where the provider reads them, which is also where a
change of the tool list breaks its prompt cache: Anthropic reads tools before the system prompt
(``tools`` precedes ``system``), OpenAI Chat Completions before the conversation (``tools``
precedes ``messages``), OpenAI Responses after the instructions (``tools`` between
``instructions`` and ``input``). Offer the same tools on every request of a conversation and they
stay inside the cached prefix.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from promptweave.providers.bodies import EPHEMERAL, MAX_CACHE_BREAKPOINTS
from promptweave.providers.exchange import ProviderRequest, ToolCall, ToolSpec
from promptweave.providers.prefix import canonical_json, compare_request_prefix, labelled_segments

__all__ = ["with_tool_round", "with_tools"]

Body = dict[str, Any]


# -- the three formats ------------------------------------------------------------------------


def _chat_tool(tool: ToolSpec) -> Body:
    function: Body = {
        "name": tool.name,
        "description": tool.description,
        "parameters": dict(tool.parameters),
    }
    if tool.strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _responses_tool(tool: ToolSpec) -> Body:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": dict(tool.parameters),
        "strict": tool.strict,
    }


def _anthropic_tool(tool: ToolSpec) -> Body:
    offered: Body = {
        "name": tool.name,
        "description": tool.description,
        "input_schema": dict(tool.parameters),
    }
    if tool.strict:
        offered["strict"] = True
    return offered


def _chat_round(
    calls: Sequence[ToolCall], results: Sequence[tuple[ToolCall, str]], text: str | None
) -> list[Body]:
    assistant: Body = {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ],
    }
    answers = [
        {"role": "tool", "tool_call_id": call.id, "content": output} for call, output in results
    ]
    return [assistant, *answers]


def _responses_round(
    calls: Sequence[ToolCall], results: Sequence[tuple[ToolCall, str]], text: str | None
) -> list[Body]:
    items: list[Body] = []
    if text:
        items.append({"role": "assistant", "content": [{"type": "output_text", "text": text}]})
    items += [
        {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        }
        for call in calls
    ]
    items += [
        {"type": "function_call_output", "call_id": call.id, "output": output}
        for call, output in results
    ]
    return items


def _anthropic_input(call: ToolCall) -> Any:
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        raise ValueError(
            f"tool call {call.id!r} ({call.name}): Anthropic needs the arguments as a JSON "
            f"object, got {call.arguments[:80]!r}"
        )
    return arguments


def _anthropic_round(
    calls: Sequence[ToolCall], results: Sequence[tuple[ToolCall, str]], text: str | None
) -> list[Body]:
    content: list[Body] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": _anthropic_input(call)}
        for call in calls
    ]
    answers: list[Body] = [
        {"type": "tool_result", "tool_use_id": call.id, "content": output}
        for call, output in results
    ]
    return [{"role": "assistant", "content": content}, {"role": "user", "content": answers}]


@attrs.frozen
class _Format:
    tool: Callable[[ToolSpec], Body]
    tools_before: tuple[str, ...]
    messages_key: str
    round: Callable[[Sequence[ToolCall], Sequence[tuple[ToolCall, str]], str | None], list[Body]]


_FORMATS = {
    "openai_chat": _Format(_chat_tool, ("messages",), "messages", _chat_round),
    "openai_responses": _Format(_responses_tool, ("input",), "input", _responses_round),
    "anthropic": _Format(_anthropic_tool, ("system", "messages"), "messages", _anthropic_round),
}


# -- building the new request -----------------------------------------------------------------


def _with_key_before(body: Mapping[str, Any], key: str, value: Any, before: Sequence[str]) -> Body:
    """``body`` with ``key`` set: in place when present, else right before the first of
    ``before`` that the body has (at the end when it has none)."""
    if key in body:
        return {**body, key: value}
    anchor = next((name for name in before if name in body), None)
    placed: Body = {}
    for name, item in body.items():
        if name == anchor:
            placed[key] = value
        placed[name] = item
    if anchor is None:
        placed[key] = value
    return placed


def _offer(body: Mapping[str, Any], api: str, tools: Sequence[ToolSpec]) -> Body:
    names = [tool.name for tool in tools]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"tools offered twice: {', '.join(duplicates)}")
    form = _FORMATS[api]
    if not tools:
        return {name: item for name, item in body.items() if name != "tools"}
    return _with_key_before(body, "tools", [form.tool(tool) for tool in tools], form.tools_before)


def _check_round(calls: Sequence[ToolCall], results: Sequence[tuple[ToolCall, str]]) -> None:
    if not calls:
        raise ValueError("a tool round needs at least one tool call")
    ids = [call.id for call in calls]
    if not all(ids):
        raise ValueError("every tool call of a round needs its provider id")
    if len(set(ids)) != len(ids):
        raise ValueError(f"tool call ids repeat in the round: {ids}")
    answered = [call.id for call, _ in results]
    unknown = [call_id for call_id in answered if call_id not in ids]
    if unknown:
        raise ValueError(f"results name tool calls that are not in the round: {unknown}")
    missing = [call_id for call_id in ids if answered.count(call_id) != 1]
    if missing:
        raise ValueError(f"each tool call needs exactly one result; not so for: {missing}")
    outputs = [output for _, output in results]
    if not all(isinstance(output, str) for output in outputs):
        raise TypeError("a tool result is the tool's output as text (str)")


def _breakpoints(body: Mapping[str, Any]) -> int:
    blocks = [*(body.get("tools") or []), *(body.get("system") or [])]
    for message in body.get("messages") or []:
        if isinstance(message.get("content"), list):
            blocks += message["content"]
    return sum(1 for block in blocks if isinstance(block, Mapping) and "cache_control" in block)


def _rebuilt(
    request: ProviderRequest,
    body: Body,
    trace_update: Mapping[str, Any],
    *,
    compared_with: bytes | None,
    new_bytes: int,
) -> ProviderRequest:
    segments = tuple(labelled_segments(body, request.text_labels))
    prefix = (
        compare_request_prefix(compared_with, segments, new_bytes=new_bytes)
        if compared_with is not None
        else None
    )
    trace = {
        **request.trace,
        **trace_update,
        "request_bytes": sum(len(piece.encode()) for _, piece in segments),
        "new_bytes": new_bytes,
        "prefix": prefix.to_json() if prefix is not None else None,
    }
    return attrs.evolve(
        request,
        body=body,
        segments=segments,
        prefix=prefix,
        trace=trace,
        compared_with=compared_with,
    )


def with_tools(request: ProviderRequest, tools: Sequence[ToolSpec]) -> ProviderRequest:
    """``request`` with ``tools`` offered (replacing any tools it offered; none removes them).

    The tools go where the format reads them (see the module's documentation); the request's
    ``prefix`` then compares it with what ``request`` was compared with (the conversation's
    previous request), as the body that is sent.

    :raises ValueError: when two tools share a name.
    """
    body = _offer(request.body, request.api.value, tools)
    return _rebuilt(
        request,
        body,
        {"tools": [tool.name for tool in tools]},
        compared_with=request.compared_with,
        new_bytes=int(request.trace.get("new_bytes", 0)),
    )


def with_tool_round(
    request: ProviderRequest,
    tools: Sequence[ToolSpec],
    calls: Sequence[ToolCall],
    results: Sequence[tuple[ToolCall, str]],
    *,
    assistant_text: str | None = None,
) -> ProviderRequest:
    """``request`` followed by one round of tool use: the model's calls, then their results.

    The model's turn (``assistant_text``, when it said something beside its calls, then the
    calls) and the results are appended after the last message, as each format wants them:
    OpenAI Chat Completions an assistant message with ``tool_calls`` and one ``role: tool``
    message per result; Responses ``function_call`` and ``function_call_output`` items; Anthropic
    an assistant message with ``tool_use`` blocks and a user message with ``tool_result`` blocks
    (which takes a ``cache_control`` breakpoint while the request holds fewer than four).
    ``tools`` are offered as by :func:`with_tools` when the request does not already offer
    exactly them. Everything of ``request`` up to its last message stays byte for byte, which
    ``prefix`` of the result reports.

    :param calls: the calls the model made (``SubmitResult.tool_calls``).
    :param results: ``(call, output)`` for each call, once each.
    :param assistant_text: the text the model sent with its calls (``SubmitResult.text``).
    :raises ValueError: when a call has no id, is answered more or less than once, a result
        names a call not in ``calls``, two tools share a name, or (Anthropic) a call's
        arguments are not a JSON object.
    """
    _check_round(calls, results)
    form = _FORMATS[request.api.value]
    body = dict(request.body)
    offered = [form.tool(tool) for tool in tools]
    if body.get("tools") != offered:
        body = _offer(body, request.api.value, tools)
    appended = form.round(calls, results, assistant_text)
    if request.api.value == "anthropic" and _breakpoints(body) < MAX_CACHE_BREAKPOINTS:
        last = appended[-1]["content"][-1]
        appended[-1]["content"][-1] = {**last, "cache_control": dict(EPHEMERAL)}
    body[form.messages_key] = [*body.get(form.messages_key, []), *appended]
    rounds = int(request.trace.get("tool_rounds", 0)) + 1
    trace_update = {"tools": [tool.name for tool in tools], "tool_rounds": rounds}
    # What is new is the round: everything before it is the request it extends, sent already.
    fresh = sum(len(canonical_json(item).encode()) + 1 for item in appended)
    return _rebuilt(
        request, body, trace_update, compared_with=request.body_bytes(), new_bytes=fresh
    )
