"""Tools: registration, permissions, intent words, and running the model's calls."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from loop_support import message

from promptweave import (
    Config,
    DuplicateRegistrationError,
    IncomingEvent,
    Promptweave,
    Stores,
    Tool,
    ToolCallContext,
    hookimpl,
)
from promptweave.loop.tools import ToolRunner
from promptweave.providers.exchange import ToolCall

EVERYONE = {"type": "object", "properties": {}}


class _Tools:
    def __init__(self, *tools: Tool) -> None:
        self.tools = tools

    @hookimpl
    def register_tools(self, register):  # type: ignore[no-untyped-def]
        for tool in self.tools:
            register(tool)


def _echo(arguments, context):  # type: ignore[no-untyped-def]
    return f"{context.sender_role}:{arguments.get('say', '')}"


def _event(role: str = "member", text: str = "小织 帮我查公告") -> IncomingEvent:
    return IncomingEvent(
        platform="test", bot_id="10001", group_id="20001", message=message(text), sender_role=role
    )


def _runner(*tools: Tool, role: str = "member", timeout_s: float = 1.0) -> ToolRunner:
    return ToolRunner(
        tools={tool.name: tool for tool in tools},
        context=ToolCallContext(
            bot_id="10001", group_id="20001", user_id="30001", sender_role=role
        ),
        timeout_s=timeout_s,
    )


def test_hook_register_tools() -> None:
    tool = Tool(name="echo", description="Echo.", parameters=EVERYONE, call=_echo)
    runtime = Promptweave.from_config(
        Config(), extra_plugins=[_Tools(tool)], stores=Stores.in_memory()
    )
    assert runtime.registries.tools["echo"].item is tool
    with pytest.raises(DuplicateRegistrationError, match="tool 'echo'"):
        Promptweave.from_config(
            Config(), extra_plugins=[_Tools(tool), _Tools(tool)], stores=Stores.in_memory()
        )


def test_tool_parameters_must_be_an_object_schema() -> None:
    with pytest.raises(ValueError, match="JSON schema object"):
        Tool(name="bad", description="", parameters={"type": "string"}, call=_echo)


def test_admin_only_tool_is_offered_and_required_only_for_admins() -> None:
    admin_only = Tool(
        name="notice",
        description="Read the notice.",
        parameters=EVERYONE,
        call=_echo,
        permitted=lambda context: context.sender_role in ("owner", "admin"),
        intent_words=("公告",),
    )
    member = _runner(admin_only, role="member")
    admin = _runner(admin_only, role="admin")
    assert member.specs() == () and member.required_by("帮我查公告") is None
    assert [spec.name for spec in admin.specs()] == ["notice"]
    assert admin.required_by("帮我查公告") == "notice"


def test_calls_are_answered_refused_failed_or_timed_out_and_traced() -> None:
    def raises(arguments, context):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    def hangs(arguments, context):  # type: ignore[no-untyped-def]
        time.sleep(2)
        return "late"

    tools = (
        Tool(name="echo", description="", parameters=EVERYONE, call=_echo),
        Tool(
            name="secret",
            description="",
            parameters=EVERYONE,
            call=_echo,
            permitted=lambda c: False,
        ),
        Tool(name="raises", description="", parameters=EVERYONE, call=raises),
        Tool(name="hangs", description="", parameters=EVERYONE, call=hangs),
        Tool(name="number", description="", parameters=EVERYONE, call=lambda a, c: 42),
    )
    calls = [
        ToolCall(id="1", name="echo", arguments='{"say": "hi"}'),
        ToolCall(id="2", name="secret", arguments="{}"),
        ToolCall(id="3", name="raises", arguments="{}"),
        ToolCall(id="4", name="hangs", arguments="{}"),
        ToolCall(id="5", name="number", arguments="{}"),
        ToolCall(id="6", name="missing", arguments="{}"),
        ToolCall(id="7", name="echo", arguments="[1, 2]"),
    ]
    trace: dict[str, object] = {}
    results = asyncio.run(_runner(*tools, timeout_s=0.2).run(calls, trace))
    texts = [text for _, text in results]
    assert texts[0] == "member:hi"
    assert texts[1].startswith("refused")
    assert texts[2] == "failed: RuntimeError: boom"
    assert texts[3].startswith("failed: the tool did not answer within 0.2 s")
    assert texts[4] == "failed: the tool returned int, not text"
    assert texts[5].startswith("error: no tool named 'missing'")
    assert texts[6].startswith("error: the arguments are not a JSON object")
    assert [entry["status"] for entry in trace["tools"]] == [  # type: ignore[index]
        "ok",
        "refused",
        "failed",
        "timeout",
        "failed",
        "unknown",
        "bad_arguments",
    ]


def test_async_tool_is_awaited_and_the_context_carries_the_runtime_random_source() -> None:
    async def roll(arguments, context):  # type: ignore[no-untyped-def]
        return str(context.rng.randint(1, 6))

    runner = ToolRunner(
        tools={"roll": Tool(name="roll", description="", parameters=EVERYONE, call=roll)},
        context=ToolCallContext(bot_id="1", group_id="2", user_id="3", rng=random.Random(7)),
        timeout_s=1.0,
    )
    first = asyncio.run(runner.run([ToolCall(id="1", name="roll", arguments="{}")], {}))
    assert first[0][1] == str(random.Random(7).randint(1, 6))
