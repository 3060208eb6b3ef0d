"""Function tools in a request: where each format offers them, and a round of calls and results
appended without rewriting a byte of the previous request."""

from __future__ import annotations

import attrs
import pytest
from support_turn_context import example_turn, make_runtime

from promptweave import ProviderApi, build_provider_request, build_turn_context, submit_request
from promptweave.providers.bodies import MAX_CACHE_BREAKPOINTS
from promptweave.providers.exchange import ProviderSpec, ToolCall, ToolSpec
from promptweave.providers.prefix import canonical_json
from promptweave.providers.tools import with_tool_round, with_tools

WEATHER = ToolSpec(
    name="get_weather",
    description="查询一个城市现在的天气",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "description": "城市名"}},
        "required": ["city"],
    },
)
CLOCK = ToolSpec(
    name="get_time", description="现在几点", parameters={"type": "object", "properties": {}}
)
TOOLS = (WEATHER, CLOCK)
CALLS = (
    ToolCall(id="call_1", name="get_weather", arguments='{"city":"杭州"}'),
    ToolCall(id="call_2", name="get_time", arguments="{}"),
)
RESULTS = ((CALLS[1], "19:05"), (CALLS[0], "小雨，12°C"))
MESSAGES_KEY = {"openai_chat": "messages", "openai_responses": "input", "anthropic": "messages"}


def request_for(api, runtime=None, context=None):
    runtime = runtime or make_runtime()
    if context is None:
        turn = example_turn()
        context = build_turn_context(runtime, turn, runtime.render(turn))
    return build_provider_request(runtime, context, ProviderSpec(api=api, model="m"))


@pytest.mark.parametrize(
    ("api", "keys"),
    [
        ("openai_chat", ["model", "tools", "messages", "max_tokens", "prompt_cache_key"]),
        (
            "openai_responses",
            ["model", "instructions", "tools", "input", "max_output_tokens", "prompt_cache_key"],
        ),
        ("anthropic", ["model", "max_tokens", "tools", "system", "messages"]),
    ],
)
def test_tools_go_where_the_provider_reads_them(api, keys):
    runtime = make_runtime()
    request_for(api, runtime)  # the conversation's previous request offered no tools
    request = request_for(api, runtime)
    offered = with_tools(request, TOOLS)
    assert list(offered.body) == keys
    assert offered.trace["tools"] == ["get_weather", "get_time"]
    # Offering tools to a conversation that had none breaks the prefix there, and says so: the
    # body is compared with the previous request, as it is sent, not with itself untooled.
    assert request.prefix.first_difference is None
    assert offered.prefix.first_difference == "tools"
    assert offered.prefix.previous_bytes == request.prefix.previous_bytes


def test_the_first_request_of_a_conversation_with_tools_has_nothing_to_compare():
    assert with_tools(request_for("openai_chat"), TOOLS).prefix is None


def test_the_next_turn_is_compared_with_the_body_sent_with_its_tools():
    runtime = make_runtime()
    sent = with_tools(request_for("openai_chat", runtime), TOOLS)
    submit_request(runtime, sent)
    following = with_tools(request_for("openai_chat", runtime), TOOLS)
    assert following.prefix.previous_bytes == len(sent.body_bytes())
    assert following.prefix.first_difference is None  # the same turn again: one prefix


def test_each_format_writes_the_tool_as_its_api_documents():
    chat = with_tools(request_for("openai_chat"), [WEATHER]).body["tools"]
    assert chat == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "查询一个城市现在的天气",
                "parameters": dict(WEATHER.parameters),
            },
        }
    ]
    responses = with_tools(request_for("openai_responses"), [WEATHER]).body["tools"]
    assert responses == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "查询一个城市现在的天气",
            "parameters": dict(WEATHER.parameters),
            "strict": False,
        }
    ]
    anthropic = with_tools(request_for("anthropic"), [WEATHER]).body["tools"]
    assert anthropic == [
        {
            "name": "get_weather",
            "description": "查询一个城市现在的天气",
            "input_schema": dict(WEATHER.parameters),
        }
    ]


def test_strict_tools_ask_every_format_for_strict_arguments():
    strict = attrs.evolve(WEATHER, strict=True)
    assert with_tools(request_for("openai_chat"), [strict]).body["tools"][0]["function"]["strict"]
    assert with_tools(request_for("openai_responses"), [strict]).body["tools"][0]["strict"]
    assert with_tools(request_for("anthropic"), [strict]).body["tools"][0]["strict"]


