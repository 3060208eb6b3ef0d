"""Contrib plugin ``offline_model``: a deterministic, offline stand-in for a model.

It is **not an LLM** and never pretends to be one: every bubble it writes starts with
``离线回声：`` ("offline echo"), and ``promptweave replay`` labels it in every output. It exists so a
replay, a demo or a test can run the whole live loop without a network: it answers from the
request's own content, so bubbles, the reply contract, quotes, tools and stickers are exercised.

- The current user message (the last user message of the request, its persona prefix line and
  sidecar left out) is echoed back, cut to a short first bubble.
- A question (``？``, ``?``, ``吗``, ``呢``) gets a second bubble saying a real model would answer.
- An emotional message (哈哈, 累, 烦, 难绷…) ends with a ``[表情：…]`` sticker line.
- When the request offers tools, has no tool result yet and its turn policy says the turn needs
  a tool, it calls one: ``roll_dice`` for a message about dice, ``upcoming_events`` for one
  about events, else the first offered tool.
  With tool results in the request, it reports them.
- A message with nothing to echo gets ``PASS``.

It reports no token usage: it has none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from promptweave import Config, ProviderApi, ProviderRequest, SubmitResult, hookimpl
from promptweave.providers.exchange import ToolCall

__all__ = ["LABEL", "MARK", "answer_request", "submit_request", "submit_request_async"]

#: How replays and reports name this model.
LABEL = "offline stand-in (deterministic, not an LLM)"
#: The start of every bubble it writes.
MARK = "离线回声："
ECHO_CHARS = 18
RESULT_CHARS = 60
_QUESTION = re.compile(r"[？?]|吗|呢")
_EMOTION = re.compile(r"哈哈|笑死|难绷|绷不住|累|烦|破防|麻了|哭")
_DICE = re.compile(r"骰|dice|roll", re.IGNORECASE)
_EVENTS = re.compile(r"活动|安排|聚会|桌游")
#: The line the turn policy section writes on a turn that needs a tool: the bot offers its
#: tools on every turn, and like a model the stand-in calls one only when the turn asks for it.
TOOL_TURN_LINE = "这轮需要完成任务"


def _texts(content: Any) -> list[str]:
    """The text parts of a message's content in any of the three formats."""
    if isinstance(content, str):
        return [content]
    parts = []
    for part in content if isinstance(content, Sequence) else ():
        if isinstance(part, Mapping) and part.get("type") in ("text", "input_text"):
            parts.append(str(part.get("text", "")))
    return parts


def _messages(request: ProviderRequest) -> list[Mapping[str, Any]]:
    body = request.body
    items = body.get("messages") if request.api is not ProviderApi.OPENAI_RESPONSES else None
    if items is None:
        items = body.get("input") or []
    return [item for item in items if isinstance(item, Mapping)]


def _current_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The last user message's own words: no persona prefix line, no sidecar block."""
    for item in reversed(messages):
        if item.get("role") != "user":
            continue
        texts = _texts(item.get("content"))
        if not texts:
            continue
        lines = "\n".join(texts).splitlines()
        words = [
            line.strip() for line in lines if line.strip() and not line.startswith(("【", "（"))
        ]
        if words:
            return words[0]
    return ""


def _tool_results(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    results: list[str] = []
    for item in messages:
        if item.get("role") == "tool":
            results.append(str(item.get("content", "")))
        elif item.get("type") == "function_call_output":
            results.append(str(item.get("output", "")))
        elif item.get("role") == "user" and isinstance(item.get("content"), list):
            results += [
                str(part.get("content", ""))
                for part in item["content"]
                if isinstance(part, Mapping) and part.get("type") == "tool_result"
            ]
    return results


def _offered_tools(request: ProviderRequest) -> list[str]:
    names = []
    for tool in request.body.get("tools") or ():
        if isinstance(tool, Mapping):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
            if name:
                names.append(str(name))
    return names


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def answer_request(request: ProviderRequest) -> SubmitResult:
    """The stand-in's answer to one request (pure: the same request, the same answer)."""
    messages = _messages(request)
    text = _current_text(messages)
    results = _tool_results(messages)
    if results:
        shown = "；".join(_short(result, RESULT_CHARS) for result in results[-2:])
        return _ok(f"{MARK}工具结果是 {shown}")
    tools = _offered_tools(request)
    if tools and TOOL_TURN_LINE in request.body_text():
        wanted = (
            "roll_dice"
            if _DICE.search(text)
            else "upcoming_events"
            if _EVENTS.search(text)
            else tools[0]
        )
        name = wanted if wanted in tools else tools[0]
        call = ToolCall(id=f"offline_{name}", name=name, arguments=json.dumps({}))
        return SubmitResult(sent=True, status="ok", text=None, tool_calls=(call,))
    if not text.strip(" .。!！~～"):
        return _ok("PASS")
    lines = [f"{MARK}{_short(text, ECHO_CHARS)}"]
    if _QUESTION.search(text):
        lines.append(f"{MARK}这个要等真模型来答")
    if _EMOTION.search(text):
        lines.append("[表情：笑]")
    return _ok("\n".join(lines))


def _ok(text: str) -> SubmitResult:
    return SubmitResult(sent=True, status="ok", text=text, raw={"model": LABEL})


@hookimpl
def submit_request(request: ProviderRequest, config: Config) -> SubmitResult:
    return answer_request(request)


@hookimpl
def submit_request_async(request: ProviderRequest, config: Config) -> Any:
    async def answer() -> SubmitResult:
        return answer_request(request)

    return answer()