def test_offering_again_replaces_the_tools_in_place_and_none_removes_them():
    request = request_for("openai_chat")
    both = with_tools(with_tools(request, [WEATHER]), TOOLS)
    assert [tool["function"]["name"] for tool in both.body["tools"]] == ["get_weather", "get_time"]
    assert list(both.body)[1] == "tools"
    assert with_tools(both, []).body == request.body


def _previous_messages_end(request):
    """Bytes of ``request`` up to the end of its last message (the list's ``]`` excluded)."""
    text = request.body_bytes()
    messages = canonical_json(request.body[MESSAGES_KEY[request.api.value]]).encode()
    return text.index(messages) + len(messages) - 1


@pytest.mark.parametrize("api", list(ProviderApi))
def test_a_tool_round_keeps_the_previous_request_as_a_byte_identical_prefix(api):
    offered = with_tools(request_for(api), TOOLS)
    count = len(offered.body[MESSAGES_KEY[api]])
    answered = with_tool_round(offered, TOOLS, CALLS, RESULTS)
    kept = _previous_messages_end(offered)
    assert answered.body_bytes()[:kept] == offered.body_bytes()[:kept]
    assert answered.prefix.common_prefix_bytes == kept
    appended = answered.body[MESSAGES_KEY[api]][count]
    kind = appended.get("role") or appended["type"]
    assert answered.prefix.first_difference == f"message {count} ({kind})"
    assert answered.trace["tool_rounds"] == 1
    assert answered.trace["request_bytes"] == len(answered.body_bytes())
    again = with_tool_round(answered, TOOLS, [CALLS[0]], [(CALLS[0], "还在下")])
    kept = _previous_messages_end(answered)
    assert again.body_bytes()[:kept] == answered.body_bytes()[:kept]
    assert again.trace["tool_rounds"] == 2


def test_chat_round_is_an_assistant_message_with_tool_calls_then_tool_messages():
    offered = with_tools(request_for("openai_chat"), TOOLS)
    body = with_tool_round(offered, TOOLS, CALLS, RESULTS, assistant_text="我查一下").body
    assistant, *answers = body["messages"][-3:]
    assert assistant == {
        "role": "assistant",
        "content": "我查一下",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"杭州"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "get_time", "arguments": "{}"},
            },
        ],
    }
    assert answers == [
        {"role": "tool", "tool_call_id": "call_2", "content": "19:05"},
        {"role": "tool", "tool_call_id": "call_1", "content": "小雨，12°C"},
    ]
    silent = with_tool_round(offered, TOOLS, CALLS, RESULTS).body["messages"][-3]
    assert silent["content"] is None


def test_responses_round_is_function_call_then_function_call_output_items():
    offered = with_tools(request_for("openai_responses"), TOOLS)
    items = with_tool_round(offered, TOOLS, CALLS, RESULTS, assistant_text="我查一下").body["input"]
    assert items[-5:] == [
        {"role": "assistant", "content": [{"type": "output_text", "text": "我查一下"}]},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"杭州"}',
        },
        {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_2", "output": "19:05"},
        {"type": "function_call_output", "call_id": "call_1", "output": "小雨，12°C"},
    ]


def test_anthropic_round_is_tool_use_blocks_then_tool_result_blocks():
    offered = with_tools(request_for("anthropic"), TOOLS)
    body = with_tool_round(offered, TOOLS, CALLS, RESULTS, assistant_text="我查一下").body
    assistant, results = body["messages"][-2:]
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "我查一下"},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "杭州"}},
            {"type": "tool_use", "id": "call_2", "name": "get_time", "input": {}},
        ],
    }
    assert results == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_2", "content": "19:05"},
            {"type": "tool_result", "tool_use_id": "call_1", "content": "小雨，12°C"},
        ],
    }


def _breakpoints(body):
    blocks = [*body.get("system", []), *(b for m in body["messages"] for b in m["content"])]
    return sum("cache_control" in block for block in blocks)


def test_anthropic_round_takes_a_breakpoint_only_while_fewer_than_four_are_used():
    full = with_tools(request_for("anthropic"), TOOLS)
    assert _breakpoints(full.body) == MAX_CACHE_BREAKPOINTS
    answered = with_tool_round(full, TOOLS, CALLS, RESULTS).body
    assert _breakpoints(answered) == MAX_CACHE_BREAKPOINTS
    assert "cache_control" not in answered["messages"][-1]["content"][-1]

    runtime = make_runtime()
    turn = example_turn()
    context = build_turn_context(runtime, turn, runtime.render(turn))
    bare = attrs.evolve(
        context,
        active_system_prompt=attrs.evolve(context.active_system_prompt, text="", sections=()),
    )
    roomy = with_tools(request_for("anthropic", runtime, bare), TOOLS)
    assert _breakpoints(roomy.body) == 3
    answered = with_tool_round(roomy, TOOLS, CALLS, RESULTS).body
    assert answered["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert _breakpoints(answered) == MAX_CACHE_BREAKPOINTS


def test_a_round_on_a_request_without_tools_offers_them():
    plain = request_for("anthropic")
    answered = with_tool_round(plain, TOOLS, CALLS, RESULTS)
    assert list(answered.body).index("tools") < list(answered.body).index("system")
    assert answered.prefix.first_difference == "tools"


def test_a_round_keeps_section_labels_for_the_prefix_report():
    offered = with_tools(request_for("openai_chat"), TOOLS)
    changed = attrs.evolve(offered, body={**offered.body, "tools": []})
    answered = with_tool_round(changed, TOOLS, CALLS, RESULTS)
    assert answered.prefix.first_difference == "tools"
    labels = {label for label, _ in answered.segments}
    assert "section persona" in labels


@pytest.mark.parametrize(
    ("calls", "results", "message"),
    [
        ((), (), "needs at least one tool call"),
        ((attrs.evolve(CALLS[0], id=""),), (), "needs its provider id"),
        ((CALLS[0], CALLS[0]), ((CALLS[0], "a"),), "ids repeat"),
        (CALLS, ((CALLS[0], "a"),), "exactly one result; not so for: \\['call_2'\\]"),
        (CALLS, (*RESULTS, (CALLS[0], "again")), "exactly one result; not so for: \\['call_1'\\]"),
        (
            (CALLS[0],),
            ((CALLS[0], "a"), (CALLS[1], "b")),
            "not in the round: \\['call_2'\\]",
        ),
    ],
)
def test_an_inconsistent_round_is_a_clear_error(calls, results, message):
    with pytest.raises(ValueError, match=message):
        with_tool_round(request_for("openai_chat"), TOOLS, calls, results)


def test_a_result_must_be_text():
    with pytest.raises(TypeError, match="tool's output as text"):
        with_tool_round(request_for("openai_chat"), TOOLS, CALLS[:1], [(CALLS[0], {"t": 1})])


def test_anthropic_needs_arguments_that_are_a_json_object():
    broken = ToolCall(id="call_9", name="get_weather", arguments='{"city": "杭')
    with pytest.raises(ValueError, match=r"call_9.*JSON object"):
        with_tool_round(request_for("anthropic"), TOOLS, [broken], [(broken, "?")])
    # The OpenAI formats send the text as the model wrote it.
    body = with_tool_round(request_for("openai_chat"), TOOLS, [broken], [(broken, "?")]).body
    assert body["messages"][-2]["tool_calls"][0]["function"]["arguments"] == '{"city": "杭'


def test_tool_names_are_unique():
    with pytest.raises(ValueError, match="tools offered twice: get_weather"):
        with_tools(request_for("openai_chat"), [WEATHER, WEATHER])


def test_tool_spec_holds_its_own_copy_of_plain_json():
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    spec = ToolSpec(name="get_weather", description="", parameters=schema)
    schema["properties"]["city"]["type"] = "integer"
    assert spec.parameters["properties"]["city"]["type"] == "string"
    with pytest.raises(TypeError, match="plain JSON"):
        ToolSpec(name="x", description="", parameters={"when": object()})
    with pytest.raises(TypeError, match="JSON schema object"):
        ToolSpec(name="x", description="", parameters=["city"])
    with pytest.raises(ValueError, match="name"):
        ToolSpec(name="", description="", parameters={})


def test_a_rounds_new_bytes_are_the_round_and_it_is_compared_with_the_request_it_extends():
    runtime = make_runtime()
    request_for("openai_chat", runtime)
    offered = with_tools(request_for("openai_chat", runtime), TOOLS)
    assert offered.trace["new_bytes"] == offered.prefix.new_bytes > 0
    answered = with_tool_round(offered, TOOLS, CALLS, RESULTS)
    appended = answered.body["messages"][len(offered.body["messages"]) :]
    assert answered.prefix.new_bytes == sum(len(canonical_json(m).encode()) + 1 for m in appended)
    assert answered.prefix.previous_bytes == len(offered.body_bytes())
    assert answered.prefix.uncached_bytes < 1.2 * answered.prefix.new_bytes
